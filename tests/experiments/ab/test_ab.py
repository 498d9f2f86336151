"""A/B runs end to end: upload (page, API), result page, stored A/A floor, CLI; the
validation of issue 11: the four-number line on seed 002's example numbers."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from deviations.core.errors import UserError
from deviations.core.models import ApiToken
from deviations.experiments.ab import analysis, charts, selectors, services
from deviations.experiments.ab.models import AAFloorRecord, ABRun
from ingest.services import parse_ab_file

DATA = Path(__file__).parent / "data"
AB = DATA / "seed002_ab.csv"
AA = DATA / "seed002_aa.csv"
SEED_LINE = (
    "B is 0.93 ms faster at p99 (95% CI [-1.01, -0.85]; A/A floor ±0.07; n=15 slice pairs)"
)
# The same run through the default interval, the Hodges–Lehmann location's (issue 22).
HL_LINE = (
    "B is 0.92 ms faster at p99 (Hodges–Lehmann; 95% CI [-1.01, -0.85]; A/A floor ±0.07; "
    "n=15 slice pairs)"
)
EVIL = '<img src=x onerror="alert(1)">'


@pytest.fixture
def alice() -> Any:
    return get_user_model().objects.create_user("alice", "alice@example.org", "pw")


def _upload(path: Path, name: str | None = None) -> SimpleUploadedFile:
    return SimpleUploadedFile(name or path.name, path.read_bytes(), content_type="text/csv")


def _aa_csv(sd: float, seed: int, metric: str = "p99") -> bytes:
    rng = np.random.default_rng(seed)
    a = 12.4 + rng.normal(0, 0.5, 30)
    b = a + rng.normal(0, sd, 30)
    rows = ["slice,build,metric,value"]
    for i in range(30):
        rows += [f"{i},A,{metric},{a[i]:.5f}", f"{i},A2,{metric},{b[i]:.5f}"]
    return ("\n".join(rows) + "\n").encode()


# --- the validation: seed 002's numbers -----------------------------------------------


def test_cli_gives_seed_002_four_number_line():
    out = StringIO()
    call_command("ab_result", str(AB), "--aa", str(AA), "--interval", "mean", stdout=out)
    assert out.getvalue().splitlines()[0] == SEED_LINE


def test_cli_default_is_the_hodges_lehmann_interval():
    out = StringIO()
    call_command("ab_result", str(AB), "--aa", str(AA), stdout=out)
    assert out.getvalue().splitlines()[0] == HL_LINE


@pytest.mark.django_db
def test_upload_gives_seed_002_four_number_line(client, alice):
    client.force_login(alice)
    response = client.post("/ab/", {"ab": _upload(AB), "aa": _upload(AA), "host": "bench-1"})
    run = ABRun.objects.get(kind=ABRun.AB)
    assert response.status_code == 302
    assert response["Location"] == f"/ab/runs/{run.pk}/"
    c = run.result["comparisons"][0]
    assert c["line"] == HL_LINE
    assert c["verdict"] == "faster"
    assert c["estimand"] == "pseudo-median"
    assert c["mean"] == pytest.approx(-0.93, abs=0.005)  # seed 002's figure, kept beside it
    assert c["spikes"]["pairs"] == []
    assert c["spike_text"] is None
    page = client.get(f"/ab/runs/{run.pk}/").content.decode()
    assert HL_LINE in page
    assert "spike" not in page.split('id="result-lines"')[1].split("</ul>")[0]
    figure = json.loads(page.split('id="ab-fig-0-0" type="application/json">')[1]
                        .split("</script>")[0])
    assert figure["data"][0]["type"] == "bar"
    assert figure["data"][0]["y"] == pytest.approx(c["differences"])
    assert len(figure["layout"]["shapes"]) == 5  # CI band, mean, zero, ±floor


def test_cli_json_rows():
    out = StringIO()
    call_command("ab_result", str(AB), "--aa", str(AA), "--format", "json", "--interval", "mean",
                 stdout=out)
    rows = json.loads(out.getvalue())
    assert list(rows[0]) == ["metric", "n", "diff", "diff_lo", "diff_hi", "relative",
                             "sign_test_p", "aa_floor", "verdict"]
    r = rows[0]
    assert r["metric"] == "p99"
    assert r["n"] == 15
    assert r["diff"] == pytest.approx(-0.93)  # B − A
    assert r["diff_lo"] < r["diff"] < r["diff_hi"] < 0
    assert r["relative"] == pytest.approx(-0.93 / 12.38, rel=1e-3)
    assert r["sign_test_p"] == pytest.approx(2 * 0.5**15)
    assert r["aa_floor"] == pytest.approx(0.068, abs=0.001)
    assert r["verdict"] == "faster"


def test_cli_refuses_a_bad_file(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("slice,build,metric,value\n0,A,p99,x\n")
    with pytest.raises(CommandError, match="bad.csv: line 2: value 'x' is not a number"):
        call_command("ab_result", str(bad))


# --- several metrics, throughput and latency side by side, Holm ------------------------


def _two_metrics() -> bytes:
    rng = np.random.default_rng(3)
    rows = ["slice,build,metric,value,unit,direction"]
    for i in range(20):
        shared = rng.normal(0, 0.5)
        a, b = 12.4 + shared + rng.normal(0, 0.1), 11.5 + shared + rng.normal(0, 0.1)
        t = 4000 + rng.normal(0, 30)
        rows += [f"{i},A,p99,{a:.4f},ms,", f"{i},B,p99,{b:.4f},ms,",
                 f"{i},A,throughput,{t:.1f},rps,higher_is_better",
                 f"{i},B,throughput,{t + rng.normal(0, 5):.1f},rps,higher_is_better"]
    return ("\n".join(rows) + "\n").encode()


@pytest.mark.django_db
def test_several_metrics_side_by_side_with_holm(client, alice):
    stored = services.store_upload(_two_metrics(), ab_name="two.csv", user=alice)
    comps = stored.run.result["comparisons"]
    assert [c["metric"] for c in comps] == ["p99", "throughput"]
    p99, tput = comps
    assert p99["level"] == pytest.approx(0.975)  # Holm's first step: 1 - 0.05/2
    assert p99["verdict"] == "faster"
    assert tput["level"] == pytest.approx(0.95)  # second step: 1 - 0.05/1
    assert tput["verdict"] == "no difference"
    assert p99["holm_p"] == pytest.approx(min(1, 2 * p99["p_value"]))
    page = client.get(f"/ab/runs/{stored.run.pk}/").content.decode()
    assert "Holm" in page
    assert page.count('class="chart"') == 2
    assert "p99 (ms)" in page
    assert "throughput (rps)" in page


# --- the stored A/A floor --------------------------------------------------------------


@pytest.mark.django_db
def test_host_floor_is_stored_reused_and_flagged_when_it_moves(client, alice):
    first = services.store_upload(None, _aa_csv(0.05, 1), host="bench-1", aa_name="aa1.csv")
    assert first.run is None
    assert first.moved == []
    floor1 = AAFloorRecord.objects.get()
    assert not floor1.moved
    # an A/B run without an A/A run uses the host's stored floor
    ab = services.store_upload(AB.read_bytes(), host="bench-1", ab_name="ab.csv")
    c = ab.run.result["comparisons"][0]
    assert c["aa_floor"] == pytest.approx(floor1.floor)
    assert f"stored A/A run #{first.aa_run.pk}" in c["floor_source"]
    # a similar A/A run does not move it; a much noisier one does
    same = services.store_upload(None, _aa_csv(0.05, 2), host="bench-1", aa_name="aa2.csv")
    assert same.moved == []
    noisy = services.store_upload(None, _aa_csv(0.5, 3), host="bench-1", aa_name="aa3.csv")
    assert noisy.moved == ["p99"]
    latest = AAFloorRecord.objects.filter(host__name="bench-1").first()
    assert latest.moved
    assert latest.previous is not None
    page = client.get("/ab/hosts/bench-1/").content.decode()
    assert "moved from" in page
    # the same upload again is the same run
    again = services.store_upload(AB.read_bytes(), host="bench-1", ab_name="ab.csv")
    assert not again.created
    assert again.run.pk == ab.run.pk


def test_floor_moved_rule():
    rng = np.random.default_rng(8)
    before = rng.normal(0, 0.05, 30).tolist()
    assert analysis.floor_moved(None, before) is None
    assert not analysis.floor_moved(before, rng.normal(0, 0.05, 30).tolist())["moved"]
    noisier = analysis.floor_moved(before, rng.normal(0, 0.2, 30).tolist())
    assert noisier["moved"]
    assert noisier["spread_p"] < 0.01
    biased = analysis.floor_moved(before, rng.normal(0.1, 0.05, 30).tolist())
    assert biased["moved"]
    assert biased["shift_p"] < 0.01


# --- rare spikes (issue 22) -------------------------------------------------------------


def _spiky_csv() -> bytes:
    # 12 slice pairs; B's slice "s7" stalled (a GC pause): its p99 is 10x.
    rng = np.random.default_rng(22)
    host = 12.0 * np.exp(rng.normal(0, 0.1, 12))
    a = host * np.exp(rng.normal(0, 0.02, 12))
    b = 0.90 * host * np.exp(rng.normal(0, 0.02, 12))
    b[7] *= 10
    rows = ["slice,build,metric,value,unit"]
    for i in range(12):
        rows += [f"s{i},A,p99,{a[i]:.4f},ms", f"s{i},B,p99,{b[i]:.4f},ms"]
    return ("\n".join(rows) + "\n").encode()


@pytest.mark.django_db
def test_a_spike_is_flagged_by_slice_and_does_not_carry_the_verdict(client, alice):
    client.force_login(alice)
    response = client.post("/ab/", {"ab": SimpleUploadedFile("spiky.csv", _spiky_csv())})
    run = ABRun.objects.get(kind=ABRun.AB)
    assert response.status_code == 302
    c = run.result["comparisons"][0]
    assert [p["slice"] for p in c["spikes"]["pairs"]] == ["s7"]
    assert c["spikes"]["pairs"][0]["robust_sds"] > 10
    # B is 10 % faster in every clean pair; the stall makes the mean say B is much slower.
    assert c["verdict"] == "faster"
    assert c["diff_hi"] < 0 < c["mean"]
    assert c["spike_text"].startswith("a spike: slice pair s7: B − A = +")
    page = client.get(f"/ab/runs/{run.pk}/").content.decode()
    assert "Spike, p99 (B): a spike: slice pair s7: B − A" in page
    assert "<th>spikes</th><td class=\"num\">slice pair s7</td>" in page
    figure = charts.differences_figure(c)
    assert figure["data"][0]["marker"]["line"]["width"][7] == 3
    assert sum(figure["data"][0]["marker"]["line"]["width"]) == 3


def test_cli_prints_the_spike(tmp_path):
    out = StringIO()
    with_spike = tmp_path / "spiky.csv"
    with_spike.write_bytes(_spiky_csv())
    call_command("ab_result", str(with_spike), stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("B is ")
    assert " faster at p99 (Hodges–Lehmann; 95% CI [" in lines[0]
    assert any(line.strip().startswith("a spike: slice pair s7:") for line in lines)


def test_stored_runs_before_issue_22_still_render():
    """A result stored with the interval of the mean only (no estimand, spikes)."""
    c = analysis.analyse(parse_ab_file(AB, name=AB.name).to_dict(),
                         method="robust")["comparisons"][0]
    for key in ("estimand", "attained", "mean", "mean_lo", "mean_hi", "spikes", "spike_text"):
        c.pop(key)
    run = ABRun(result={"method": "robust", "comparisons": [c]})
    shown = selectors.by_build(run)[0][1][0]
    assert shown["mean_shown"] == c["diff"]
    assert shown["spike_pairs"] == []
    assert not selectors.uses_hodges_lehmann(run)
    assert charts.differences_figure(c)["data"][0]["marker"]["line"]["width"] == [0] * 15


# --- API ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_api_upload_needs_a_token_and_returns_the_result(client, alice):
    files = {"file": _upload(AB), "aa": _upload(AA), "host": "bench-2"}
    assert client.post("/api/ab/runs", files).status_code == 401
    token = ApiToken.issue(alice, "ci")[1]
    auth = {"Authorization": f"Bearer {token}"}
    response = client.post("/api/ab/runs", {"file": _upload(AB), "aa": _upload(AA),
                                            "host": "bench-2"}, headers=auth)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["run"]["comparisons"][0]["line"] == HL_LINE
    # The Hodges–Lehmann interval of seed 002's A/A run: its "A/A floor ±0.07" exactly (the
    # interval of the mean gave 0.068).
    assert body["aa_run"]["floors"]["p99"]["floor"] == pytest.approx(0.070, abs=0.001)
    again = client.post("/api/ab/runs", {"file": _upload(AB), "aa": _upload(AA),
                                         "host": "bench-2"}, headers=auth)
    assert again.status_code == 200
    assert again.json()["run"]["id"] == body["run"]["id"]
    bad = client.post("/api/ab/runs", {"file": SimpleUploadedFile("x.csv", b"slice,build\n")},
                      headers=auth)
    assert bad.status_code == 400
    assert bad.json()["detail"].startswith("x.csv: line 1: the header needs")
    assert client.get(f"/api/ab/runs/{body['run']['id']}").json()["name"] == "seed002_ab.csv"
    floors = client.get("/api/ab/hosts/bench-2/floors").json()
    assert floors[0]["metric"] == "p99"


# --- pages: login, errors, escaping, min change ------------------------------------------


@pytest.mark.django_db
def test_upload_page_needs_login_and_shows_errors(client, alice):
    assert "Log in" in client.get("/ab/").content.decode()
    assert client.post("/ab/", {"ab": _upload(AB)}).status_code == 302
    assert not ABRun.objects.exists()
    client.force_login(alice)
    page = client.post("/ab/", {"ab": SimpleUploadedFile("bad.csv", b"x\n")}).content.decode()
    assert "bad.csv: line 1: the header needs" in page
    page = client.post("/ab/", {"ab": _upload(AB), "host": "no spaces"}).content.decode()
    assert "host name" in page
    assert not ABRun.objects.exists()


@pytest.mark.django_db
def test_names_from_uploads_are_escaped(client):
    rows = ["slice,build,metric,value"]
    for i in range(5):
        rows += [f"{i},A,{EVIL},{10 + i}", f'{i},"{EVIL}B",{EVIL},{11 + i * 1.1}']
    stored = services.store_upload(("\n".join(rows)).encode(), ab_name=EVIL + ".csv")
    page = client.get(f"/ab/runs/{stored.run.pk}/").content.decode()
    assert EVIL not in page
    assert "&lt;img src=x" in page
    figure = charts.differences_figure(stored.run.result["comparisons"][0])
    assert "<img" not in figure["layout"]["title"]["text"]
    assert all("<img" not in s for s in figure["data"][0]["x"])
    assert EVIL not in client.get("/ab/").content.decode()


@pytest.mark.django_db
def test_how_many_more_samples(client, alice):
    stored = services.store_upload(AB.read_bytes(), ab_name="ab.csv", min_change_pct=1.0)
    prec = stored.run.result["comparisons"][0]["precision"]
    assert not prec["narrow_enough"]
    assert prec["excludes_zero"]
    assert prec["more_needed"] > 0
    assert "already excludes 0" in prec["sentence"]
    client.force_login(alice)
    client.post(f"/ab/runs/{stored.run.pk}/min-change/", {"min_change": "20"})
    run = ABRun.objects.get(pk=stored.run.pk)
    assert run.min_change_pct == 20
    prec = run.result["comparisons"][0]["precision"]
    # narrow, but seed 002's 15 pairs are fewer than MIN_N = 30 (docs/statistics.md, §3.11)
    assert not prec["narrow_enough"]
    assert prec["width"] <= prec["min_change"]
    assert prec["more_needed"] == 15
    assert "narrow, but from only 15 slice pairs" in client.get(
        f"/ab/runs/{run.pk}/").content.decode()


@pytest.mark.django_db
def test_a_bad_aa_file_stores_nothing():
    with pytest.raises(UserError, match="aa.csv: line 2"):
        services.store_upload(AB.read_bytes(), b"slice,build,metric,value\n0,A,p99,x\n",
                              host="bench-3", ab_name="ab.csv", aa_name="aa.csv")
    assert not ABRun.objects.exists()
    assert not AAFloorRecord.objects.exists()
    with pytest.raises(UserError, match="name its host"):
        services.store_upload(None, AA.read_bytes(), aa_name="aa.csv")


def test_json_safe():
    assert analysis.json_safe({"a": [1.0, float("nan")], "b": (float("inf"), "x")}) == {
        "a": [1.0, None], "b": [None, "x"]}


@pytest.mark.django_db
def test_how_many_more_uses_the_geometric_mean_on_a_positive_metric(client):
    """Seed 002's p99s are all > 0 and the smallest change is a percentage: "how many more
    slice pairs?" is on the change of the geometric mean (log-ratios), the numbers those of
    ``precision_ratio_paired`` (issue 22 part 4; docs/statistics.md §3.11)."""
    from deviations.stats.paired import precision_ratio_paired

    stored = services.store_upload(AB.read_bytes(), ab_name="ab.csv", min_change_pct=1.0)
    c = stored.run.result["comparisons"][0]
    prec = c["precision"]
    assert prec["estimand"] == "change of the geometric mean"
    assert prec["scale"] == "log"
    assert prec["unit"] == "%"
    direct = precision_ratio_paired(c["a"], c["b"], 1.0)
    for key in ("lo", "hi", "width", "min_change"):
        assert prec[key] == pytest.approx(getattr(direct, key), rel=1e-12)
    assert prec["more_needed"] == direct.more_needed
    assert prec["sentence"] == direct.sentence("%", "slice pairs")
    page = client.get(f"/ab/runs/{stored.run.pk}/").content.decode()
    assert "interval of the change of the geometric mean" in page
    api = client.get(f"/api/ab/runs/{stored.run.pk}").json()["comparisons"][0]["precision"]
    assert api["estimand"] == "change of the geometric mean"
    assert api["more_needed"] == direct.more_needed
    out = StringIO()
    call_command("ab_result", str(AB), "--min-change", "1", stdout=out)
    assert "interval of the change of the geometric mean" in out.getvalue()


@pytest.mark.django_db
def test_how_many_more_keeps_the_mean_when_a_value_is_not_positive(client):
    """A metric with a value <= 0 (here a score that can be 0) has no log scale: the
    difference of means against the percentage of A's mean, as ``precision_paired``."""
    from deviations.stats.paired import precision_paired

    rng = np.random.default_rng(3)
    rows = ["slice,build,metric,value"]
    for i in range(12):
        a = 0.0 if i == 4 else round(float(rng.normal(10, 2)), 3)
        rows += [f"{i},A,score,{a}", f"{i},B,score,{round(float(rng.normal(10.5, 2)), 3)}"]
    stored = services.store_upload("\n".join(rows).encode(), ab_name="zero.csv",
                                   min_change_pct=5.0)
    c = stored.run.result["comparisons"][0]
    prec = c["precision"]
    assert prec["estimand"] == "difference of means"
    assert prec["scale"] == "linear"
    a = np.asarray(c["a"])
    direct = precision_paired(np.asarray(c["b"]) - a, abs(a.mean()) * 5.0 / 100)
    for key in ("lo", "hi", "width", "min_change"):
        assert prec[key] == pytest.approx(getattr(direct, key), rel=1e-12)
    assert prec["more_needed"] == direct.more_needed
    page = client.get(f"/ab/runs/{stored.run.pk}/").content.decode()
    assert "interval of the difference of means" in page
