"""python manage.py webhooks list|test|deliver|bug-link|bisect ...

- ``webhooks list`` prints every webhook with its last delivery's status;
- ``webhooks test ID`` sends a test delivery to webhook ID now and prints its attempts;
- ``webhooks deliver`` sends the deliveries whose next attempt is due now (what the
  ``deliver-due-webhooks`` beat entry does every minute);
- ``webhooks bug-link ALERT`` prints the alert's "file a bug" URL;
- ``webhooks bisect ALERT --as USER`` starts a bisect of the alert as that user (whose
  rights are checked as on the page).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError, CommandParser
from django.db import transaction

from deviations.alerts.hooks import bugs, delivery, selectors, services
from deviations.alerts.hooks.models import Webhook, WebhookDelivery
from deviations.alerts.hooks.tasks import deliver_due_webhooks
from deviations.alerts.models import Alert
from deviations.core.errors import UserError
from deviations.management import base


class Command(base.Command):
    help = ("Outgoing webhooks, bug links and bisects: 'list' the webhooks, send a 'test' "
            "delivery, 'deliver' the due deliveries now, print an alert's 'bug-link', start "
            "a 'bisect'. See README, 'Webhooks, chat, bugs and bisects'.")

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True,
                                    metavar="list|test|deliver|bug-link|bisect")
        sub.add_parser("list", allow_abbrev=False, help="every webhook and its last delivery")
        test = sub.add_parser("test", allow_abbrev=False, help="send a test delivery now")
        test.add_argument("id", type=int, help="the webhook's id (see list)")
        sub.add_parser("deliver", allow_abbrev=False, help="send the due deliveries now")
        link = sub.add_parser("bug-link", allow_abbrev=False, help="an alert's bug URL")
        link.add_argument("alert", type=int, help="the alert's id")
        bisect = sub.add_parser("bisect", allow_abbrev=False, help="start a bisect")
        bisect.add_argument("alert", type=int, help="the alert's id")
        bisect.add_argument("--as", dest="username", required=True,
                            help="the user who asks (an owner of the series, the assignee)")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            getattr(self, "_" + opts["action"].replace("-", "_"))(opts)
        except UserError as exc:
            raise CommandError(exc.message) from exc

    def _list(self, opts: dict[str, Any]) -> None:
        for hook in Webhook.objects.select_related("owner").order_by("pk"):
            last = hook.deliveries.order_by("-created", "-pk").first()
            state = f"{last.kind} {last.status} ({last.attempts} attempts)" if last else "—"
            self.stdout.write(f"{hook.pk}\t{hook.purpose}\t{hook.target} {hook.pattern}\t"
                              f"{hook.format}\t{hook.url}\t{hook.owner.get_username()}\t{state}")

    def _test(self, opts: dict[str, Any]) -> None:
        hook = Webhook.objects.filter(pk=opts["id"]).first()
        if hook is None:
            raise CommandError(f"no webhook {opts['id']}")
        with transaction.atomic():
            sent = services.send_test(hook.owner, hook)
        delivery.attempt(sent.pk)  # here and now, unless the queued task claimed it first
        sent = selectors.deliveries(hook).get(pk=sent.pk)
        for t in sent.tries.all():
            self.stdout.write(f"attempt {t.number}: {t.status_code or '-'} {t.error}".rstrip())
        self.stdout.write(sent.status)
        if sent.status == WebhookDelivery.FAILED:
            raise CommandError(f"the test delivery to webhook {hook.pk} failed")

    def _deliver(self, opts: dict[str, Any]) -> None:
        self.stdout.write(f"{deliver_due_webhooks.apply().get()} due deliveries sent")

    def _alert(self, pk: int) -> Alert:
        alert = Alert.objects.select_related("group").filter(pk=pk).first()
        if alert is None:
            raise CommandError(f"no alert {pk}")
        return alert

    def _bug_link(self, opts: dict[str, Any]) -> None:
        url = bugs.link_for(self._alert(opts["alert"]))
        if url is None:
            raise CommandError("the alert's series or probe family has no bug template")
        self.stdout.write(url)

    def _bisect(self, opts: dict[str, Any]) -> None:
        user = get_user_model().objects.filter(username=opts["username"]).first()
        if user is None:
            raise CommandError(f"no user named {opts['username']!r}")
        found = services.start_bisect(user, self._alert(opts["alert"]))
        self.stdout.write(f"bisect {found.pk} requested")
