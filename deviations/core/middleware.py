"""Browsing login-only, by setting (``DEVIATIONS_LOGIN_REQUIRED``; public by default).

Pages redirect anonymous visitors to the login page; the API answers 401 to requests
without a valid token or session. The login page, static files, and the links emailed to
people (unsubscribe, confirm) stay open.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse

from deviations.core.api import TokenAuth

_OPEN = ("/accounts/login/", "/static/", "/histograms/unsubscribe/", "/histograms/confirm/")


class LoginRequiredMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if (
            settings.DEVIATIONS_LOGIN_REQUIRED
            and not request.user.is_authenticated
            and not request.path.startswith(_OPEN)
        ):
            if request.path.startswith("/api/"):
                header = request.headers.get("Authorization", "")
                key = header[7:] if header.lower().startswith("bearer ") else ""
                if not key or TokenAuth().authenticate(request, key) is None:
                    return JsonResponse({"detail": "sign in or send an API token"}, status=401)
            else:
                return redirect_to_login(request.get_full_path())
        return self.get_response(request)
