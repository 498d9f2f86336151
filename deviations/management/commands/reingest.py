"""python manage.py reingest --series NAME [--thread-name T --process-name P | --all-threads]"""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from deviations.management import base
from deviations.traces.models import Series


class Command(base.Command):
    help = (
        "Re-measure every run of a series from its kept trace file with another thread "
        "selection, without uploading anything again. Each run is replaced whole or left as "
        "it was (one transaction per run); a file that lacks the selected threads makes its "
        "run failed with the reason, as at upload (re-measuring with the former selection "
        "brings its times back). Runs still pending, or whose file was deleted "
        "(DEVIATIONS_KEEP_TRACE_DAYS), are skipped and keep their times. Prints one line per "
        "run, then queues the series' analysis; exits with status 1 if a run failed or was "
        "skipped (the series then mixes two selections)."
    )

    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--series", required=True, help="series name")
        base.add_thread_arguments(parser)

    def handle(self, *args: Any, **opts: Any) -> None:
        # Imported here, as in ingest_traces: the parser and numpy are not needed by --help.
        from deviations.traces.uploads import reingest
        from deviations.traces.uploads.tasks import queue_analysis

        options = base.thread_options(opts)
        series = Series.objects.filter(name=opts["series"]).first()
        if series is None:
            raise CommandError(f"no series named {opts['series']!r}")
        runs = reingest.series_runs(series)
        if not runs:
            raise CommandError(f"series {series.name} has no runs")
        outcomes = []
        for run in runs:
            result = reingest.reingest_run(run, options)
            outcomes.append(result.outcome)
            self.stdout.write(f"{run.release.version}: {result.line}")
        queue_analysis(series.pk)
        self.stdout.write(f"analysis of {series.name} queued")
        bad = len(runs) - outcomes.count("done")
        if bad:
            raise CommandError(
                f"{bad} of {len(runs)} run(s) not re-measured ({outcomes.count('failed')} "
                f"failed, {outcomes.count('skipped')} skipped)"
            )
