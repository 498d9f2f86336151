"""python manage.py ingest_results --series NAME --release VERSION FILE..."""

from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from deviations.core.errors import UserError
from deviations.management import base

# The readers and the analysis are imported in handle(): `--help` answers at once.

FORMATS = ("google-benchmark", "pytest-benchmark", "hyperfine", "asv", "perfherder", "bmf",
           "csv")


class Command(base.Command):
    help = (
        "Ingest CI benchmark results into a metric series: Google Benchmark JSON "
        "(--benchmark_format=json), pytest-benchmark JSON (--benchmark-json), hyperfine JSON "
        "(--export-json), asv results JSON, Perfherder PERFHERDER_DATA (JSON or a log holding "
        "the lines), Bencher Metric Format JSON, or CSV with a header "
        "release,metric,value[,unit,direction] (its rows name their releases: no --release). "
        "The format is detected from the content (--format to force one). Each file is "
        "stored whole or not at all; a file already stored (same sha256) is skipped. "
        "One release (--release VERSION FILE...) or a whole history (--manifest runs.csv "
        "with a header release,file[,order][,revision], or --folders DIR with a folder per "
        "release); --revision names the commit the release was built from. "
        "Prints one line per file, then updates the series' analysis and its alerts; exits "
        "with status 1 if any file failed."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--series", required=True,
                            help="metric series name (created if new)")
        source = parser.add_mutually_exclusive_group()
        source.add_argument("--release", help="release the results of FILE... belong to")
        source.add_argument(
            "--manifest", type=Path,
            help="CSV with a header release,file and optionally order and revision columns: "
            "one results file per line (relative paths are relative to the manifest)")
        source.add_argument(
            "--folders", type=Path,
            help="a folder with one folder per release, named by its version, holding its "
            "results files")
        parser.add_argument("--order", type=int, default=None,
                            help="sort the release by this number instead of its version")
        parser.add_argument(
            "--revision", default=None,
            help="commit hash or number the release was built from (with --release; a "
            "release that carries another one is refused: change it with series_settings)")
        parser.add_argument("--format", choices=FORMATS, default=None,
                            help="the files' format (default: detected from each file)")
        parser.add_argument("files", nargs="*", metavar="FILE",
                            help="results files (with --release, or CSV files naming their "
                            "releases)")

    def handle(self, *args: Any, **opts: Any) -> None:
        from deviations.traces.analysis import analyse_series
        from deviations.traces.models import Series
        from deviations.traces.notify import after_analysis
        from deviations.traces.uploads.results import store_results

        entries = self._entries(opts)
        failed = 0
        for release, path, order, revision in entries:
            try:
                data = path.read_bytes()
            except OSError as exc:
                failed += 1
                self.stdout.write(f"FAILED {path.name}: cannot open ({exc.strerror or exc})")
                continue
            try:
                stored = store_results(opts["series"], data, path.name, release=release,
                                       order=order, fmt=opts["format"], analyse=False,
                                       revision=revision)
            except UserError as exc:
                failed += 1
                self.stdout.write(f"FAILED {exc.message}")
                continue
            for run, duplicate in stored.runs:
                word = "skipped (already stored)" if duplicate else "ok"
                self.stdout.write(
                    f"{word} {path.name} [{stored.format}]: release {run.release.version}, "
                    f"{stored.metrics} metrics, {run.samples} replicate(s), run {run.pk}")
            for note in stored.notes:
                self.stdout.write(f"  note: {note}")
        series = Series.objects.filter(name=opts["series"]).first()
        if series is not None and failed < len(entries):
            self.stdout.write(f"analysis: {analyse_series(series.pk)}")
            after_analysis(series.pk)
        if failed:
            raise CommandError(f"{failed} of {len(entries)} file(s) failed")

    @staticmethod
    def _entries(opts: dict[str, Any]
                 ) -> list[tuple[str | None, Path, int | None, str | None]]:
        from ingest.services import RESULTS_SUFFIXES, ManifestError, read_folders, read_manifest

        if opts["manifest"] is None and opts["folders"] is None:
            if not opts["files"]:
                raise CommandError("give the results files (with --release, unless they are "
                                   "CSV files naming their releases)")
            if opts["revision"] is not None and opts["release"] is None:
                raise CommandError("--revision goes with --release")
            return [(opts["release"], Path(f), opts["order"], opts["revision"])
                    for f in opts["files"]]
        if opts["files"]:
            raise CommandError("FILE arguments go with --release, not --manifest or --folders")
        if opts["order"] is not None:
            raise CommandError("--order goes with --release; a manifest has an order column")
        if opts["revision"] is not None:
            raise CommandError("--revision goes with --release; a manifest has a revision "
                               "column")
        try:
            found = (read_manifest(opts["manifest"]) if opts["manifest"] is not None
                     else read_folders(opts["folders"], RESULTS_SUFFIXES))
        except ManifestError as exc:
            raise CommandError(str(exc)) from exc
        return [(e.release, e.path, e.order, e.revision) for e in found]
