"""Tasks of alerts: email the alert groups that are due (beat entry
``notify-alert-groups``; also after every analysis and detection) and the daily digest
(``send-alert-digests``)."""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from deviations.alerts import notify, services


@shared_task(
    name="deviations.notify_alert_groups",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def notify_alert_groups() -> int:
    """Email every alert group that became due (confirmed, or provisional for longer than
    the confirmation delay) and was not emailed yet; returns the emails sent."""
    return notify.notify_due_groups()


@shared_task(
    name="deviations.send_alert_digests",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def send_alert_digests() -> int:
    """One email per address with the alerts queued for its daily digest."""
    return services.send_digests()
