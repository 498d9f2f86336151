"""REST API of subscriptions, mounted at /api/histograms (where it has always been):
subscribe an address to probes or to a trace series. Needs an API token."""

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema, Status

from deviations.alerts import services
from deviations.alerts.models import Subscription
from deviations.core.api import ErrorOut, TokenAuth

router = Router(tags=["alerts"])


class SubscriptionIn(Schema):
    email: str
    pattern: str
    target: str = Subscription.HISTOGRAM
    digest: bool = False


class SubscriptionOut(Schema):
    email: str
    pattern: str
    target: str
    digest: bool
    active: bool
    pending: bool


@router.post(
    "/subscriptions",
    auth=TokenAuth(),
    response={201: SubscriptionOut, 400: ErrorOut},
    summary="Subscribe an address to probes (name or pattern) or to a trace series",
)
def subscribe(request: HttpRequest, body: SubscriptionIn) -> Status[dict[str, Any]]:
    """The token's user's own address (or any, for staff) is subscribed at once; another
    address gets a confirmation link by email and stays `pending` until it is followed."""
    sub = services.validated_subscribe(
        body.email, body.pattern, body.target, body.digest, request.auth
    )
    return Status(201, {
        "email": sub.email, "pattern": sub.pattern, "target": sub.target,
        "digest": sub.digest, "active": sub.active, "pending": sub.pending,
    })

