"""python manage.py ingest_histograms FILE..."""

from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from deviations.management import base


class Command(base.Command):
    help = (
        "Ingest Telemetry histogram files (docs/formats.md: Mozilla's histogram JSON wrapped "
        "with probe and build id, the plain edges/counts form, raw main pings, GLAM "
        "aggregates; .json, .json.gz or JSON lines). Each file is stored whole or not at "
        "all; a histogram for a (probe, build id) already stored is replaced (identical ones "
        "are left as they are). Prints one line per file, then detects changes on the "
        "probes of all the files at once (a Celery task: in-process by default); exits with "
        "status 1 if any file failed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--build-id", default=None,
            help="build id for records that carry none (bare histograms, pings without one)",
        )
        parser.add_argument(
            "--probe", default=None, help="probe name of a bare Mozilla histogram object"
        )
        parser.add_argument("files", nargs="+", metavar="FILE", help="histogram files")

    def handle(self, *args: Any, **opts: Any) -> None:
        # Imported here: ingest brings msgspec, numpy and Celery, which --help does not need
        # (start-up time; docs/architecture.md, "Start-up").
        from deviations.histograms.store import queue_detection, store_histogram_file
        from ingest.services import HistogramError

        failed = 0
        probe_ids: set[int] = set()
        files = [Path(f) for f in opts["files"]]
        for path in files:
            try:
                stored = store_histogram_file(
                    path, display_name=path.name, build_id=opts["build_id"], probe=opts["probe"]
                )
            except HistogramError as exc:
                failed += 1
                self.stdout.write(f"FAILED {exc}")
                continue
            except OSError as exc:
                failed += 1
                self.stdout.write(f"FAILED {path.name}: cannot read ({exc.strerror or exc})")
                continue
            self.stdout.write(stored.line())
            probe_ids.update(stored.probe_ids)
        if probe_ids:
            queue_detection(sorted(probe_ids))
        if failed:
            raise CommandError(f"{failed} of {len(files)} file(s) failed")
