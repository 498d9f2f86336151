"""Every page at a phone's width (issue 23: 390 px wide, every page was 749–869 px and the
navigation did not wrap): the page itself never scrolls sideways; wide tables and the
matrix scroll inside their own frame."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from deviations.alerts.models import Alert, AlertGroup
from deviations.alerts.services import confirmation_token, unsubscribe_token
from deviations.experiments.ab.services import store_upload
from deviations.experiments.canaries import services as canaries
from deviations.histograms.detection import detect
from deviations.histograms.models import Probe
from deviations.histograms.store import store_histogram_file
from deviations.management.commands.demo import SERIES
from deviations.traces import demo
from deviations.traces.models import Function, Run
from tests.browser_checks import layout_problems
from tests.conftest import ARTIFACTS, plain_histogram
from tests.ingest.test_fuzz import _ab_seeds

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTH, HEIGHT = 390, 844
_WIDE = """() => ({scroll: document.documentElement.scrollWidth,
                   inner: document.documentElement.clientWidth,
                   widest: [...document.body.querySelectorAll('*')]
                     .filter(e => e.getBoundingClientRect().right > innerWidth + 2)
                     .filter(e => !e.closest('table.grid, .chart, .js-plotly-plot, pre'))
                     .slice(0, 5).map(e => e.tagName + '#' + e.id + '.' + e.className)})"""


def test_every_page_fits_a_phone(page: Any) -> None:
    call_command("demo", "--runs", "5", stdout=io.StringIO())
    paint = Function.objects.get(series__name=SERIES, name="Paint")
    run = Run.objects.filter(status=Run.DONE).order_by("id").first()
    group = AlertGroup.objects.order_by("id").first()
    probe = Probe.objects.order_by("id").first()
    canary = canaries.create_canary("phone", bad="higher", unit="ms")
    rng = np.random.default_rng(2)
    canaries.receive_batch(canary.pk, "a", "A", rng.normal(100, 10, 300).tolist())
    canaries.receive_batch(canary.pk, "b", "B", rng.normal(100, 10, 300).tolist())
    get_user_model().objects.create_user("phone", password="phone-pw")
    # A probe beyond the demo's: 60 buckets, 40 builds with long ids, a change in them.
    wide_probe = "A_PROBE_WITH_A_LONG_NAME_OF_MANY_WORDS_AS_TELEMETRY_HAS_THEM_MS"
    shape = rng.gamma(2.0, 5.0, 60)
    store_histogram_file(json.dumps([
        plain_histogram(wide_probe, f"2026010{b // 10}{b % 10:02d}0000{b:04d}",
                        rng.poisson(shape * (1.6 if b >= 30 else 1.0) * 400))
        for b in range(40)]).encode(), display_name="wide.json")
    wide_probe_id = Probe.objects.get(name=wide_probe).pk
    detect([wide_probe_id])
    ab_run = store_upload(_ab_seeds()[0], ab_name="ab.csv", host="bench-1").run
    batch = uuid.uuid4()
    Run.objects.filter(pk=run.pk).update(upload_batch=batch)
    unsubscribe = unsubscribe_token("someone@example.com", "histogram", "A_PROBE*")
    confirm = confirmation_token("someone@example.com", "histogram", "A_PROBE*", False)
    urls = [
        "/", f"/series/{SERIES}/", f"/series/{SERIES}/functions/{paint.pk}/?runs=1",
        f"/series/{SERIES}/releases/{demo.RELEASES[8]}/",
        f"/series/{SERIES}/compare/?base={demo.RELEASES[7]}&new={demo.RELEASES[8]}",
        f"/runs/{run.pk}/", "/alerts/", f"/alerts/groups/{group.pk}/", "/histograms/",
        f"/histograms/probes/{probe.pk}/" if probe else "/histograms/", "/canaries/",
        f"/histograms/probes/{wide_probe_id}/", "/histograms/changes/",
        "/alerts/ignored/", f"/canaries/{canary.pk}/", "/ab/", f"/ab/runs/{ab_run.pk}/",
        "/ab/hosts/bench-1/", "/series/mylib-bench.linux/", "/accounts/login/",
        "/series/nope/", f"/upload/{batch}/",
        f"/series/{SERIES}/compare/precision/?base={demo.RELEASES[7]}&new={demo.RELEASES[8]}"
        "&function=Paint", "/api/docs", "/accounts/password_reset/",
        f"/histograms/confirm/{confirm}/", f"/histograms/unsubscribe/{unsubscribe}/",
    ]
    paint_alert = Alert.objects.filter(subject="Paint").first()
    # Signed in: the pages only a user sees, and the owners' forms on the others.
    signed_in = ["/upload/", "/canaries/new/", "/histograms/subscriptions/",
                 "/histograms/upload/", "/accounts/password_change/",
                 "/hooks/", "/hooks/bugs/", f"/alerts/{paint_alert.pk}/",
                 f"/series/{SERIES}/settings/", "/tokens/", f"/alerts/groups/{group.pk}/",
                 f"/series/{SERIES}/compare/?base={demo.RELEASES[7]}&new={demo.RELEASES[8]}"
                 "&calls=ThreadControllerImpl%3A%3ARunTask"]
    get_user_model().objects.create_superuser("sheriff", password="sheriff-pw")
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    ARTIFACTS.mkdir(exist_ok=True)
    wide, drawn, login = {}, {}, []
    for url in [*urls, "SIGN IN", *signed_in]:
        if url == "SIGN IN":
            page.goto("/accounts/login/")
            page.fill("input[name=username]", "sheriff")
            page.fill("input[name=password]", "sheriff-pw")
            page.click("form button[type=submit], form input[type=submit]")
            page.wait_for_load_state("load")
            continue
        page.goto(url)
        page.wait_for_load_state("load")
        page.wait_for_timeout(200)
        if "/accounts/login/" in page.url and not url.startswith("/accounts/login/"):
            login.append(url)  # measured the login form, not the page
        got = page.evaluate(_WIDE)
        name = url.strip("/").replace("/", "_").replace("?", "_")[:60] or "home"
        page.screenshot(path=str(ARTIFACTS / f"phone-{name}.png"), full_page=True)
        if got["scroll"] > got["inner"] + 2:
            wide[url] = got
        drawn[url] = layout_problems(page)
    assert login == []
    assert wide == {}
    problems = [f"{u}: {p}" for u, ps in drawn.items() for p in ps]
    assert problems == [], "\n".join(problems)


def test_no_template_comment_spans_lines() -> None:
    """Django's {# #} comments end on their line: one spanning two lines is printed on
    the page (it was, on the matrix page)."""
    from tests.conftest import ROOT

    broken = [f"{p.relative_to(ROOT)}:{i}" for p in (ROOT / "templates").rglob("*.html")
              for i, line in enumerate(p.read_text().splitlines(), 1)
              if "{#" in line and "#}" not in line.split("{#", 1)[1]]
    assert broken == []
