"""python manage.py check_release --series NAME --release R [--markdown FILE]
[--include-provisional]: the CI gate."""

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from deviations.core.errors import UserError
from deviations.management import base


class Command(base.Command):
    help = (
        "The CI gate: exits 0 when release R of the series has no untriaged regression "
        "from the release before it (the previous one with a done run) to R, 1 when it has "
        "(naming them), 2 on a usage error (unknown series or release), 3 when the data is "
        "not judged yet (a run of R still being ingested, R without a done run, or the "
        "analysis not up to date: run it again later). Verdicts are the series' alerts "
        "(its default rule); a regression whose alert is acknowledged, invalid, fixed or "
        "ignored no longer fails the gate. Provisional verdicts count only with "
        "--include-provisional (early ones always). Prints a Markdown summary for a pull "
        "request (regressions and improvements with their intervals, the commit range and "
        "its log link, the release page at DEVIATIONS_SITE_URL), or writes it to --markdown "
        "FILE and prints the one-line verdict."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--series", required=True, help="series name")
        parser.add_argument("--release", required=True, help="release version to check")
        parser.add_argument("--markdown", type=Path, default=None, metavar="FILE",
                            help="write the Markdown summary here instead of to stdout")
        parser.add_argument("--include-provisional", action="store_true",
                            help="also fail on provisional (not yet final) regressions")

    def handle(self, *args: Any, **opts: Any) -> None:
        from deviations.traces.gate import USAGE, check_release, markdown

        try:
            check = check_release(opts["series"], opts["release"],
                                  include_provisional=opts["include_provisional"])
        except UserError as exc:
            raise CommandError(exc.message, returncode=USAGE) from exc
        text = markdown(check)
        if opts["markdown"] is not None:
            try:
                opts["markdown"].write_text(text, encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"{opts['markdown']}: cannot write "
                                   f"({exc.strerror or exc})", returncode=USAGE) from exc
            self.stdout.write(f"{check.verdict}: {check.reason}")
        else:
            self.stdout.write(text, ending="")
        if check.exit_code:
            self.stdout.flush()
            self.stderr.write(f"{check.verdict}: {check.reason}")
            sys.exit(check.exit_code)
