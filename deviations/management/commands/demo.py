"""python manage.py demo"""

import tempfile
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from deviations.histograms.demo import ingest_demo_histograms
from deviations.traces import demo
from deviations.traces.analysis import analyse_series
from deviations.traces.models import Run, Series
from ingest.services import ThreadOptions, get_release, ingest_local_file

SERIES = "chromium-demo.example-load"


class Command(BaseCommand):
    help = (
        "Fill the database with demo data: a generated Chromium-like release series "
        f"({SERIES}, {len(demo.RELEASES)} releases x 5 runs, with planted deviations), demo "
        "Telemetry histograms (4 probes x 60 builds, two lasting changes) and a user 'demo' "
        "(password 'demo') who may upload. Data already present is left as it is."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runs", type=int, default=5, help="runs per release")
        parser.add_argument("--force", action="store_true", help="delete and regenerate")

    def handle(self, *args: Any, **opts: Any) -> None:
        user_model = get_user_model()
        if not user_model.objects.filter(username="demo").exists():
            user_model.objects.create_superuser("demo", "demo@localhost", "demo")
            self.stdout.write("created user 'demo' with password 'demo'")
        existing = Series.objects.filter(name=SERIES)
        if existing.exists() and not opts["force"]:
            self.stdout.write(f"demo series {SERIES} already present")
        else:
            existing.delete()
            self._traces(opts["runs"])
        # Four Telemetry probes × 60 builds (a lasting shift, a bimodal weight swap, a
        # one-build spike that must not alert, a stable probe); a second run changes nothing.
        ingest_demo_histograms(stdout=self.stdout)

    def _traces(self, runs_per_release: int) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            runs = demo.write_demo_traces(Path(tmp), runs_per_release=runs_per_release)
            failed = 0
            for entry in runs:
                release = get_release(SERIES, entry.release)
                run = ingest_local_file(release, entry.path, ThreadOptions()).run
                failed += run.status != Run.DONE
        series = Series.objects.get(name=SERIES)
        self.stdout.write(f"analysis: {analyse_series(series.pk)}")
        Series.objects.filter(name=SERIES).update(
            description="Generated demo: Paint regresses at 56.0.2906.0, Layout improves at "
            "56.0.2911.0, V8.ScriptCompiler digresses over 56.0.2900.0-56.0.2905.0."
        )
        self.stdout.write(f"demo series {SERIES}: {len(runs)} runs ingested, {failed} failed")
