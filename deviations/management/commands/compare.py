"""python manage.py compare --series NAME --base A --new B [--calls [FUNCTION]]
[--format json|csv|text]"""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from deviations.management import base
from deviations.management.output import write_rows
from deviations.traces import calltree, compare
from deviations.traces.models import Series


class Command(base.Command):
    help = (
        "Compare any two releases of a series, function by function, and write one row per "
        "function to standard output (microseconds; a metric series: each metric in its "
        "unit): base and new, the verdict (regression, "
        "improvement, appeared, vanished, below_threshold, unchanged), both medians with their "
        "95%% intervals, diff = new - base with its interval, change_pct, the test's p-value "
        "and its Benjamini-Hochberg q-value over all the functions. A regression or "
        "improvement is significant at a false-discovery rate of 5%% and changes by at least "
        "--min-change and --min-change-us (default: the series' minimum practical "
        "change). Exits non-zero when a release is unknown, the same twice, or has fewer "
        "than two done runs. With --calls FUNCTION (or --calls alone: the measured threads' "
        "top-level frames): why FUNCTION's total time changed, from the runs' call trees: "
        "one row per part (its self time, as callee '(self)', and each callee): caller, "
        "callee, both medians with their intervals, diff with its interval, change_pct, "
        "q_value (Benjamini-Hochberg over every function's total and self time and every "
        "caller-callee edge), significant, verdict, share_of_caller (its part of the "
        "change of the mean); --format text (its default) prints the sentence the function "
        "page shows, then one line per part."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--series", required=True)
        parser.add_argument("--base", required=True, help="the earlier (reference) release")
        parser.add_argument("--new", required=True, help="the later (candidate) release")
        parser.add_argument("--metric", choices=["self", "total"], default="self",
                            help="self time or total time (default self)")
        parser.add_argument(
            "--test", choices=list(compare.TESTS), default="auto",
            help="rank: exact Mann-Whitney; welch: Welch's t test of the means; median: t "
            "test of the median difference; auto (default): the rank test when the runs are "
            "enough for it to pass the false-discovery control, else Welch's",
        )
        parser.add_argument(
            "--min-change", type=float, default=None,
            help="smallest relative change flagged (default: the series' minimum practical "
            "change, as the matrix and alerts apply it)",
        )
        parser.add_argument(
            "--min-change-us", type=float, default=None,
            help="smallest absolute change flagged, µs (default: the series' setting)",
        )
        parser.add_argument(
            "--calls", nargs="?", const="", default=None, metavar="FUNCTION",
            help="split FUNCTION's change of total time among its self time and callees "
            "(without a name: the threads' top-level frames)",
        )
        parser.add_argument("--format", choices=["json", "csv", "text"], default=None,
                            help="json (default), csv; with --calls also text (its default)")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            series = Series.objects.get(name=opts["series"])
        except Series.DoesNotExist as exc:
            raise CommandError(f"no series named {opts['series']!r}") from exc
        if any(opts[k] is not None and opts[k] < 0 for k in ("min_change", "min_change_us")):
            raise CommandError("--min-change and --min-change-us must be >= 0")
        if opts["calls"] is not None:
            self._calls(series, opts)
            return
        if opts["format"] == "text":
            raise CommandError("--format text goes with --calls")
        try:
            result = compare.compare_releases(
                series, opts["base"], opts["new"], opts["metric"], test=opts["test"],
                min_change=opts["min_change"], min_change_us=opts["min_change_us"],
            )
        except compare.CompareError as exc:
            raise CommandError(exc.message) from exc
        write_rows(self.stdout, result.rows, compare.FIELDS, opts["format"] or "json")

    def _calls(self, series: Series, opts: dict[str, Any]) -> None:
        try:
            diff = calltree.release_calltree(series, opts["base"], opts["new"], opts["calls"],
                                             test=opts["test"])
        except calltree.CallTreeError as exc:
            raise CommandError(exc.message) from exc
        fmt = opts["format"] or "text"
        if fmt != "text":
            write_rows(self.stdout, diff.part_rows(), calltree.FIELDS, fmt)
            return
        self.stdout.write(diff.words)
        for part in diff.part_rows():
            self.stdout.write(
                f"  {part['callee']}: {calltree.time_words(part['diff'], True)} "
                f"[{calltree.time_words(part['diff_lo'], True)}, "
                f"{calltree.time_words(part['diff_hi'], True)}], "
                f"q = {part['q_value'] if part['q_value'] is not None else float('nan'):.2g}"
                f"{' (significant)' if part['significant'] else ''}, share "
                f"{100 * (part['share_of_caller'] or 0.0):.0f}%")
