"""python manage.py demo"""

import tempfile
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandParser
from django.db import connection

from deviations.histograms.demo import ingest_demo_histograms
from deviations.management import base
from deviations.traces import demo
from deviations.traces.analysis import analyse_series
from deviations.traces.models import Run, Series
from deviations.traces.notify import after_analysis
from deviations.traces.services import delete_series
from deviations.traces.uploads.results import store_results
from deviations.traces.uploads.runs import ThreadOptions, get_release, ingest_local_file

SERIES = "chromium-demo.example-load"
RESULTS_SERIES = "mylib-bench.linux"
#: The commits between two releases of the demo's trace series (their revisions are
#: Chromium's version tags).
DEMO_LOG_URL = "https://chromium.googlesource.com/chromium/src/+log/{from}..{to}"


class Command(base.Command):
    help = (
        "Fill the database with demo data: a generated Chromium-like release series "
        f"({SERIES}, {len(demo.RELEASES)} releases x 5 runs, with planted deviations), demo "
        "Telemetry histograms (4 probes x 60 builds, two lasting changes), a metric series of "
        f"benchmark results ({RESULTS_SERIES}, {len(demo.RESULTS_RELEASES)} releases x 5 "
        "replicates, two planted changes) and, on the embedded "
        "default (SQLite), a superuser 'demo' (password 'demo'). Data already present is "
        "left as it is."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runs", type=int, default=5, help="runs per release")
        parser.add_argument("--force", action="store_true", help="delete and regenerate")
        parser.add_argument(
            "--demo-user", action="store_true",
            help="create the superuser 'demo' (password 'demo') even outside the embedded "
            "default (SQLite): never on a site others can reach",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        user_model = get_user_model()
        embedded = connection.vendor == "sqlite"
        if user_model.objects.filter(username="demo").exists():
            pass
        elif embedded or opts["demo_user"]:
            user_model.objects.create_superuser("demo", "demo@localhost", "demo")
            self.stdout.write("created user 'demo' with password 'demo'")
            if not embedded:
                self.stderr.write(
                    "WARNING: a superuser 'demo' with the password 'demo' now exists on this "
                    "database; delete it before anyone else can reach the site"
                )
        else:
            self.stderr.write(
                "not creating the superuser 'demo'/'demo' outside the embedded default "
                "(this database is not SQLite); create users with createsuperuser, or pass "
                "--demo-user on a private machine"
            )
        existing = Series.objects.filter(name=SERIES).first()
        if existing is not None and not opts["force"]:
            self.stdout.write(f"demo series {SERIES} already present")
        else:
            if existing is not None:
                delete_series(existing)  # its kept trace files with it
            self._traces(opts["runs"])
        if not Series.objects.filter(name=RESULTS_SERIES).exists() or opts["force"]:
            self._results()
        # Four Telemetry probes × 60 builds (a lasting shift, a bimodal weight swap, a
        # one-build spike that must not alert, a stable probe); a second run changes nothing.
        ingest_demo_histograms(stdout=self.stdout)

    def _traces(self, runs_per_release: int) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            runs = demo.write_demo_traces(Path(tmp), runs_per_release=runs_per_release)
            failed = 0
            for entry in runs:
                # Chromium tags each version: the tag is the revision, and the log between
                # two tags is a real page of chromium.googlesource.com.
                release = get_release(SERIES, entry.release, revision=entry.release)
                run = ingest_local_file(release, entry.path, ThreadOptions()).run
                failed += run.status != Run.DONE
        Series.objects.filter(name=SERIES).update(log_url_template=DEMO_LOG_URL)
        series = Series.objects.get(name=SERIES)
        self.stdout.write(f"analysis: {analyse_series(series.pk)}")
        after_analysis(series.pk)  # the planted changes become alert groups
        Series.objects.filter(name=SERIES).update(
            description="Generated demo: Paint regresses at 56.0.2906.0, Layout improves at "
            "56.0.2911.0, V8.ScriptCompiler digresses over 56.0.2900.0-56.0.2905.0."
        )
        self.stdout.write(f"demo series {SERIES}: {len(runs)} runs ingested, {failed} failed")

    def _results(self) -> None:
        existing = Series.objects.filter(name=RESULTS_SERIES).first()
        if existing is not None:
            delete_series(existing)
        stored = store_results(RESULTS_SERIES, demo.demo_results_csv(), "demo-results.csv",
                               analyse=False)
        series = Series.objects.get(name=RESULTS_SERIES)
        self.stdout.write(f"analysis: {analyse_series(series.pk)}")
        after_analysis(series.pk)
        Series.objects.filter(name=RESULTS_SERIES).update(
            description="Generated demo of benchmark results: BM_ParseJSON/64k 25% slower "
            "at 2.11.0, BM_Tokenize items_per_second 20% lower (worse) at 2.15.0.")
        self.stdout.write(f"demo metric series {RESULTS_SERIES}: {len(stored.runs)} releases "
                          f"of {stored.metrics} metrics")
