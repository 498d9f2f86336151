"""Task of alerts: the daily digest (beat entry ``send-alert-digests``)."""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from deviations.alerts import services


@shared_task(
    name="deviations.send_alert_digests",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
)
def send_alert_digests() -> int:
    """One email per address with the alerts queued for its daily digest."""
    return services.send_digests()
