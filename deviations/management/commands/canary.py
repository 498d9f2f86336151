"""python manage.py canary create|feed|status ...

- ``canary create NAME --bad higher|lower|any [--alpha 0.05] [--tau T] [--count] ...``
  prints the new canary's id as its last line;
- ``canary feed ID FILE [--batch-size 1000]`` replays recorded observations (CSV with
  header ``arm,value`` or ``arm,value,timestamp``) in batches through the same code as
  the API;
- ``canary status ID [--format json]`` prints the decision and its numbers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from deviations.core.errors import UserError
from deviations.experiments.canaries import selectors, services
from deviations.experiments.canaries.models import Canary
from deviations.management import base
from ingest.services import parse_observations

_STATUS_FIELDS = (
    "id", "name", "method", "method_text", "quantiles", "quantile_verdicts", "decision", "headline",
    "p_value", "n_a", "n_b", "decided_n_a",
    "decided_n_b", "statistic", "alpha", "tau", "resolution", "words", "batches_received",
    "batches_applied", "accepting", "samples_bound", "samples_bound_more", "change",
    "median_band", "narrow_enough", "samples_needed", "samples_needed_more",
)


def _probabilities(text: str) -> list[float]:
    """``0.5,0.9,0.99`` -> [0.5, 0.9, 0.99] (the service checks the values)."""
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: comma-separated probabilities, e.g. 0.5,0.9,0.99") from None


class Command(base.Command):
    help = (
        "Live canaries: 'create' one (prints its id last), 'feed' it recorded observations "
        "from a CSV file in batches (as the API receives them), or print its 'status'. "
        "See README, 'Canaries'."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="create|feed|status")
        create = sub.add_parser(
            "create", allow_abbrev=False, help="create a canary; prints its id last",
            description="Create a canary: arm A is the control, B the candidate.",
        )
        create.add_argument("name")
        create.add_argument("--bad", required=True, choices=["higher", "lower", "any"],
                            help="which direction of the metric is bad")
        create.add_argument("--alpha", type=float, default=0.05,
                            help="false-alarm probability over the whole run (default 0.05)")
        create.add_argument("--tau", type=float, default=None,
                            help="tolerance on the distribution functions, 0-1: accept 'no "
                            "difference beyond tau' (default: never accept)")
        create.add_argument("--count", action="store_true",
                            help="a count metric: feed event timestamps, tested through the "
                            "waits between events")
        create.add_argument("--method", choices=["ranks", "dkw", "signs"], default=None,
                            help="the test that decides: ranks (rank betting test: the "
                            "fastest on shifts, reject only; the default), dkw (distribution "
                            "functions; the default with --tau or --quantiles) or signs (sign "
                            "test on pairs, reject only)")
        create.add_argument("--metric", default="", help="metric name, e.g. PlayDelay")
        create.add_argument("--unit", default="", help="unit, e.g. ms")
        create.add_argument("--quantile", type=float, default=0.95,
                            help="quantile worded besides the median (default 0.95)")
        create.add_argument("--quantiles", type=_probabilities, default=None,
                            help="judge the canary on these quantiles, comma-separated, e.g. "
                            "0.5,0.9,0.99: an anytime-valid decision each (Bonferroni over "
                            "them) decides the canary instead of the dkw test")
        create.add_argument("--resolution", type=float, default=Canary.DEFAULT_RESOLUTION,
                            help="relative step values are rounded down to (default 1e-4; "
                            "0: exact, memory grows with the run)")
        create.add_argument("--min-effect", type=float, default=None,
                            help="smallest change of the median worth knowing, in the unit; "
                            "with --method ranks (the default) the test's bets are tuned to "
                            "it, on the --bad side only (higher/lower)")
        create.add_argument("--owner", action="append", default=[],
                            help="email told of a rejection (repeat for several)")
        create.add_argument("--format", choices=["text", "json"], default="text")
        feed = sub.add_parser(
            "feed", allow_abbrev=False, help="replay recorded observations in batches",
            description="Send the rows of FILE (CSV: arm,value or arm,value,timestamp; arm A "
            "or B; a count canary reads the timestamp) in batches of --batch-size rows, one "
            "batch per arm per chunk, through the API's code. Feeding the same file again "
            "sends nothing new. Stops when the canary decides.",
        )
        feed.add_argument("id", type=int)
        feed.add_argument("file", type=Path)
        feed.add_argument("--batch-size", type=int, default=1000)
        feed.add_argument("--format", choices=["text", "json"], default="text")
        status = sub.add_parser("status", allow_abbrev=False, help="print the decision",
                                description="The canary's decision, p-value, sizes, bands "
                                "in words and the samples still needed.")
        status.add_argument("id", type=int)
        status.add_argument("--change", type=float, default=None,
                            help="smallest change of the median worth knowing (default the "
                            "canary's --min-effect)")
        status.add_argument("--format", choices=["text", "json"], default="text")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            getattr(self, f"_{opts['action']}")(opts)
        except UserError as exc:
            raise CommandError(exc.message) from None

    def _canary(self, canary_id: int) -> Canary:
        canary = Canary.objects.select_related("state").filter(pk=canary_id).first()
        if canary is None:
            raise CommandError(f"no canary {canary_id}")
        return canary

    def _create(self, opts: dict[str, Any]) -> None:
        canary = services.create_canary(
            opts["name"], bad=opts["bad"], alpha=opts["alpha"], tau=opts["tau"],
            count=opts["count"], metric=opts["metric"], unit=opts["unit"],
            method=opts["method"], quantiles=opts["quantiles"],
            quantile=opts["quantile"], min_effect=opts["min_effect"], owners=opts["owner"],
            resolution=opts["resolution"],
        )
        if opts["format"] == "json":
            self.stdout.write(json.dumps({"id": canary.pk, "name": canary.name}))
        else:
            self.stdout.write(f"created canary {canary.pk}: {canary.name} "
                              f"(page {canary.get_absolute_url()})")
        self.stdout.write(str(canary.pk))

    def _feed(self, opts: dict[str, Any]) -> None:
        canary = self._canary(opts["id"])
        path: Path = opts["file"]
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CommandError(f"{path.name}: {exc.strerror}") from None
        observations = parse_observations(data, path.name)
        source = hashlib.sha256(data).hexdigest()[:16]
        fed = services.feed(canary, observations, source, opts["batch_size"])
        canary = self._canary(canary.pk)
        view = selectors.canary_view(canary)
        if opts["format"] == "json":
            self.stdout.write(json.dumps({
                "batches": fed.batches, "duplicates": fed.duplicates,
                "rows_left": fed.rows_left, **{k: view[k] for k in _STATUS_FIELDS},
            }))
            return
        line = f"{path.name}: {fed.batches} new batch(es)"
        if fed.duplicates:
            line += f", {fed.duplicates} already received"
        if fed.decided:
            line += (f"; the canary decided ({fed.decided}): the last {fed.rows_left} row(s) "
                     "were not sent")
        self.stdout.write(line)
        self._write_status(view)

    def _status(self, opts: dict[str, Any]) -> None:
        view = selectors.canary_view(self._canary(opts["id"]), opts["change"])
        if opts["format"] == "json":
            self.stdout.write(json.dumps({k: view[k] for k in _STATUS_FIELDS}))
        else:
            self._write_status(view)

    def _write_status(self, view: dict[str, Any]) -> None:
        self.stdout.write(
            f"canary {view['id']} {view['name']}: {view['headline_text']} "
            f"(decision {view['decision']}, p-value {view['p_value_text']}, "
            f"n A {view['n_a']}, n B {view['n_b']})"
        )
        for words in view["words"]:
            self.stdout.write(f"  {words}")
        self.stdout.write(f"  test: {view['method_text']}")
        if view["batches_applied"] < view["batches_received"]:
            self.stdout.write(f"  {view['batches_received'] - view['batches_applied']} "
                              "batch(es) received and not yet applied (the worker is on it)")
