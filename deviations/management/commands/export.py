"""python manage.py export --series NAME --what selftimes [--format json|csv]"""

import csv
import json
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from deviations import selectors
from deviations.models import Series


class Command(BaseCommand):
    help = (
        "Write a series' data to standard output. --what selftimes: one row per run and "
        "function with release, run (the file name given at ingest), function, self_us, "
        "total_us, calls."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--series", required=True)
        parser.add_argument("--what", choices=["selftimes"], required=True)
        parser.add_argument("--format", choices=["json", "csv"], default="json")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            series = Series.objects.get(name=opts["series"])
        except Series.DoesNotExist as exc:
            raise CommandError(f"no series named {opts['series']!r}") from exc
        try:
            self._write(series, opts["format"])
        except BrokenPipeError:
            # The reader stopped early (`| head`): not an error. Point stdout at /dev/null so
            # that the interpreter's final flush does not fail again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

    def _write(self, series: Series, fmt: str) -> None:
        rows = selectors.selftime_rows(series)
        fields = ["release", "run", "function", "self_us", "total_us", "calls"]
        if fmt == "csv":
            writer = csv.DictWriter(self.stdout, fieldnames=fields, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        else:
            self.stdout.write("[", ending="")
            for i, row in enumerate(rows):
                self.stdout.write(("," if i else "") + "\n" + json.dumps(row), ending="")
            self.stdout.write("\n]")
