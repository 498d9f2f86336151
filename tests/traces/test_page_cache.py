"""The matrix page kept rendered (``deviations.core.pagecache``): rendered once per state of
what it shows, never stale, and never carrying one visitor's header to another."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from deviations.core import memo
from deviations.traces import views
from deviations.traces.models import Release, ReleaseAnnotation, Run, Series
from tests.conftest import renderer_events
from tests.traces.test_matrix_pages import figure_of, series  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """One entry per time the matrix page's context is assembled (a page not kept)."""
    memo.forget()
    made: list[Any] = []
    assemble = views._series_context
    monkeypatch.setattr(views, "_series_context",
                        lambda *a, **k: made.append(a) or assemble(*a, **k))
    return made


def rendered(client: Client, renders: list[Any], url: str = "/series/s/") -> tuple[str, int]:
    """The page's HTML and how many times it was assembled for this request (0 or 1)."""
    before = len(renders)
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode(), len(renders) - before


def release_rows(html: str) -> dict[str, list[str]]:
    """Release version → its cells (done, failed, pending) in "Releases and runs"."""
    table = html[html.index('<details class="releases">'):]
    rows = re.findall(r'<tr>\s*<td><a href="[^"]*">([^<]*)</a>.*?</td>\s*'
                      r'<td class="num">(\d+)</td>\s*<td class="num">(?:<span[^>]*>)?(\d+)'
                      r'(?:</span>)?</td>\s*<td class="num">(\d+)</td>', table, re.S)
    return {version: list(cells) for version, *cells in rows}


def test_a_kept_page_shows_every_change_at_once(
    client: Client, series: str, renders: list[Any], tmp_path: Path  # noqa: F811
) -> None:
    html, made = rendered(client, renders)
    assert made == 1
    assert rendered(client, renders) == (html, 0)  # kept: not assembled again
    assert rendered(client, renders, "/series/s/?sort=name")[1] == 1  # other controls

    def regressions(html: str) -> list[str]:
        figure = figure_of(html, "matrix-figure")
        return [y for t in figure["data"] if t["name"] == "regression" for y in t["y"]]

    # The series' minimum practical change (admin, API): the verdicts change.
    assert regressions(rendered(client, renders, "/series/s/?rule=paper")[0]) == ["Paint"]
    Series.objects.filter(name="s").update(min_absolute_change_us=1_000)  # Paint: +200 µs
    html, made = rendered(client, renders, "/series/s/?rule=paper")
    assert (regressions(html), made) == ([], 1)
    Series.objects.filter(name="s").update(min_absolute_change_us=20)
    # Its description.
    Series.objects.filter(name="s").update(description="Nightly <b>load</b>")
    html, made = rendered(client, renders)
    assert ("Nightly &lt;b&gt;load&lt;/b&gt;" in html, made) == (True, 1)
    # A run arriving (pending, not yet analysed: the same generation).
    assert release_rows(html)["1.0"] == ["3", "0", "0"]
    s = Series.objects.get(name="s")
    Run.objects.create(series=s, release=Release.objects.get(series=s, version="1.0"),
                       sha256="0" * 64, file_name="late.json", size_bytes=1)
    html, made = rendered(client, renders)
    assert (release_rows(html)["1.0"], made) == (["3", "0", "1"], 1)
    # A release renamed in the admin: the figure, the selects and the table.
    release = Release.objects.get(series=s, version="1.3")
    release.version = "1.3.1"
    release.save()
    html, made = rendered(client, renders)
    assert made == 1
    assert "1.3.1" in {x for t in figure_of(html, "matrix-figure")["data"] for x in t["x"]}
    assert '<option value="1.3.1"' in html
    assert '<option value="1.3"' not in html
    # A note on a release, then an edit of its text (admin).
    note = ReleaseAnnotation.objects.create(release=release, text="switched to headless")
    html, made = rendered(client, renders)
    assert ("switched to headless" in json.dumps(figure_of(html, "matrix-figure")), made) \
        == (True, 1)
    ReleaseAnnotation.objects.filter(pk=note.pk).update(text="switched back")
    html, made = rendered(client, renders)
    assert ("switched back" in json.dumps(figure_of(html, "matrix-figure")), made) == (True, 1)
    # A new analysis (generation): a new release in the matrix.
    files = []
    for k, dur in enumerate([305, 300, 302]):
        path = tmp_path / f"1.4-{k}.json"
        path.write_text(json.dumps(renderer_events([("Paint", 0, dur)])))
        files.append(str(path))
    call_command("ingest_traces", "--series", "s", "--release", "1.4", *files,
                 stdout=io.StringIO())
    html, made = rendered(client, renders)
    assert made == 1
    assert "1.4" in {x for t in figure_of(html, "matrix-figure")["data"] for x in t["x"]}
    assert rendered(client, renders) == (html, 0)


def test_visitors_never_see_each_others_part_of_the_page(
    series: str, renders: list[Any], django_user_model: Any  # noqa: F811
) -> None:
    alice, bob = Client(enforce_csrf_checks=True), Client(enforce_csrf_checks=True)
    alice.force_login(django_user_model.objects.create_user("alice", password="x" * 12))
    bob.force_login(django_user_model.objects.create_user("bob", password="x" * 12))
    anonymous = Client()
    pages = {}
    for name, client in (("alice", alice), ("bob", bob), ("anonymous", anonymous)):
        pages[name] = rendered(client, renders)
    assert [made for _, made in pages.values()] == [1, 0, 0]  # one page kept for all three
    assert "Log out alice" in pages["alice"][0]
    assert "bob" not in pages["alice"][0]
    assert "Log out bob" in pages["bob"][0]
    assert "alice" not in pages["bob"][0]
    assert "Log out" not in pages["anonymous"][0]
    assert 'href="/accounts/login/?next=/series/s/"' in pages["anonymous"][0]
    assert "csrfmiddlewaretoken" not in pages["anonymous"][0]
    # What is kept holds nobody's name or token.
    kept = [value for key, (value, _) in memo._entries.items() if key[0] == "page"]
    assert kept
    assert not any("alice" in part or "bob" in part or "csrfmiddlewaretoken" in part
                            for parts in kept for part in parts)

    # Each signed-in page carries its own visitor's CSRF token: it logs that visitor out,
    # and is refused from the other one.
    def token(html: str) -> str:
        return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)  # type: ignore[union-attr]

    assert token(pages["alice"][0]) != token(pages["bob"][0])
    assert bob.post("/accounts/logout/", {"csrfmiddlewaretoken": token(pages["alice"][0])}
                    ).status_code == 403
    assert alice.post("/accounts/logout/", {"csrfmiddlewaretoken": token(pages["alice"][0])}
                      ).status_code in (200, 302)  # logged out (the page, or a redirect)
    html, made = rendered(alice, renders)
    assert (made, "Log out" in html, "alice" in html) == (0, False, False)


def test_a_kept_page_is_not_shown_when_browsing_needs_a_login(
    client: Client, series: str, renders: list[Any]  # noqa: F811
) -> None:
    assert rendered(client, renders)[1] == 1
    with override_settings(DEVIATIONS_LOGIN_REQUIRED=True):
        response = client.get("/series/s/")
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("off", [{"DEVIATIONS_PAGE_CACHE_MB": 0}, {"DEBUG": True}])
def test_without_the_cache_every_request_renders(
    client: Client, series: str, renders: list[Any], off: dict[str, Any]  # noqa: F811
) -> None:
    with override_settings(**off):
        first, second = rendered(client, renders), rendered(client, renders)
    assert (first[1], second[1]) == (1, 1)
    assert first[0] == second[0]
