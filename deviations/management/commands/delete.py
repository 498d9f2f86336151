"""python manage.py delete --series NAME [--release VERSION | --run ID] [--yes]"""

import sys
from typing import Any

from django.core.management.base import CommandError, CommandParser

from deviations.management import base
from deviations.traces import services
from deviations.traces.models import Release, Run, Series


class Command(base.Command):
    help = (
        "Delete a series (with its releases, runs and analysis), one release of it, or one "
        "run. Asks for confirmation on a terminal; elsewhere needs --yes. The series' "
        "analysis is recomputed without what was deleted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--series", required=True, help="the series' exact name")
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--release", help="delete only this release (its version)")
        which.add_argument("--run", type=int, help="delete only this run (its id)")
        parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    def handle(self, *args: Any, **opts: Any) -> None:
        series = Series.objects.filter(name=opts["series"]).first()
        if series is None:
            raise CommandError(f"no series named {opts['series']!r}")
        release = run = None
        if opts["release"] is not None:
            release = Release.objects.filter(series=series, version=opts["release"]).first()
            if release is None:
                raise CommandError(f"series {series.name} has no release {opts['release']!r}")
        if opts["run"] is not None:
            run = Run.objects.filter(series=series, pk=opts["run"]).first()
            if run is None:
                raise CommandError(f"series {series.name} has no run {opts['run']}")
        what = services.describe(series, release, run)
        target = (f"run {run.pk} ({run.file_name})" if run else
                  f"release {release.version}" if release else f"series {series.name}")
        question = (f"Delete {target}: {what.releases} release(s) and {what.runs} run(s)? "
                    "[y/N] ")
        if not opts["yes"]:
            if not sys.stdin.isatty():
                raise CommandError(f"{question.split('?')[0]}: pass --yes to confirm")
            if input(question).strip().lower() not in ("y", "yes"):
                raise CommandError("nothing deleted")
        if run is not None:
            done = services.delete_run(run)
        elif release is not None:
            done = services.delete_release(release)
        else:
            done = services.delete_series(series)
        self.stdout.write(done.line())
