"""Alert pages: the alerts page (groups, filters, exports), a group (bulk triage), an
alert (explanation, notes), ignored functions and probes (under /alerts/, namespace
``alerts``); and the subscription pages: one's subscriptions and the unsubscribe page that
email links open (under /histograms/, their historical addresses, namespace
``histograms``). HTTP only: parse, call a selector or service, render."""

from __future__ import annotations

import io

import msgspec
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from deviations.alerts import downstream, nudging, selectors, services
from deviations.alerts.models import Alert, AlertGroup, Ignore, Subscription
from deviations.core.errors import UserError
from deviations.core.tables import write_csv
from deviations.histograms.models import Probe
from deviations.traces.models import Function

_GROUPS_PER_PAGE = 50


def _next(request: HttpRequest, default: str) -> str:
    """The page to go back to: a local path only (never another site)."""
    target = request.POST.get("next", "")
    return target if target.startswith("/") and not target.startswith("//") else default


def _numbers(values: list[str]) -> list[int]:
    """The ids among ``values``: ASCII digits only ("²" is a digit to ``str.isdigit`` and
    not to ``int``: it was a 500), at most 18 (a 64-bit id)."""
    return [int(v) for v in values if v.isascii() and v.isdigit() and len(v) <= 18]


def alert_list(request: HttpRequest) -> HttpResponse:
    """Groups of the alerts matching the filters, newest untriaged first; ``?format=csv``
    or ``json`` exports the matching alerts themselves."""
    filters = selectors.Filters.from_params(request.GET)
    alerts = selectors.filtered_alerts(filters)
    fmt = request.GET.get("format")
    if fmt == "json":
        return HttpResponse(msgspec.json.encode(selectors.export_rows(alerts.order_by("pk"))),
                            content_type="application/json")
    if fmt == "csv":
        out = io.StringIO()
        write_csv(out, selectors.export_rows(alerts.order_by("pk")), selectors.EXPORT_FIELDS)
        response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="alerts.csv"'
        return response
    try:
        page = max(1, int(request.GET.get("page", "1")))
    except ValueError:
        page = 1
    rows = selectors.group_rows(alerts, limit=_GROUPS_PER_PAGE + 1,
                                offset=(page - 1) * _GROUPS_PER_PAGE)
    return render(request, "alerts/list.html", {
        "rows": rows[:_GROUPS_PER_PAGE], "filters": filters,
        "statuses": Alert.STATUSES, "detectors": Alert.DETECTORS,
        "directions": Alert.DIRECTIONS,
        "export_csv": "?" + filters.params(format="csv"),
        "export_json": "?" + filters.params(format="json"),
        "prev_page": filters.params(page=page - 1) if page > 1 else None,
        "next_page": filters.params(page=page + 1) if len(rows) > _GROUPS_PER_PAGE else None,
    })


def group_detail(request: HttpRequest, group_id: int) -> HttpResponse:
    group = get_object_or_404(AlertGroup, pk=group_id)
    return _group_page(request, group)


def _group_page(request: HttpRequest, group: AlertGroup, *, error: str = "",
                link_error: str = "", status: int = 200) -> HttpResponse:
    """The group's page; after a refused triage, with the reason and the form as sent
    (after a refused link, with its reason)."""
    from django.contrib.auth import get_user_model

    posted = request.POST if error else {}
    return render(request, "alerts/group.html", {
        "upstream_chain": selectors.upstream_chain(group),
        "downstream_groups": selectors.downstream_groups(group), "link_error": link_error,
        "posted_upstream": request.POST.get("upstream", "")[:20] if link_error else "",
        "group": group, "alerts": selectors.group_alerts(group),
        "links": selectors.group_links(group), "statuses": Alert.STATUSES,
        "range": selectors.group_range(group), "error": error, "posted": posted,
        "chosen": set(_numbers(request.POST.getlist("alert"))) if error else set(),
        # Who can be assigned: a list the assignee field offers (it stays free text), read
        # only for the signed-in users who see the form.
        "users": get_user_model().objects.filter(is_active=True).order_by("username")
        .values_list("username", flat=True)[:500] if request.user.is_authenticated else [],
    }, status=status)


@login_required
@require_POST
def group_triage(request: HttpRequest, group_id: int) -> HttpResponse:
    """Bulk triage: the selected alerts of the group (``alert`` values) get the status,
    bug link, assignee and note given (a blank field leaves the alerts' value as is)."""
    group = get_object_or_404(AlertGroup, pk=group_id)
    ids = _numbers(request.POST.getlist("alert"))
    chosen = list(group.alerts.filter(pk__in=ids).select_related("group"))
    back = _next(request, group.get_absolute_url())
    try:
        services.triage(
            chosen, request.user,
            status=request.POST.get("status") or None,
            bug_url=request.POST.get("bug_url") if request.POST.get("bug_url") else (
                "" if request.POST.get("clear_bug") else None),
            assignee=request.POST.get("assignee") or (
                "" if request.POST.get("unassign") else None),
            note=request.POST.get("note", ""),
        )
    except UserError as exc:
        return _group_page(request, group, error=exc.message, status=exc.status)
    return redirect(back)


