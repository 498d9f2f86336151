"""python manage.py analyse (--series NAME | --all) [--full]"""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from deviations.management import base
from deviations.traces.analysis import analyse_series
from deviations.traces.models import Series
from deviations.traces.notify import after_analysis


class Command(base.Command):
    help = (
        "Compute a series' per-release statistics (median and mean with their CIs) and the "
        "verdicts between consecutive releases for both rules (shifts, the default, and "
        "paper: seed 003's), both metrics (self, total) and both estimators, and store them. "
        "Without --full, does nothing when the stored analysis already saw every run, and "
        "otherwise recomputes only what the new runs change (the columns with new runs and "
        "the verdicts whose window of releases holds them). A series whose "
        "analysis needs more than DEVIATIONS_ANALYSIS_MEMORY_MB (default 1024) is analysed "
        "in chunks of functions, one after another in this process."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--series", help="the series to analyse")
        which.add_argument(
            "--all", action="store_true",
            help="every series (e.g. after an upgrade whose migration dropped the stored "
                 "analyses)",
        )
        parser.add_argument(
            "--full", action="store_true",
            help="recompute everything, even when up to date",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["all"]:
            chosen = list(Series.objects.order_by("name"))
        else:
            try:
                chosen = [Series.objects.get(name=opts["series"])]
            except Series.DoesNotExist as exc:
                raise CommandError(f"no series named {opts['series']!r}") from exc
        for series in chosen:
            self.stdout.write(f"{series.name}: {analyse_series(series.pk, force=opts['full'])}")
            after_analysis(series.pk)  # its alerts, and the emails that are due
