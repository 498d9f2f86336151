"""python manage.py create_api_token USER [--name CI]"""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError, CommandParser

from deviations.core.models import ApiToken
from deviations.management import base


class Command(base.Command):
    help = (
        "Create an API token for USER and print it once (only its hash is stored). "
        "Send it as 'Authorization: Bearer <token>'."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("user", help="user name (must exist: createsuperuser or admin)")
        parser.add_argument("--name", default="CI", help="what the token is for")

    def handle(self, *args: Any, **opts: Any) -> None:
        model = get_user_model()
        try:
            user = model.objects.get(**{model.USERNAME_FIELD: opts["user"]})
        except model.DoesNotExist as exc:
            raise CommandError(f"no user named {opts['user']!r}") from exc
        _, key = ApiToken.issue(user, opts["name"])
        self.stdout.write(key)
