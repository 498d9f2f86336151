"""Requests whose URL or form holds a NUL character are refused with 400 (issue 23).

PostgreSQL's text types cannot hold NUL (``\\x00``): a query filtered by a value holding
one raises ``DataError`` from deep inside the view, an HTTP 500, for anonymous GETs too
(``/series/a%00b/``, ``/alerts/?family=%00``, ``compare?base=%00``). No name, label or
parameter of this application may hold one, so the request is refused before any view
runs, with the reason and the parameter named. The text fields of a page's multipart form
are checked too (a NUL in an upload page's release or a note sent as multipart was a 500:
the form fuzzing of tests/core/test_form_fuzz.py found it); reading them parses the body,
which Django's CSRF check does before any page's view anyway, with the same upload handlers
(the size limit of core.uploads). The API's multipart bodies are left to its views, which
check the caller's token before reading a body. Uploaded files are not looked at (a trace
may hold anything: its reader says what it refuses), nor JSON bodies (the API's schemas
check their text fields).
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError

NUL = "\x00"


def _where(request: HttpRequest) -> str | None:
    """What holds a NUL: ``"the URL path"``, ``"parameter 'x'"``, or None."""
    if NUL in request.path:
        return "the URL path"
    for name, values in request.GET.lists():
        if NUL in name or any(NUL in v for v in values):
            return f"URL parameter {name.replace(NUL, '?')!r}"
    content_type = request.content_type or ""
    form = content_type == "application/x-www-form-urlencoded" or (
        content_type == "multipart/form-data" and not request.path.startswith("/api/"))
    if request.method == "POST" and form:
        try:
            fields = list(request.POST.lists())
        except MultiPartParserError:
            return None  # a body that is not multipart: the view answers it, as before
        for name, values in fields:
            if NUL in name or any(NUL in v for v in values):
                return f"form field {name.replace(NUL, '?')!r}"
    return None


class RefuseNulMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        where = _where(request)
        if where is None:
            return self.get_response(request)
        message = f"{where} holds a NUL character (\\x00), which no name or value may hold"
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": message}, status=400)
        return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")
