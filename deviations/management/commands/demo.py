"""python manage.py demo"""

import tempfile
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from deviations import demo
from deviations.analysis import analyse_series
from deviations.models import Run, Series
from ingest.runs import ThreadOptions, get_release, ingest_local_file

SERIES = "chromium-demo.example-load"


class Command(BaseCommand):
    help = (
        "Fill the database with demo data: a generated Chromium-like release series "
        f"({SERIES}, {len(demo.RELEASES)} releases x 5 runs, with planted deviations) and a "
        "user 'demo' (password 'demo') who may upload. Does nothing if the demo series exists."
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
            return
        existing.delete()
        with tempfile.TemporaryDirectory() as tmp:
            runs = demo.write_demo_traces(Path(tmp), runs_per_release=opts["runs"])
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