def alert_detail(request: HttpRequest, alert_id: int) -> HttpResponse:
    return alert_page(request, alert_id)


def alert_page(request: HttpRequest, alert_id: int, *, error: str = "",
               bisect_error: str = "", status: int = 200) -> HttpResponse:
    """An alert's page; after a refused move or bisect (hooks.views), with the reason."""
    alert = get_object_or_404(
        Alert.objects.select_related("group", "assignee", "status_by", "nudged_by"),
        pk=alert_id,
    )
    return render(request, "alerts/alert.html", {
        "alert": alert, "notes": alert.notes.select_related("author"),
        "links": selectors.group_links(alert.group), "statuses": Alert.STATUSES,
        "subject_url": selectors.subject_url(alert),
        "range": selectors.culprit_range(alert),
        "neighbours": selectors.nudge_targets(alert), "nudge_error": error,
        "bisect_error": bisect_error,
    }, status=status)


@login_required
@require_POST
def nudge(request: HttpRequest, alert_id: int) -> HttpResponse:
    """Move the alert to its ``side`` ("earlier" or "later") neighbouring boundary."""
    alert = get_object_or_404(Alert, pk=alert_id)
    try:
        nudging.nudge(alert, request.user, request.POST.get("side", ""))
    except UserError as exc:
        return alert_page(request, alert_id, error=exc.message, status=exc.status)
    return redirect(alert.get_absolute_url())


def _group_number(value: str) -> int:
    value = value.strip().removeprefix("#")
    if not _numbers([value]):
        raise UserError("upstream group: give its number (as in #12 or 12)", code="upstream")
    return int(value)


@login_required
@require_POST
def link_upstream(request: HttpRequest, group_id: int) -> HttpResponse:
    """Mark the group as downstream of the group numbered ``upstream``."""
    group = get_object_or_404(AlertGroup, pk=group_id)
    try:
        downstream.link(group, _group_number(request.POST.get("upstream", "")), request.user)
    except UserError as exc:
        return _group_page(request, group, link_error=exc.message, status=exc.status)
    return redirect(group.get_absolute_url())


@login_required
@require_POST
def unlink_upstream(request: HttpRequest, group_id: int) -> HttpResponse:
    group = get_object_or_404(AlertGroup, pk=group_id)
    try:
        downstream.unlink(group, request.user)
    except UserError as exc:
        return _group_page(request, group, link_error=exc.message, status=exc.status)
    return redirect(group.get_absolute_url())


@login_required
@require_POST
def add_note(request: HttpRequest, alert_id: int) -> HttpResponse:
    alert = get_object_or_404(Alert, pk=alert_id)
    try:
        services.add_note(alert, request.user, request.POST.get("text", ""))
    except UserError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    return redirect(alert.get_absolute_url())


def ignored_list(request: HttpRequest) -> HttpResponse:
    return render(request, "alerts/ignored.html", {"ignored": selectors.all_ignored()})


@login_required
@require_POST
def ignore(request: HttpRequest) -> HttpResponse:
    """Ignore a function (``function`` id) or a probe (``probe`` id): names come from the
    database, not from the form."""
    kind = request.POST.get("kind", "")
    try:
        if kind == Ignore.FUNCTION:
            function = get_object_or_404(Function.objects.select_related("series"),
                                         pk=int(request.POST.get("function", "0") or 0))
            services.ignore(kind, function.series.name, function.name, request.user,
                            function=function)
        elif kind == Ignore.PROBE:
            probe = get_object_or_404(Probe, pk=int(request.POST.get("probe", "0") or 0))
            services.ignore(kind, probe.name, probe.name, request.user, probe=probe)
        else:
            raise UserError("kind must be 'function' or 'probe'")
    except (UserError, ValueError) as exc:
        message = exc.message if isinstance(exc, UserError) else "bad id"
        status = exc.status if isinstance(exc, UserError) else 400
        return HttpResponse(message, status=status, content_type="text/plain")
    return redirect(_next(request, reverse("alerts:ignored")))


@login_required
@require_POST
def unignore(request: HttpRequest, ignore_id: int) -> HttpResponse:
    found = get_object_or_404(Ignore, pk=ignore_id)
    try:
        services.unignore(found, request.user)
    except UserError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    return redirect(_next(request, reverse("alerts:ignored")))


@login_required
def subscriptions(request: HttpRequest) -> HttpResponse:
    error = ""
    values = {"email": request.user.email, "pattern": "", "target": Subscription.HISTOGRAM,
              "digest": False, "improvements": False}
    if request.method == "POST":
        values = {
            "email": request.POST.get("email", ""), "pattern": request.POST.get("pattern", ""),
            "target": request.POST.get("target", Subscription.HISTOGRAM),
            "digest": request.POST.get("digest") == "on",
            "improvements": request.POST.get("improvements") == "on",
        }
        try:
            services.validated_subscribe(
                values["email"], values["pattern"], values["target"], values["digest"],
                request.user, values["improvements"],
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
