"""The login page, throttled: repeated wrong passwords for an account lock further
attempts at it for a while (hardening #11, issue 23).

Failures are counted in the cache (Redis in the distributed form, so every web process
sees them) per account and client address together: ``LOGIN_FAILURES_ALLOWED`` within
``LOGIN_FAILURE_WINDOW`` seconds lock that user name from that address until the window
ends, even with the right password; a success clears the count. Behind a proxy every
visitor has the proxy's address, so an address alone is never locked (one user mistyping
locked everyone out, administrators included). A user name is also locked from every
address after ``LOGIN_FAILURES_ALLOWED × 4`` failures from anywhere (guessing from many
addresses). When the cache is down the login works unthrottled, with a warning in the log
(every login answered 500 while Redis was down).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

log = logging.getLogger(__name__)

#: A user name is locked from every address after this many times the per-address limit.
ANYWHERE = 4


def _keys(request: HttpRequest) -> list[str]:
    """The (user name, address) key, then the user name's key."""
    name = request.POST.get("username", "").strip().lower()
    address = request.META.get("REMOTE_ADDR", "")
    pair = hashlib.sha256(f"{name}\x00{address}".encode()).hexdigest()[:32]
    user = hashlib.sha256(name.encode()).hexdigest()[:32]
    return [f"login-fail:pair:{pair}", f"login-fail:user:{user}"]


def _locked(keys: list[str]) -> bool:
    try:
        counts = cache.get_many(keys)
    except Exception:  # noqa: BLE001  # any cache error: log in unthrottled, never a 500
        log.warning("login throttle: the cache is unavailable; login not throttled",
                    exc_info=True)
        return False
    limits = {keys[0]: settings.LOGIN_FAILURES_ALLOWED,
              keys[1]: settings.LOGIN_FAILURES_ALLOWED * ANYWHERE}
    return any(n >= limits[k] for k, n in counts.items())


def _count_failure(keys: list[str]) -> None:
    try:
        for key in keys:
            if cache.add(key, 1, timeout=settings.LOGIN_FAILURE_WINDOW):
                continue
            try:
                cache.incr(key)
            except ValueError:  # expired between add and incr
                cache.add(key, 1, timeout=settings.LOGIN_FAILURE_WINDOW)
    except Exception:  # noqa: BLE001
        log.warning("login throttle: the cache is unavailable; failure not counted",
                    exc_info=True)


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
        try:
            cache.delete(keys[0])
        except Exception:  # noqa: BLE001
            log.warning("login throttle: the cache is unavailable", exc_info=True)
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


#: Password reset emails: one an address per window, and ``RESETS_PER_ADDRESS`` requests a
#: client address per window (issue 23: unthrottled, any number of emails to an address).
RESETS_PER_ADDRESS = 10


class ThrottledPasswordResetView(auth_views.PasswordResetView):
    """Django's reset page, sending at most one email an address per
    ``LOGIN_FAILURE_WINDOW``; a client asking too often gets 429. The page answers the
    same whether the address is known or not (no account enumeration), and works
    unthrottled while the cache is down."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        client = f"reset:client:{request.META.get('REMOTE_ADDR', '')}"
        email = request.POST.get("email", "").strip().lower()
        target = "reset:email:" + hashlib.sha256(email.encode()).hexdigest()[:32]
        window = settings.LOGIN_FAILURE_WINDOW
        try:
            if not cache.add(client, 1, timeout=window):
                if cache.incr(client) > RESETS_PER_ADDRESS:
                    minutes = max(1, window // 60)
                    return HttpResponse(f"Too many password resets: try again in {minutes} "
                                        "minutes.", status=429, content_type="text/plain")
            first = cache.add(target, 1, timeout=window)
        except Exception:  # noqa: BLE001
            log.warning("password reset throttle: the cache is unavailable", exc_info=True)
            first = True
        if not first:  # an email went to this address in this window: say the same, send none
            return HttpResponseRedirect(self.get_success_url())
        return super().post(request, *args, **kwargs)
