"""Every form of every page, sent mutated (issue 23): never a 500.

The test signs in as a staff user on the demo's data, walks the site from the home page
the way a visitor would (links within the site, a few pages of each shape), reads every
``<form method="post">`` it finds with its fields as the page wrote them, and sends each
form again and again with one or two fields changed to hostile values (NUL characters,
empty or huge text, non-finite or huge numbers, markup, paths), fields left out or sent
twice, and, for file fields, seeded mutations of real trace, results, histogram and A/B
documents under hostile file names (``tests/ingest/mutations.py``). Both encodings a
browser uses are sent: ``multipart/form-data`` where the page says so, else
``application/x-www-form-urlencoded``, and multipart for every form as well (a client may
send either). Every answer must be below 500; what was stored stays consistent (every run
done or failed, each done run with its times).

The forms are found, not listed: a form added to any page is fuzzed by this test without
editing it. Runs in the PostgreSQL pass too, where NUL and lengths are enforced.
"""

from __future__ import annotations

import io
import random
import re
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urldefrag, urlencode, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from deviations.traces.models import Run, RunTimes
from tests.ingest.mutations import mutate
from tests.ingest.test_fuzz import _ab_seeds, _histogram_seeds, _results_seeds, _trace_seeds

pytestmark = pytest.mark.django_db(transaction=True)

# Pages of one shape (digits replaced) visited at most this often, and in all.
PER_SHAPE = 2
MAX_PAGES = 160
# Mutated sends per form, and per form with a file field (each may ingest and analyse).
SENDS = 40
FILE_SENDS = 30

# Links not followed: signing out, the admin (Django's own), the API's documents and
# downloads, and links that act on a GET by design (a signed unsubscribe link).
SKIP = re.compile(r"^/(accounts/logout|admin/|api/|static/|media/)|/unsubscribe/|/file$|"
                  r"\.(json|csv|gz)$|[?&](format|export)=")

HOSTILE = [
    "\x00", "a\x00b", "", " ", "x" * 5_000, "y" * 120_000, "-1", "0", "1e309", "-1e309",
    "nan", "inf", "99999999999999999999999999", "1.5", "<script>alert(1)</script>",
    "../../etc/passwd", "\u202eevil", "😀" * 300, "true", "null", "[]", "%00", "\t\n",
    "https://example.org/" + "a" * 3_000, "javascript:alert(1)", "a,b,,c", "2147483648",
]
FILE_NAMES = ["case.json", "../../escape.json", "a\x00b.json", "n" * 300 + ".json", "",
              "trace.json.gz", "é résultats.csv", "<b>x</b>.json", "CON", ".json"]


