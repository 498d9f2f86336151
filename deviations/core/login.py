"""The login page, throttled: repeated wrong passwords for a user name, or from an address,
lock further attempts for a while (hardening #11).

Failures are counted in the cache (Redis in the distributed form, so every web process
sees them) per user name and per client address; ``LOGIN_FAILURES_ALLOWED`` within
``LOGIN_FAILURE_WINDOW`` seconds lock that name or address until the window ends, even with
the right password. A success clears the name's count.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse


def _keys(request: HttpRequest) -> list[str]:
    name = request.POST.get("username", "").strip().lower()
    address = request.META.get("REMOTE_ADDR", "")
    digest = hashlib.sha256(name.encode()).hexdigest()[:32]
    return [f"login-fail:user:{digest}", f"login-fail:addr:{address}"]


def _locked(keys: list[str]) -> bool:
    counts = cache.get_many(keys)
    return any(n >= settings.LOGIN_FAILURES_ALLOWED for n in counts.values())


def _count_failure(keys: list[str]) -> None:
    for key in keys:
        if cache.add(key, 1, timeout=settings.LOGIN_FAILURE_WINDOW):
            continue
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=settings.LOGIN_FAILURE_WINDOW)


def throttled(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """``view`` (a login view answering 302 on success) with the same throttle; a locked
    attempt gets a plain 429 (the admin's login page)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method != "POST":
            return view(request, *args, **kwargs)
        keys = _keys(request)
        if _locked(keys):
            return HttpResponse(_locked_message(), status=429, content_type="text/plain")
        response = view(request, *args, **kwargs)
        _record(keys, response)
        return response

    return wrapper


def _locked_message() -> str:
    minutes = max(1, settings.LOGIN_FAILURE_WINDOW // 60)
    return f"Too many failed logins: try again in {minutes} minutes."


def _record(keys: list[str], response: HttpResponse) -> None:
    if response.status_code == 302:
        cache.delete(keys[0])
    else:
        _count_failure(keys)


class ThrottledLoginView(auth_views.LoginView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        keys = _keys(request)
        if _locked(keys):
            form = self.get_form()
            form.add_error(None, _locked_message())
            return self.render_to_response(self.get_context_data(form=form), status=429)
        response = super().post(request, *args, **kwargs)
        _record(keys, response)
        return response
