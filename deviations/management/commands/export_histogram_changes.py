"""python manage.py export_histogram_changes [--probe NAME] [--format json|csv]"""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from deviations.core.packing import name_digest
from deviations.histograms.models import HistogramChange, Probe
from deviations.management import base
from deviations.management.output import write_rows

FIELDS = ["probe", "build_id", "distance", "kind", "change"]


class Command(base.Command):
    help = (
        "Write the detected histogram changes to standard output, one row per change: probe, "
        "build_id, distance (the Hellinger distance to the previous usable build, the one the "
        "cutoffs refer to), kind (shift, shape, proportion or volume) and the change in words "
        "(a share with its 95% interval, the clients), by probe name and build order."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--probe", default=None, help="only this probe (exact name)")
        parser.add_argument("--format", choices=["json", "csv"], default="json")

    def handle(self, *args: Any, **opts: Any) -> None:
        changes = HistogramChange.objects.select_related("probe")
        if opts["probe"] is not None:
            probe = Probe.objects.filter(name_sha1=name_digest(opts["probe"])).first()
            if probe is None:
                raise CommandError(f"no probe named {opts['probe']!r}")
            changes = changes.filter(probe=probe)
        rows = (
            {"probe": c.probe.name, "build_id": c.build_id, "distance": c.distance,
             "kind": c.kind, "change": c.describe()}
            for c in changes.order_by("probe__name", "sort_key", "pk")
        )
        write_rows(self.stdout, rows, FIELDS, opts["format"])