class _Forms(HTMLParser):
    """The links and POST forms of one page, each form's fields as the browser sends them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.forms: list[dict[str, Any]] = []
        self._form: dict[str, Any] | None = None
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "a" and a.get("href", "").startswith("/"):
            self.links.append(a["href"])
        elif tag == "form" and a.get("method", "get").lower() == "post":
            self._form = {"action": a.get("action", ""), "enctype": a.get("enctype", ""),
                          "fields": [], "files": []}
            self.forms.append(self._form)
        elif self._form is None or "name" not in a:
            return
        elif tag == "input":
            kind = a.get("type", "text").lower()
            if kind == "file":
                self._form["files"].append((a["name"], a.get("accept", "")))
            elif kind in ("checkbox", "radio"):
                if "checked" in a or kind == "radio":
                    self._form["fields"].append((a["name"], a.get("value", "on")))
            elif kind not in ("reset", "button", "image"):
                self._form["fields"].append((a["name"], a.get("value", "")))
        elif tag == "select":
            self._select = a["name"]
            self._form["fields"].append((a["name"], ""))
        elif tag == "option" and self._select is not None:
            fields = self._form["fields"]
            name, value = fields[-1]
            if name == self._select and (value == "" or "selected" in a):
                fields[-1] = (name, a.get("value", ""))
        elif tag == "textarea":
            self._textarea = a["name"]
            self._form["fields"].append((a["name"], "text"))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None
        elif tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None


def _shape(path: str) -> str:
    return re.sub(r"\d+", "N", urlsplit(path).path)


def _crawl(client: Any, start: list[str]) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    """(page, form) for each distinct form found, and the number of pages read."""
    queue, seen, shapes = list(start), set(), {}
    forms: dict[tuple[str, tuple[str, ...]], tuple[str, dict[str, Any]]] = {}
    pages = 0
    while queue and pages < MAX_PAGES:
        path = urldefrag(queue.pop(0))[0]
        shape = _shape(path)
        if path in seen or SKIP.search(path) or shapes.get(shape, 0) >= PER_SHAPE:
            continue
        seen.add(path)
        shapes[shape] = shapes.get(shape, 0) + 1
        response = client.get(path)
        assert response.status_code < 500, (path, response.content[:300])
        if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
            continue
        pages += 1
        parser = _Forms()
        parser.feed(response.content.decode())
        queue.extend(parser.links)
        for form in parser.forms:
            action = form["action"] or path
            key = (_shape(action), tuple(sorted(n for n, _ in form["fields"])),
                   tuple(n for n, _ in form["files"]))
            forms.setdefault(key, (path, {**form, "action": action}))
    return list(forms.values()), pages


def _seeds(action: str) -> list[bytes]:
    if "histogram" in action:
        return _histogram_seeds()
    if "/ab/" in action:
        return _ab_seeds()
    return _trace_seeds() + _results_seeds("csv") + _results_seeds("google-benchmark")


def _variant(form: dict[str, Any], rng: random.Random, seeds: list[bytes]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name, value in form["fields"]:
        data.setdefault(name, []).append(value)
    names = list(data)
    for _ in range(rng.randint(1, 2)):
        if not names:
            break
        name = rng.choice(names)
        roll = rng.random()
        if roll < 0.7:
            data[name] = [rng.choice(HOSTILE)]
        elif roll < 0.85:
            data.pop(name, None)
        else:
            data[name] = data.get(name, [""]) + [rng.choice(HOSTILE)]
    for name, _accept in form["files"]:
        count = rng.choice([1, 1, 1, 2, 0])
        files = []
        for _ in range(count):
            upload = io.BytesIO(mutate(rng.choice(seeds), rng) if rng.random() < 0.9 else b"")
            upload.name = rng.choice(FILE_NAMES)
            files.append(upload)
        if files:
            data[name] = files
    return data


def _more_than_the_demo(user: Any) -> None:
    """What the demo lacks, so that the pages holding the other forms exist: a canary with
    observations, an A/B run, an API token, an ignored function, notes to delete."""
    from deviations.alerts.models import Alert
    from deviations.alerts.services import ignore
    from deviations.core.models import ApiToken
    from deviations.experiments.ab.services import store_upload
    from deviations.experiments.canaries import services as canaries
    from deviations.histograms.annotations import annotate_build
    from deviations.histograms.models import HistogramSnapshot
    from deviations.traces.annotations import annotate_release
    from deviations.traces.models import Release

    canary = canaries.create_canary("fuzz-canary", bad="higher", user=user)
    canaries.receive_batch(canary.pk, "b1", "A", [1.0, 2.0, 3.0])
    canaries.receive_batch(canary.pk, "b2", "B", [1.5, 2.5, 3.5])
    store_upload(_ab_seeds()[0], ab_name="ab.csv", host="bench-1", user=user)
    ApiToken.issue(user, "CI")
    alert = Alert.objects.filter(function__isnull=False).first()
    assert alert is not None
    ignore("function", alert.group.family, alert.subject, user, function=alert.function)
    annotate_release(user, Release.objects.first(), "a note")
    snapshot = HistogramSnapshot.objects.select_related("probe").first()
    annotate_build(user, snapshot.probe, snapshot.build_id, "a note")


def test_every_form_of_every_page_answers_mutations_without_a_500(client: Any) -> None:
    call_command("demo", "--runs", "3", stdout=io.StringIO())
    user = get_user_model().objects.create_user("fuzz", "fuzz@example.org", "pw",
                                                is_staff=True, is_superuser=True)
    _more_than_the_demo(user)
    client.raise_request_exception = False
    # Signed out first: the sign-in and password-reset forms.
    anonymous, _ = _crawl(client, ["/accounts/login/", "/accounts/password_reset/"])
    client.force_login(user)
    forms, pages = _crawl(client, ["/", "/accounts/password_change/"])
    forms += anonymous
    # The site's forms, as found: uploads (traces, histograms, A/B), annotations, triage,
    # notes, subscriptions, canaries, a metric's direction, sign-in and account forms.
    assert pages > 30, pages
    assert len(forms) >= 12, [f["action"] for _, f in forms]
    assert any(f["files"] for _, f in forms), "no upload form was found"
    rng = random.Random(23)
    codes: dict[int, int] = {}
    # Forms that delete go last, so that what they remove is fuzzed first.
    forms.sort(key=lambda pf: "delete" in pf[1]["action"])
    for page, form in forms:
        # The anonymous forms are sent signed out; the others signed in (again: a form
        # sent before may have signed the user out).
        if (page, form) in anonymous:
            client.logout()
        else:
            client.force_login(user)
        seeds = _seeds(form["action"]) if form["files"] else []
        for i in range(FILE_SENDS if form["files"] else SENDS):
            data = _variant(form, rng, seeds)
            multipart = form["files"] or "multipart" in form["enctype"] or i % 2
            if multipart:
                response = client.post(form["action"], data)
            else:
                response = client.post(form["action"], urlencode(data, doseq=True),
                                       content_type="application/x-www-form-urlencoded")
            codes[response.status_code] = codes.get(response.status_code, 0) + 1
            assert response.status_code < 500, (
                page, form["action"], "multipart" if multipart else "urlencoded",
                {k: [str(v)[:80] for v in vs] for k, vs in data.items()},
                response.content[:400])

    assert set(codes) & {200, 302}, codes  # some variants were still valid
    assert set(codes) & {400, 404}, codes  # and the others refused
    runs = Run.objects.all()
    assert set(runs.values_list("status", flat=True)) <= {Run.DONE, Run.FAILED}
    assert RunTimes.objects.count() == runs.filter(status=Run.DONE).count()
