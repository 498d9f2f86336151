"""python manage.py export --series NAME --what selftimes [--format json|csv]"""

import csv
import json
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
        rows = selectors.selftime_rows(series)
        fields = ["release", "run", "function", "self_us", "total_us", "calls"]
        if opts["format"] == "csv":
            writer = csv.DictWriter(self.stdout, fieldnames=fields, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        else:
            self.stdout.write("[", ending="")
            for i, row in enumerate(rows):
                self.stdout.write(("," if i else "") + "\n" + json.dumps(row), ending="")
            self.stdout.write("\n]")
