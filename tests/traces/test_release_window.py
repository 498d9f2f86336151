"""The matrix's window of releases (issue 24): pages read and send what they show, whatever
the length of the history."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client

from deviations.core import memo
from deviations.traces import store
from deviations.traces.matrix import WINDOW, MatrixQuery, _bounds
from deviations.traces.models import Function
from tests.benchmarks.pages import StoredFiller

pytestmark = pytest.mark.django_db

FUNCTIONS = 40
SHORT, LONG = 45, 90  # releases: both longer than the window


@pytest.fixture
def histories(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Two stored analyses that differ only in their length (the same seed): blocks of 8
    rows, so that a page of a few functions has blocks to leave out."""
    monkeypatch.setattr(store, "BLOCK_ROWS", 8)
    for name, releases in (("short", SHORT), ("long", LONG)):
        StoredFiller(FUNCTIONS, releases, 3, 7, ("self", "total"), name=name).fill(2)
    memo.forget()
    return {"short": SHORT, "long": LONG}


def cells(client: Client, url: str) -> list[dict[str, Any]]:
    response = client.get(url)
    assert response.status_code == 200
    return json.loads(response.content)  # type: ignore[no-any-return]


def pairs(found: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted({(c["from_release"], c["to_release"]) for c in found},
                  key=lambda p: int(p[1].split(".")[1]))


def reads(client: Client, url: str) -> dict[str, int]:
    """Blocks and bytes of the stored analysis a request reads, nothing kept before."""
    memo.forget()
    store.reset_reads()
    assert client.get(url).status_code == 200
    return dict(store.READS)


def test_the_matrix_shows_the_newest_releases_and_says_so(client: Client,
                                                          histories: dict[str, int]) -> None:
    shown = pairs(cells(client, "/series/long/matrix.json"))
    assert len(shown) == WINDOW - 1
    assert shown[-1][1] == f"1.{LONG - 1}"
    assert shown[0][0] == f"1.{LONG - WINDOW}"
    html = client.get("/series/long/").content.decode()
    assert f"the newest {WINDOW} of the {LONG} analysed" in html
    assert 'id="window-older"' in html
    assert 'id="window-newer"' not in html


def test_the_json_grows_with_the_window_not_the_history(client: Client,
                                                        histories: dict[str, int]) -> None:
    short = client.get("/series/short/matrix.json").content
    long = client.get("/series/long/matrix.json").content
    assert len(json.loads(short)) == len(json.loads(long)) == (WINDOW - 1) * FUNCTIONS
    assert abs(len(short) - len(long)) < 0.02 * len(long)
    # Everything when asked for explicitly (exports).
    assert len(pairs(cells(client, "/series/long/matrix.json?window=all"))) == LONG - 1
    assert len(pairs(cells(client, "/series/long/?format=json&window=all"))) == LONG - 1


def test_older_newer_zoom_and_permalinks(client: Client, histories: dict[str, int]) -> None:
    html = client.get("/series/long/").content.decode()
    older = re.search(r'href="\?([^"]*)" id="window-older"', html)
    assert older is not None
    link = older.group(1).replace("&amp;", "&")
    assert link == f"last=1.{LONG - WINDOW}"  # the older window shares its first release
    shown = pairs(cells(client, f"/series/long/matrix.json?{link}"))
    assert shown[-1][1] == f"1.{LONG - WINDOW}"
    assert len(shown) == WINDOW - 1
    html = client.get(f"/series/long/?{link}").content.decode()
    assert "release-window" in html
    assert 'id="window-newer"' in html
    assert 'id="window-older"' in html
    assert f'href="/series/long/?{link}" id="permalink"' in html.replace("&amp;", "&")
    # Zoom: ten releases; the form keeps the window for its next submit.
    html = client.get("/series/long/?window=10").content.decode()
    assert '<input type="hidden" name="window" value="10">' in html
    assert len(pairs(cells(client, "/series/long/matrix.json?window=10"))) == 9
    # An older window reads the releases after it that can mark its digressions (12), and
    # ranks its functions by the deviation records of its own pairs.
    found = reads(client, f"/series/long/matrix.json?{link}")
    assert found["blocks"] == (WINDOW + 12) * 5
    assert found["records"] == (WINDOW - 1) * 5
    # An explicit From/to range is shown as asked, however wide.
    shown = pairs(cells(client, "/series/long/matrix.json?first=1.3&last=1.70"))
    assert (shown[0][0], shown[-1][1], len(shown)) == ("1.3", "1.70", 67)


@pytest.mark.parametrize(("first", "last", "window", "expected"), [
    (None, None, 30, (70, 100)),  # the newest
    (None, 50, 30, (21, 51)),  # ending at to
    (10, None, 30, (10, 40)),  # starting at From
    (95, None, 30, (95, 100)),  # ... cut at the end
    (None, 5, 30, (0, 6)),  # ... and at the start
    (10, 80, 30, (10, 81)),  # both: as asked
    (80, 10, 30, (70, 100)),  # in the wrong order: the newest (the page says why)
    (None, None, 0, (0, 100)),  # all
])
def test_window_bounds(first: int | None, last: int | None, window: int,
                       expected: tuple[int, int]) -> None:
    positions = {f"v{c}": c for c in range(100)}
    query = MatrixQuery(first=f"v{first}" if first is not None else "",
                        last=f"v{last}" if last is not None else "", window=window)
    assert _bounds(query, positions, 100) == expected


def test_window_parameter() -> None:
    assert MatrixQuery.from_params({}).window == WINDOW
    assert MatrixQuery.from_params({"window": "all"}).window == 0
    assert MatrixQuery.from_params({"window": "1"}).window == 2
    assert MatrixQuery.from_params({"window": "x"}).window == WINDOW
    assert MatrixQuery(window=0).params() == "window=all"
    assert MatrixQuery().params() == ""


@pytest.mark.parametrize("page", ["home", "matrix", "json", "function", "runs", "release"])
def test_pages_read_the_same_whatever_the_history(client: Client, histories: dict[str, int],
                                                   page: str) -> None:
    """Each page reads as many blocks and bytes of a 90-release history as of a 45-release
    one: its window of releases (or its pair), its rows (a function page cuts its one row
    out of each block in the database)."""
    found = {}
    for name in histories:
        fid = Function.objects.filter(series__name=name).order_by("id").values_list(
            "id", flat=True)[FUNCTIONS // 2]
        newest = f"1.{histories[name] - 1}"
        url = {"home": "/", "matrix": f"/series/{name}/",
               "json": f"/series/{name}/matrix.json",
               "function": f"/series/{name}/functions/{fid}/",
               "runs": f"/series/{name}/functions/{fid}/?runs=1",
               "release": f"/series/{name}/releases/{newest}/"}[page]
        found[name] = reads(client, url)
    # The deviation records hold the window's deviations: as many bytes as it has.
    record_bytes = {name: got.pop("record_bytes") for name, got in found.items()}
    assert found["short"] == found["long"]
    assert max(record_bytes.values()) <= (WINDOW - 1) * FUNCTIONS * store.DEVIATION.itemsize
    blocks_per_column = -(-FUNCTIONS // 8)
    if page in ("matrix", "json"):  # the newest window (no release after it), every row
        assert found["long"]["blocks"] == WINDOW * blocks_per_column
        assert found["long"]["records"] == (WINDOW - 1) * blocks_per_column
    if page in ("function", "runs"):  # one block a column, a few bytes of each field
        assert found["long"]["bytes"] <= found["long"]["blocks"] * len(store.BLOCK_FIELDS) * 8
    if page == "home":  # the newest pair of each of the two series
        assert found["long"]["blocks"] == 2 * 2 * blocks_per_column


def test_the_compare_page_shows_a_page_of_functions(client: Client,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    StoredFiller(150, 4, 3, 7, ("self",), name="wide").fill(2)
    url = "/series/wide/compare/?base=1.2&new=1.3"
    html = client.get(url).content.decode()
    assert html.count('class="how-many"') == 100
    assert "150 functions shown; page 1 of 2" in html
    assert 'id="compare-next"' in html
    html = client.get(url + "&page=2").content.decode()
    assert html.count('class="how-many"') == 50
    assert len(json.loads(client.get(url + "&format=json").content)) == 150


@pytest.mark.parametrize("rule", ["shifts", "paper"])
def test_a_window_shows_what_the_whole_matrix_shows_there(
        client: Client, histories: dict[str, int], rule: str) -> None:
    """The cells of a window equal the whole matrix's cells of the same pairs: verdicts,
    digressions (marked with the releases after the window), provisional marks, culprit
    ranges, and the releases each comparison reached."""
    every = cells(client, f"/series/long/matrix.json?window=all&per=100&rule={rule}")
    starts = [int(c["from_release"].split(".")[1]) for c in every if c["digression"]]
    assert starts  # something to get right at the edges
    # A window ending two releases after a digression starts: its return is after the
    # window, in the releases read beyond it.
    edge = f"last=1.{starts[0] + 2}"
    for window in (edge, "last=1.60", "last=1.88&window=10", "first=1.0&window=15", ""):
        shown = cells(client, f"/series/long/matrix.json?{window}&per=100&rule={rule}")
        inside = {p for p in pairs(shown)}
        expected = [c for c in every if (c["from_release"], c["to_release"]) in inside]
        key = lambda c: (c["function"], int(c["to_release"].split(".")[1]))  # noqa: E731
        assert sorted(shown, key=key) == sorted(expected, key=key), window
    # The function page's rows likewise.
    fid = Function.objects.filter(series__name="long").order_by("id")[3].pk
    rows = json.loads(client.get(f"/series/long/functions/{fid}/?format=json&last=1.60"
                                 f"&rule={rule}").content)
    whole = {r["release"]: r for r in json.loads(client.get(
        f"/series/long/functions/{fid}/?format=json&window=all&rule={rule}").content)}
    assert len(rows) == WINDOW
    # The pair ending at the window's first release begins before it (the older window's
    # last pair): that row holds the release alone.
    assert rows[0]["previous"] is None
    assert rows[0]["median"] == whole[rows[0]["release"]]["median"]
    assert rows[1:] == [whole[r["release"]] for r in rows[1:]]
