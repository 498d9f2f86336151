""""Downstream of": an alert group caused by another group (Chromeperf's and Perfherder's
"downstream" alerts).

A sheriff links a group to the group it is caused by (same or another family, any
detector): a `V8.Execute` total-time group downstream of the `Compile` self-time group
that explains it, a histogram family downstream of a series' regression. The upstream
group lists its downstream groups. A downstream group is triaged with its upstream: it
does not count as untriaged (home page, the ``untriaged`` filter, the API) and it is not
emailed while the link stands (nor listed in a digest not sent yet). A group has at most
one upstream; chains are allowed, cycles are refused. Removing the link makes the group
an ordinary one again (emailed then if it was never emailed and is due).

Writes check the downstream group's alerts as a move does (``services.check_sheriff``):
its owners, the user all its alerts are assigned to, staff; a token's scope.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from deviations.alerts.models import AlertGroup
from deviations.alerts.services import check_sheriff
from deviations.core.errors import UserError


def _check(group: AlertGroup, user: Any) -> None:
    check_sheriff(user, list(group.alerts.select_related("group")))


@transaction.atomic
def link(downstream: AlertGroup, upstream_id: int, user: Any) -> AlertGroup:
    """Mark ``downstream`` as caused by the group ``upstream_id`` (replacing a former
    link); refused when there is no such group, or it is ``downstream`` or downstream of
    it (a cycle)."""
    _check(downstream, user)
    upstream = AlertGroup.objects.filter(pk=upstream_id).first()
    if upstream is None:
        raise UserError(f"upstream group: there is no group #{upstream_id}", code="upstream")
    if downstream.pk == upstream.pk:
        raise UserError("a group cannot be downstream of itself", code="upstream")
    # Lock the downstream group and every group up the new upstream's chain, each read
    # after its lock: two links that would close a cycle together meet on one row, and the
    # second sees the first's link.
    list(AlertGroup.objects.select_for_update().filter(pk=downstream.pk).values_list("pk"))
    at: int | None = upstream.pk
    path = []
    while at is not None:
        if at == downstream.pk:
            through = " → ".join(f"#{pk}" for pk in [*path, downstream.pk])
            raise UserError(
                f"group #{upstream.pk} is already downstream of group #{downstream.pk} "
                f"({through}): the link would make a cycle", code="upstream")
        path.append(at)
        at = (AlertGroup.objects.select_for_update().filter(pk=at)
              .values_list("upstream_id", flat=True).first())
    AlertGroup.objects.filter(pk=downstream.pk).update(
        upstream=upstream, upstream_by=user, upstream_at=timezone.now())
    downstream.refresh_from_db()
    return downstream


@transaction.atomic
def unlink(downstream: AlertGroup, user: Any) -> AlertGroup:
    """Remove ``downstream``'s link to its upstream group (nothing if it has none)."""
    _check(downstream, user)
    AlertGroup.objects.filter(pk=downstream.pk).update(
        upstream=None, upstream_by=None, upstream_at=None)
    downstream.refresh_from_db()
    return downstream
