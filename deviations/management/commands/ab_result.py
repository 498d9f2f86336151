"""python manage.py ab_result FILE [--aa FILE] [--interval hl|mean] [--format json]"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from deviations.experiments.ab import analysis
from deviations.management import base
from deviations.stats.paired import PairedMethod
from ingest.services import ABFormatError, parse_ab_file

INTERVALS: dict[str, PairedMethod] = {"hl": "walsh", "mean": "robust"}


class Command(base.Command):
    help = (
        "Analyse an interleaved A/B run (CSV or JSON, docs/formats.md 'A/B runs') without "
        "storing it: per metric the Hodges-Lehmann location of the paired differences B - A "
        "with its 95% Walsh-average interval (--interval mean: the mean difference and its "
        "robust interval, seed 002's statistic; Holm's levels when several metrics or builds "
        "are compared), the slice pairs beyond the spike fence, the sign test, the "
        "A/A floor of --aa, and seed 002's four-number line, e.g. 'B is 0.93 ms faster at "
        "p99 (95% CI [-1.01, -0.85]; A/A floor ±0.07; n=15 slice pairs)'. A warning line "
        "follows a metric whose interval and sign test disagree. --format json prints per "
        "metric {\"metric\", \"n\", \"diff\", \"diff_lo\", \"diff_hi\", \"relative\" "
        "(diff / mean of A), \"sign_test_p\", \"aa_floor\", \"verdict\"}. Exits with status 1 "
        "on a bad file."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", metavar="FILE", help="the A/B run (.csv or .json, or gzipped)")
        parser.add_argument("--aa", metavar="FILE", default=None,
                            help="an A/A run of the same host: sets the floor per metric")
        parser.add_argument("--min-change", type=float, default=None, metavar="PCT",
                            help="smallest change that matters, in %% (default 1): the "
                                 "text output says whether the anytime-valid interval is "
                                 "narrow enough, else about how many more slice pairs; on a "
                                 "metric whose values are all > 0 the interval is of the "
                                 "change of the geometric mean (%%), else of the difference "
                                 "of means against that %% of A's mean")
        parser.add_argument("--interval", choices=list(INTERVALS), default="hl",
                            help="hl: Hodges-Lehmann location and its Walsh-average interval "
                                 "(default; holds with rare spikes); mean: the mean "
                                 "difference and its robust interval")
        parser.add_argument("--format", choices=["text", "json"], default="text")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            ab = parse_ab_file(Path(opts["file"]), name=Path(opts["file"]).name)
            aa = parse_ab_file(Path(opts["aa"]), name=Path(opts["aa"]).name) if opts["aa"] else None
        except ABFormatError as exc:
            raise CommandError(str(exc)) from None
        method = INTERVALS[opts["interval"]]
        floors = {}
        if aa is not None:
            floors = {m: analysis.Floor(f["floor"], f"A/A run {aa.name}")
                      for m, f in analysis.aa_floors(aa.to_dict(), method).items()}
        pct = opts["min_change"]
        if pct is not None and not pct > 0:
            raise CommandError("--min-change must be > 0")
        result = analysis.analyse(
            ab.to_dict(), floors,
            min_change_pct=analysis.DEFAULT_MIN_CHANGE_PCT if pct is None else pct,
            method=method,
        )
        if opts["format"] == "json":
            self.stdout.write(json.dumps(analysis.cli_rows(result), indent=1))
            return
        for c in result["comparisons"]:
            self.stdout.write(c["line"])
            if c["warning"]:
                self.stdout.write(f"  warning: {c['warning']}")
            if c["spike_text"]:
                self.stdout.write(f"  {c['spike_text']}")
            if c["precision"]:
                self.stdout.write(f"  {c['precision']['sentence']}")
