"""The API tokens page: create (the key is shown once), list and revoke one's own tokens."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from deviations.core import access
from deviations.core.models import ApiToken, Ownership


@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    created_key, error = None, ""
    if request.method == "POST":
        name = request.POST.get("name", "").strip()
        scope = request.POST.get("scope", "").strip()
        if not 0 < len(name) <= 100 or len(scope) > 200:
            error = "give the token a name (1 to 100 characters) and a scope of at most 200"
        else:
            _, created_key = ApiToken.issue(request.user, name, scope)
    return render(request, "core/tokens.html", {
        "tokens": ApiToken.objects.filter(user=request.user).order_by("-created"),
        "created_key": created_key, "error": error,
        "series": access.owned_by(request.user, Ownership.SERIES),
        "probes": access.owned_by(request.user, Ownership.PROBE),
    }, status=400 if error else 200)


@login_required
@require_POST
def revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    get_object_or_404(ApiToken, pk=token_id, user=request.user).delete()
    return redirect("tokens")
