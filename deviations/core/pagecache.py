"""Pages whose HTML is the same for every visitor, kept rendered (``core.memo``).

A page of the matrix cost 15-21 ms of CPU to assemble and render (its figure, its table
and the release selects), the same for every visitor until something it shows changes;
kept, ~3.5 ms (docs/architecture.md, "Rendered pages and load").
``shared_page`` keeps the rendered page under a key the view builds from everything the
page shows (the series' row, its analysis generation, the controls, the releases with
their run counts, the notes), so a kept page is never stale: any change is a new key.

What differs per visitor never enters the kept HTML: the page is rendered without the
request (no user, no session, no CSRF token: ``{% csrf_token %}`` renders nothing and
``user`` is undefined), with ``account_slot`` in place of the header's signed-in part
(``templates/_account.html``: the user's name, the logout form and its CSRF token, or the
login link). Each response renders that part for its own request and puts it in the slot.
Permissions are checked before the view runs (``core.middleware``), never inside the page.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from deviations.core import memo

#: What ``base.html`` writes in place of the visitor's part of the header. Nothing a user
#: sends can produce it: templates escape ``<`` in text, figures write it as ``\u003C``.
ACCOUNT_SLOT: SafeString = mark_safe("<!--account-->")


def shared_page(request: HttpRequest, key: Hashable, template: str,
                context: Callable[[], dict[str, Any]]) -> HttpResponse:
    """The page ``template`` renders with ``context()``, kept under ``key``; the visitor's
    part of the header is rendered for ``request`` each time.

    ``key`` must change whenever anything the page shows changes; ``context`` is called
    only when nothing is kept under it (every time with ``DEVIATIONS_PAGE_CACHE_MB=0`` or
    ``DEBUG``, where templates edited under runserver must show at once).
    """

    def make() -> tuple[tuple[str, str], int]:
        html = render_to_string(template, {**context(), "account_slot": ACCOUNT_SLOT})
        before, slot, after = html.partition(ACCOUNT_SLOT)
        if not slot:
            raise ValueError(f"{template} does not extend base.html: no account slot")
        return (before, after), sys.getsizeof(before) + sys.getsizeof(after)

    if settings.DEBUG:  # a template edited under runserver shows at the next request
        (before, after), _ = make()
    else:
        kept = memo.remembered(("page", key), make)
        assert kept is not None  # make() never returns None
        before, after = kept
    account = render_to_string("_account.html", request=request)
    return HttpResponse(before + account + after)
