"""python manage.py export --series NAME --what selftimes|stats|deviations ..."""

from collections.abc import Iterable
from typing import Any

from django.core.management.base import CommandError, CommandParser

from deviations.management import base
from deviations.management.output import write_rows
from deviations.stats.releases.rules import RULE_NAMES
from deviations.traces import selectors
from deviations.traces.models import Series

FIELDS = {
    "selftimes": ["release", "run", "function", "self_us", "total_us", "calls"],
    "stats": ["release", "function", "n", "median", "median_lo", "median_hi", "mean", "mean_lo",
              "mean_hi"],
    "deviations": list(selectors.DEVIATION_FIELDS),
}


class Command(base.Command):
    help = (
        "Write a series' data to standard output, in microseconds (a metric series: each "
        "metric in its own unit, its rows named like functions). "
        "selftimes: one row per run and function (release, run = the file name given at "
        "ingest, function, self_us, total_us, calls). stats: per release and function, n and "
        "the median and mean with their confidence intervals (none for one run). "
        "deviations: per function and consecutive release pair, the verdict (regression, "
        "improvement, significant_overlap, nonsignificant_overlap, appeared, vanished: "
        "absent from every run of the earlier or later side, never compared as 0 µs) after "
        "the series' minimum practical change, and the comparison behind it: diff = later - "
        "earlier with its interval, relative = diff / the level before (0.25 = +25%), "
        "p_value, runs_before and runs_after compared; gap between the two releases' "
        "intervals; digression (true on the pair that starts a temporary deviation), early "
        "(alerted before it is final), provisional (later releases may still change it) "
        "and final_within (how many more releases like the newest until it is final; 0 when "
        "final). stats and deviations read the stored analysis (see `analyse`)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--series", required=True)
        parser.add_argument("--what", choices=list(FIELDS), required=True)
        parser.add_argument(
            "--metric", choices=["self", "total"], default="self",
            help="stats and deviations: self time or total time (default self)",
        )
        parser.add_argument(
            "--rule", choices=list(RULE_NAMES), default=None,
            help="deviations: the level-shift rule (shifts: each boundary judged from a "
            "window of releases around it, one-run releases included, final once the "
            "releases after it exist) or seed 003's two conditions (paper: two runs a "
            "side); docs/statistics.md. Default: the series' setting (shifts unless "
            "changed in the admin or the API)",
        )
        parser.add_argument(
            "--estimator", choices=["median", "mean"], default="median",
            help="deviations: compare medians (default) or means",
        )
        parser.add_argument("--format", choices=["json", "csv"], default="json")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            series = Series.objects.get(name=opts["series"])
        except Series.DoesNotExist as exc:
            raise CommandError(f"no series named {opts['series']!r}") from exc
        what = opts["what"]
        if what == "selftimes":
            rows: Iterable[dict[str, Any]] = selectors.selftime_rows(series)
        else:
            try:
                if what == "stats":
                    rows = selectors.stats_rows(series, opts["metric"])
                else:
                    rows = selectors.deviation_rows(
                        series, opts["metric"], opts["estimator"],
                        opts["rule"] or series.default_rule,
                    )
            except selectors.NotAnalysedError as exc:
                raise CommandError(str(exc)) from exc
        write_rows(self.stdout, rows, FIELDS[what], opts["format"])
