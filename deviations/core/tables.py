"""Rows written as CSV for people: the one CSV writer of pages and commands.

Every string cell goes through ``deviations.core.text.csv_cell``, so a function or probe
name such as ``=HYPERLINK(...)`` opens in a spreadsheet as text, not as a formula.
"""

import csv
from collections.abc import Iterable
from typing import Any

from deviations.core.text import csv_cell


def write_csv(out: Any, rows: Iterable[dict[str, Any]], fields: list[str]) -> None:
    """A header line, then one line per row (only ``fields``, in that order)."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(fields)
    writer.writerows([csv_cell(row.get(f)) for f in fields] for row in rows)
