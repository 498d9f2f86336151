#!/usr/bin/env python
"""Django's command-line utility: `python manage.py help` lists the commands."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deviations.settings")
    if sys.argv[1:2] == ["ingest_traces"]:
        # The trace files parsed before Django is set up: the peak memory is then the
        # larger of the parse's and Django's, not their sum (deviations.management.preparse).
        from deviations.management import preparse

        preparse.prepare(sys.argv[2:])
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
