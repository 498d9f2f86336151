"""The base of the project's commands: options must be spelled out.

argparse accepts any unambiguous prefix of an option by default, so ``--serie web`` was
taken for ``--series web`` and a typo became a new series. Every command here refuses
abbreviations (``allow_abbrev=False``).
"""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from deviations.management import preparse


class Command(BaseCommand):
    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.allow_abbrev = False
        return parser


def add_thread_arguments(parser: CommandParser) -> None:
    """The trace commands' thread selection (``ingest_traces``, ``reingest``), defined in
    ``preparse`` (no Django) for ``manage.py``'s parse before the set-up."""
    preparse.add_thread_arguments(parser)


def thread_options(opts: dict[str, Any]) -> Any:
    """The ``ThreadOptions`` of :func:`add_thread_arguments`' options, or a
    ``CommandError`` with the reason. Imported here: ``--help`` needs no parser."""
    from deviations.traces.uploads.runs import IngestError, ThreadOptions

    try:
        return ThreadOptions(opts["thread_name"], opts["process_name"], opts["all_threads"])
    except IngestError as exc:
        raise CommandError(str(exc)) from exc
