"""The base of the project's commands: options must be spelled out.

argparse accepts any unambiguous prefix of an option by default, so ``--serie web`` was
taken for ``--series web`` and a typo became a new series. Every command here refuses
abbreviations (``allow_abbrev=False``).
"""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.allow_abbrev = False
        return parser
