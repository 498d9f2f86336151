"""python manage.py ingest_traces --series NAME --release VERSION FILE..."""

import contextlib
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from deviations.core.errors import UserError
from deviations.management import base, preparse
from deviations.traces.models import Run

# ingest (the parser, msgspec, numpy, Celery's task module) and tqdm are imported in the
# methods that use them, not here: `--help` and a mistyped option answer in ~0.3 s instead
# of ~0.9 s (docs/architecture.md, "Start-up"; tests/benchmarks/startup.py). tqdm only
# when stderr is a terminal: its bar is off otherwise, and its import (importlib.metadata,
# ~10 ms) is then paid for nothing by every CI call.


class Command(base.Command):
    help = (
        "Ingest Chromium trace files (.json or .json.gz, array or {\"traceEvents\": [...]} form) "
        "as runs of one release (--release VERSION FILE...), or of many releases at once "
        "(--manifest runs.csv with a header release,file[,order][,revision], or --folders DIR "
        "holding a folder per release), synchronously; --revision names the commit the "
        "release was built from. Each file is one run and is stored whole or not "
        "at all; a file already ingested in the series (same sha256) is skipped. The file is "
        "kept in the trace storage, as uploads are (download from the run's page, `reingest`). "
        "Prints one line per file, then updates the series' statistics (as `analyse` does): "
        "here, after those lines, in the embedded default; queued to the worker when a broker "
        "is configured (CELERY_BROKER_URL); not at all with --no-analyse. Exits with status 1 "
        "if any file failed."
    )

    # The system checks import the URL configuration (the REST API, the pages): half a
    # second that a batch of CI uploads pays per call, for nothing this command uses.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        # Defined without Django: manage.py parses the FILEs with them before the set-up.
        preparse.add_ingest_arguments(parser)

    def handle(self, *args: Any, **opts: Any) -> None:
        from deviations.traces.uploads.runs import IngestError, get_release

        options = base.thread_options(opts)
        entries = self._entries(opts)
        if not opts["release"]:
            with_order = {e.release for e in entries if e.order is not None}
            without = {e.release for e in entries if e.order is None}
            if with_order and without:  # checked before any release is created
                raise CommandError(
                    f"the manifest gives an order to {len(with_order)} release(s) and none to "
                    f"{len(without)} (e.g. {sorted(without)[0]!r}): a series places all its "
                    "releases by order or all by version")
        releases: dict[str, Any] = {}
        try:  # every release checked (and created) before any file is read
            for entry in entries:
                if entry.release not in releases:
                    order = opts["order"] if opts["release"] else entry.order
                    revision = opts["revision"] if opts["release"] else entry.revision
                    releases[entry.release] = get_release(opts["series"], entry.release, order,
                                                          revision=revision)
        except IngestError as exc:
            raise CommandError(str(exc)) from exc
        failed = 0
        bar: Any = None
        writing: Any = contextlib.nullcontext
        if sys.stderr.isatty():
            from tqdm import tqdm  # start-up: see the comment at the top

            bar = tqdm(entries, unit="file", file=sys.stderr, leave=False)
            writing = tqdm.external_write_mode
        for entry in entries if bar is None else bar:
            if bar is not None:
                bar.set_postfix_str(f"{entry.release} {entry.path.name}"[-50:])
            line, ok = self._one(releases[entry.release], entry.path, options)
            failed += not ok
            with writing():
                self.stdout.write(line if len(releases) == 1 else f"{entry.release}: {line}")
        if failed < len(entries):
            self._analyse(next(iter(releases.values())).series_id, opts)
        if failed:
            raise CommandError(f"{failed} of {len(entries)} file(s) failed")

    def _analyse(self, series_id: int, opts: dict[str, Any]) -> None:
        """The analysis after the ingest, as its own step: the runs are stored and their
        lines printed before it starts, and it is not paid by ``--no-analyse``."""
        if opts["no_analyse"]:
            self.stdout.write(f"analysis: not run (--no-analyse): `manage.py analyse --series "
                              f"{opts['series']}` runs it, as the worker's sweeper does")
            return
        # Imported here, as below: Celery, which --no-analyse does not load either.
        from deviations.core.worker import app

        if not app.conf.task_always_eager:  # a broker (CELERY_BROKER_URL) and its workers
            from deviations.traces.uploads.tasks import queue_analysis

            if queue_analysis(series_id):
                self.stdout.write("analysis: queued for the worker")
            else:
                self.stdout.write(f"analysis: not queued (the broker is unreachable): the "
                                  f"worker's sweeper or `manage.py analyse --series "
                                  f"{opts['series']}` runs it")
            return
        # Imported here: the analysis brings SciPy (~0.5 s), which --help, --no-analyse and
        # a run of bad files never need.
        from deviations.traces.analysis import analyse_series
        from deviations.traces.notify import after_analysis

        self.stdout.write(f"analysis: {analyse_series(series_id)}")
        after_analysis(series_id)  # its alerts, and the emails that are due

    @staticmethod
    def _entries(opts: dict[str, Any]) -> list[Any]:
        from ingest.services import ManifestEntry, ManifestError, read_folders, read_manifest

        if opts["release"] is not None:
            if not opts["files"]:
                raise CommandError("give the trace files of --release VERSION")
            return [ManifestEntry(opts["release"], Path(f)) for f in opts["files"]]
        if opts["files"]:
            raise CommandError("FILE arguments go with --release, not --manifest or --folders")
        if opts["order"] is not None:
            raise CommandError("--order goes with --release; a manifest has an order column")
        if opts["revision"] is not None:
            raise CommandError("--revision goes with --release; a manifest has a revision "
                               "column")
        try:
            if opts["manifest"] is not None:
                return read_manifest(opts["manifest"])
            return read_folders(opts["folders"])
        except ManifestError as exc:
            raise CommandError(str(exc)) from exc

    @staticmethod
    def _one(release: Any, path: Path, options: Any) -> tuple[str, bool]:
        from django.conf import settings

        from deviations.core.text import safe_file_name
        from deviations.traces.uploads.runs import ingest_local_file

        # Parsed and hashed by manage.py before Django's set-up, if it could (preparse).
        prepared = preparse.take(path, safe_file_name(path.name), options.as_dict(),
                                 settings.DEVIATIONS_MAX_TRACE_BYTES)
        try:
            entry = ingest_local_file(release, path, options, prepared=prepared)
        except OSError as exc:
            return f"FAILED {path.name}: cannot open ({exc.strerror or exc})", False
        except UserError as exc:  # the trace storage is full
            return f"FAILED {exc.message}", False
        run = entry.run
        if entry.duplicate:
            return (
                f"skipped {path.name}: already ingested as run {run.pk} "
                f"({run.file_name}, release {run.release.version})",
                True,
            )
        if run.status == Run.DONE:
            summary = run.summary or {}
            return (
                f"ok {path.name}: run {run.pk}, {len(run.times.arrays()[0])} functions, "
                f"{summary.get('slices', 0)} slices",
                True,
            )
        return f"FAILED {run.error}", False
