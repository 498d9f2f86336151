"""Pages of the hooks (under /hooks/, namespace ``hooks``): one's webhooks with their
deliveries and attempts (add, delete, test), the bug templates (set, delete), and the
"Start bisect" button of an alert. HTTP only: parse, call a service or selector, render."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from deviations.alerts.hooks import selectors, services
from deviations.alerts.hooks.models import BugTemplate, Webhook
from deviations.alerts.models import Alert
from deviations.alerts.views import alert_page
from deviations.core.errors import UserError

_HOOK_FIELDS = ("url", "pattern", "target", "purpose", "format", "secret", "matrix_token")
_TEMPLATE_FIELDS = ("target", "family", "kind", "base_url", "product", "component", "labels")


@login_required
def webhooks(request: HttpRequest) -> HttpResponse:
    error, status = "", 200
    values = {f: request.POST.get(f, "") for f in _HOOK_FIELDS}
    if request.method == "POST":
        try:
            services.create_webhook(request.user, improvements=request.POST.get(
                "improvements") == "on", **values)
        except UserError as exc:
            error, status = exc.message, exc.status
        else:
            return redirect("hooks:webhooks")
    return _webhooks_page(request, values, error, status)


def _webhooks_page(request: HttpRequest, values: dict[str, str], error: str = "",
                   status: int = 200) -> HttpResponse:
    """The webhooks page; after a refused action, with the reason (and the form as sent)."""
    return render(request, "alerts/hooks/webhooks.html", {
        "hooks": selectors.user_webhooks(request.user), "values": values, "error": error,
        "targets": Webhook.TARGETS, "formats": Webhook.FORMATS, "purposes": Webhook.PURPOSES,
    }, status=status)


@login_required
@require_POST
def webhook_delete(request: HttpRequest, hook_id: int) -> HttpResponse:
    try:
        services.delete_webhook(request.user, get_object_or_404(Webhook, pk=hook_id))
    except UserError as exc:
        return _webhooks_page(request, {}, exc.message, exc.status)
    return redirect("hooks:webhooks")


@login_required
@require_POST
def webhook_test(request: HttpRequest, hook_id: int) -> HttpResponse:
    try:
        services.send_test(request.user, get_object_or_404(Webhook, pk=hook_id))
    except UserError as exc:
        return _webhooks_page(request, {}, exc.message, exc.status)
    return redirect("hooks:webhooks")


def bug_templates(request: HttpRequest) -> HttpResponse:
    error, status = "", 200
    values = {f: request.POST.get(f, "") for f in _TEMPLATE_FIELDS}
    if request.method == "POST":
        if not request.user.is_authenticated:
            return redirect(f"/accounts/login/?next={request.path}")
        try:
            services.set_bug_template(request.user, **values)
        except UserError as exc:
            error, status = exc.message, exc.status
        else:
            return redirect("hooks:bugs")
    return _bugs_page(request, values, error, status)


def _bugs_page(request: HttpRequest, values: dict[str, str], error: str = "",
               status: int = 200) -> HttpResponse:
    return render(request, "alerts/hooks/bugs.html", {
        "templates": selectors.bug_templates(), "values": values, "error": error,
        "kinds": BugTemplate.KINDS, "targets": BugTemplate.TARGETS,
    }, status=status)


@login_required
@require_POST
def bug_template_delete(request: HttpRequest, template_id: int) -> HttpResponse:
    try:
        services.delete_bug_template(request.user,
                                     get_object_or_404(BugTemplate, pk=template_id))
    except UserError as exc:
        return _bugs_page(request, {}, exc.message, exc.status)
    return redirect("hooks:bugs")


@login_required
@require_POST
def start_bisect(request: HttpRequest, alert_id: int) -> HttpResponse:
    alert = get_object_or_404(Alert.objects.select_related("group"), pk=alert_id)
    try:
        services.start_bisect(request.user, alert)
    except UserError as exc:
        return alert_page(request, alert.pk, bisect_error=exc.message, status=exc.status)
    return redirect(alert.get_absolute_url())
