"""python manage.py series_settings --series NAME [--log-url-template T] [--release R
--revision X]"""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from deviations.core.errors import UserError
from deviations.management import base


class Command(base.Command):
    help = (
        "Show or change a series' commit settings: its log-URL template (--log-url-template "
        "'https://github.com/o/r/compare/{from}...{to}': {from} and {to} become the revisions "
        "of the last good and first bad release, URL-quoted; '' removes it) and a release's "
        "revision (--release VERSION --revision HASH; '' clears it). This is the explicit "
        "change that uploads naming another revision are refused and pointed to. Without "
        "a change, prints the template and every release's revision."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--series", required=True, help="series name")
        parser.add_argument("--log-url-template", default=None,
                            help="http(s) URL holding {from} and {to}; '' removes it")
        parser.add_argument("--release", default=None, help="release version (with --revision)")
        parser.add_argument("--revision", default=None,
                            help="commit hash or number of --release; '' clears it")

    def handle(self, *args: Any, **opts: Any) -> None:
        from deviations.traces import services
        from deviations.traces.models import Release, Series

        series = Series.objects.filter(name=opts["series"]).first()
        if series is None:
            raise CommandError(f"no series {opts['series']!r}")
        if (opts["release"] is None) != (opts["revision"] is None):
            raise CommandError("--release and --revision go together")
        try:
            if opts["log_url_template"] is not None:
                services.set_log_url_template(series, opts["log_url_template"])
                self.stdout.write(f"log URL template: {series.log_url_template or '(none)'}")
            if opts["release"] is not None:
                release = Release.objects.filter(series=series, version=opts["release"]).first()
                if release is None:
                    raise CommandError(f"series {series.name!r} has no release "
                                       f"{opts['release']!r}")
                services.set_release_revision(release, opts["revision"])
                self.stdout.write(f"{release.version}: revision "
                                  f"{release.revision or '(none)'}")
        except UserError as exc:
            raise CommandError(exc.message) from exc
        if opts["log_url_template"] is None and opts["release"] is None:
            self.stdout.write(f"log URL template: {series.log_url_template or '(none)'}")
            for r in series.releases.order_by("sort_key", "id"):
                self.stdout.write(f"{r.version}\t{r.revision or '-'}")
