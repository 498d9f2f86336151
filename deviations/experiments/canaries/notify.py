"""Who is told when a canary rejects, and the email they get (once each).

Recipients: the canary's owners and subscribers, except addresses that unsubscribed from
this canary (an inactive ``Subscription`` with target ``canary`` and the canary's id as
pattern, written by the unsubscribe link) or from every canary (pattern ``*``). Claiming
and sending are ``deviations.alerts.services``': a second run sends nothing.

The rejection is also an ``Alert`` of the shared model (detector ``canary``: the alerts
page, the home page's untriaged groups, triage, ignores), recorded before the email. The
alerts notifier has no canary recipients (``alerts.notify.RECIPIENTS``): this module's one
email per address is the only one sent, with the canary's own words and unsubscribe link.
"""

from __future__ import annotations

from typing import Any

from deviations.alerts import services as alerts
from deviations.alerts.models import Alert, SentAlert, Subscription
from deviations.alerts.recording import AlertData, record
from deviations.experiments.canaries import selectors
from deviations.experiments.canaries.models import Canary

#: ``Subscription.target`` of the mute rows the unsubscribe links of canary emails write.
TARGET = Subscription.CANARY


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


def rejection_alert(canary: Canary, view: dict[str, Any]) -> AlertData:
    """The rejection as the shared model's alert: "from" is the canary's start, "to" its
    decision; the effect is the band on the change of the median (B − A)."""
    st = canary.state
    direction = Alert.IMPROVEMENT if st.headline == "improvement" else Alert.REGRESSION
    lo, hi = view["median_band"]
    started, decided = canary.created, st.decided_at or canary.created
    words = "; ".join(view["words"])
    return AlertData(
        key=f"canary:{canary.pk}:reject", detector=Alert.CANARY, family=canary.name,
        subject=canary.name, canary=str(canary.pk),
        from_label=f"start {started:%Y-%m-%d %H:%M}",
        to_label=f"decided at n = {st.decided_n_a}/{st.decided_n_b}",
        from_key=started.isoformat(), to_key=decided.isoformat(), direction=direction,
        method=(f"anytime-valid sequential test ({canary.method}, {_SOURCES[canary.method]}), "
                f"alpha {canary.alpha:g}"),
        level=1 - canary.alpha, metric=canary.metric, unit=canary.unit,
        effect=None if lo is None or hi is None else (lo + hi) / 2, effect_lo=lo,
        effect_hi=hi, p_value=st.p_value, n_before=st.decided_n_a, n_after=st.decided_n_b,
        explanation=f"canary {canary.name}: {view['headline_text']}. {words}.",
        data_at=decided,
    )


#: Where each canary method's test comes from (docs/statistics.md).
_SOURCES = {Canary.DKW: "Lindon et al. 2022", Canary.SIGNS: "Robbins 1970",
            Canary.RANKS: "Vovk 2021; Waudby-Smith and Ramdas 2024"}


def notify_rejection(canary_id: int) -> int:
    """Record the rejection of a canary as an alert, then email it to each recipient once;
    returns emails sent."""
    canary = Canary.objects.select_related("state").filter(pk=canary_id).first()
    if canary is None or canary.state.decision != "reject":
        return 0
    view = selectors.canary_view(canary)
    record([rejection_alert(canary, view)])
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
