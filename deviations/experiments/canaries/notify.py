"""Who is told when a canary rejects, and the email they get (once each).

Recipients: the canary's owners and subscribers, except addresses that unsubscribed from
this canary (an inactive ``Subscription`` with target ``canary`` and the canary's id as
pattern, written by the unsubscribe link) or from every canary (pattern ``*``). Claiming
and sending are ``deviations.alerts.services``': a second run sends nothing.
"""

from __future__ import annotations

from deviations.alerts import services as alerts
from deviations.alerts.models import SentAlert, Subscription
from deviations.experiments.canaries import selectors
from deviations.experiments.canaries.models import Canary

#: ``Subscription.target`` of the mute rows the unsubscribe links of canary emails write.
TARGET = "canary"


def recipients(canary: Canary) -> list[tuple[str, str]]:
    """(email, why) of everyone to tell, sorted by address."""
    muted = set(
        Subscription.objects.filter(
            target=TARGET, pattern__in=[str(canary.pk), alerts.ALL], active=False
        ).values_list("email", flat=True)
    )
    found: dict[str, str] = {}
    for email in canary.subscribers:
        found.setdefault(alerts.normalise_email(email), "you subscribed to this canary")
    for email in canary.owners:
        found[alerts.normalise_email(email)] = "you are an owner of this canary"
    return sorted((e, why) for e, why in found.items() if e not in muted)


def recipients_left(canary_id: int) -> bool:
    """Whether someone should have been told of the canary's rejection and was not."""
    canary = Canary.objects.filter(pk=canary_id).first()
    if canary is None:
        return False
    told = set(SentAlert.objects.filter(subject=f"canary:{canary_id}:reject")
               .values_list("email", flat=True))
    return any(email not in told for email, _ in recipients(canary))


def notify_rejection(canary_id: int) -> int:
    """Email the rejection of a canary to each recipient once; returns emails sent."""
    canary = Canary.objects.select_related("state").filter(pk=canary_id).first()
    if canary is None or canary.state.decision != "reject":
        return 0
    view = selectors.canary_view(canary)
    url = alerts.site_url(canary.get_absolute_url())
    summary = f"canary {canary.name}: {view['headline_text']}"
    sent = 0
    for email, why in recipients(canary):
        alert = alerts.claim(
            f"canary:{canary.pk}:reject", email, SentAlert.SENDING, summary=summary, url=url
        )
        if alert is None:
            continue
        lines = "\n".join(f"- {w}" for w in view["words"])
        body = (
            f"The canary {canary.name} ({canary.metric or 'metric'}) decided: "
            f"{view['headline_text']}.\n\n{lines}\n\n"
            f"Sequential p-value {view['p_value_text']} (alpha {canary.alpha}), reached at "
            f"{canary.state.decided_n_a} observations in A and {canary.state.decided_n_b} in B.\n"
            f"The canary takes no more observations unless someone continues it.\n\n"
            f"Live page: {url}\n\nYou receive this because {why}."
        )
        alerts.send(alert, f"[deviations] {summary}", body,
                    alerts.unsubscribe_url(email, TARGET, str(canary.pk)))
        sent += 1
    return sent
