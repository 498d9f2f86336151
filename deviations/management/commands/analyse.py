"""python manage.py analyse --series NAME [--full]"""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from deviations.analysis import analyse_series
from deviations.models import Series


class Command(BaseCommand):
    help = (
        "Compute a series' per-release statistics (median and mean with their CIs) and the "
        "verdicts between consecutive releases for both rules (paper, recommended), both "
        "metrics (self, total) and both estimators, and store them. Without --full, does "
        "nothing when the stored analysis already saw every run."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--series", required=True)
        parser.add_argument(
            "--full", action="store_true", help="recompute even when up to date"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            series = Series.objects.get(name=opts["series"])
        except Series.DoesNotExist as exc:
            raise CommandError(f"no series named {opts['series']!r}") from exc
        self.stdout.write(f"{series.name}: {analyse_series(series.pk, force=opts['full'])}")
