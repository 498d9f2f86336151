"""Subscription pages: one's subscriptions (subscribe, unsubscribe links) and the
unsubscribe page that email links open. Served under /histograms/ (their historical
addresses, in the ``histograms`` URL namespace)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core import signing
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from deviations.alerts import selectors, services
from deviations.alerts.models import Subscription
from deviations.core.errors import UserError


@login_required
def subscriptions(request: HttpRequest) -> HttpResponse:
    error = ""
    values = {"email": request.user.email, "pattern": "", "target": Subscription.HISTOGRAM,
              "digest": False}
    if request.method == "POST":
        values = {
            "email": request.POST.get("email", ""), "pattern": request.POST.get("pattern", ""),
            "target": request.POST.get("target", Subscription.HISTOGRAM),
            "digest": request.POST.get("digest") == "on",
        }
        try:
            services.validated_subscribe(
                values["email"], values["pattern"], values["target"], values["digest"],
                request.user,
            )
        except UserError as exc:
            error = exc.message
        else:
            return redirect("histograms:subscriptions")
    # An unsubscribe link only for the addresses this user speaks for: a link for someone
    # else's address would let anyone silence them.
    subs = [
        (s, reverse("histograms:unsubscribe",
                    args=[services.unsubscribe_token(s.email, s.target, s.pattern)])
         if services.speaks_for(request.user, s.email) else None)
        for s in selectors.user_subscriptions(request.user)
    ]
    return render(request, "alerts/subscriptions.html", {
        "subs": subs, "values": values, "error": error, "targets": Subscription.TARGETS,
    }, status=400 if error else 200)


def confirm(request: HttpRequest, token: str) -> HttpResponse:
    """The link emailed to an address someone else subscribed: a GET shows a button (mail
    scanners follow links), the POST confirms."""
    try:
        email, target, pattern, _ = services.read_confirmation(token)
    except signing.SignatureExpired:
        return render(request, "alerts/confirm.html", {"expired": True}, status=400)
    except signing.BadSignature:
        return render(request, "alerts/confirm.html", {"invalid": True}, status=400)
    done = False
    if request.method == "POST":
        services.confirm_subscription(token)
        done = True
    return render(request, "alerts/confirm.html", {
        "email": email, "target": target, "pattern": pattern, "done": done,
    })


# The signed token is the authority here, not a session: mail clients' one-click
# unsubscribe (RFC 8058) POSTs without a CSRF token.
@csrf_exempt
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    try:
        email, target, pattern = services.read_token(token)
    except signing.SignatureExpired:
        return render(request, "alerts/unsubscribe.html", {"expired": True}, status=400)
    except signing.BadSignature:
        return render(request, "alerts/unsubscribe.html", {"invalid": True}, status=400)
    done = False
    if request.method == "POST":
        services.unsubscribe(token)
        done = True
    return render(request, "alerts/unsubscribe.html", {
        "email": email, "target": target, "pattern": pattern, "done": done,
    })
