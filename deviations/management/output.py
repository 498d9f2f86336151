"""Rows to standard output as CSV or JSON, for the export commands."""

import json
import os
import sys
from collections.abc import Iterable
from typing import Any

from deviations.core.tables import write_csv


def write_rows(out: Any, rows: Iterable[dict[str, Any]], fields: list[str], fmt: str) -> None:
    """Write ``rows`` to a command's stdout (a JSON array streamed row by row, or CSV).

    A reader that stops early (``| head``) is not an error: stdout is pointed at /dev/null
    so that the interpreter's final flush does not fail again.
    """
    try:
        if fmt == "csv":
            write_csv(out, rows, fields)
        else:
            out.write("[", ending="")
            for i, row in enumerate(rows):
                out.write(("," if i else "") + "\n" + json.dumps(row), ending="")
            out.write("\n]")
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
