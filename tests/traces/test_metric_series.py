"""Metric series (issue 20): CI benchmark results judged and shown like trace series.

A history goes in by the CLI, the API or the upload page; the planted change is flagged
on its release and nothing else; a metric whose higher values are better is a regression
when it falls; a user's choice of direction applies without a new analysis; traces and
results never mix in one series; pages, compare view and alerts speak the metric's unit.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from deviations.alerts.models import Alert
from deviations.core.models import ApiToken
from deviations.stats.releases import IMPROVEMENT, REGRESSION, oriented, shift_verdicts
from deviations.traces import analysis, selectors
from deviations.traces.models import Function, Metric, Run, Series
from deviations.traces.notify import record_series_alerts
from deviations.traces.uploads.results import set_metric, store_results
from deviations.traces.uploads.runs import IngestError, get_release
from ingest.services import ResultsError

pytestmark = pytest.mark.django_db

RELEASES = [f"1.{r}" for r in range(1, 11)]
PLANTED = "1.6"  # the first release where "parse" is 30% slower and "ops" 30% lower


def history_csv(seed: int = 7, replicates: int = 5, *, ops_drop: bool = True) -> bytes:
    """Ten releases of three metrics (lognormal noise, 3%): ``parse`` (ms) +30% and
    ``ops`` (ops/s, higher is better) −30% from ``PLANTED`` on; ``render`` unchanged."""
    rng = np.random.default_rng(seed)
    rows = ["release,metric,value,unit"]
    for k, release in enumerate(RELEASES):
        after = k >= RELEASES.index(PLANTED)
        for _ in range(replicates):
            noise = rng.lognormal(0, 0.03, 3)
            rows.append(f"{release},parse,{100 * noise[0] * (1.3 if after else 1):.4f},ms")
            rows.append(f"{release},render,{50 * noise[1]:.4f},ms")
            drop = 0.7 if after and ops_drop else 1.0
            rows.append(f"{release},ops,{1000 * noise[2] * drop:.4f},ops/s")
    return ("\n".join(rows) + "\n").encode()


def flagged(series: Series, rule: str = "shifts") -> dict[tuple[str, str], str]:
    """{(metric, later release): verdict} of the deviations the pages show."""
    found = selectors.stored_analysis(series, "self", "median", rule)
    assert found is not None
    names = selectors.function_names(series)
    versions = selectors.release_versions(found["release_ids"])
    out = {}
    for f, p in zip(*np.nonzero(np.isin(found["verdict"], [REGRESSION, IMPROVEMENT])),
                    strict=True):
        out[(names[int(found["function_ids"][f])], versions[p + 1])] = (
            "regression" if found["verdict"][f, p] == REGRESSION else "improvement")
    return out


def test_cli_history_flags_the_planted_change_only(tmp_path: Path) -> None:
    path = tmp_path / "history.csv"
    path.write_bytes(history_csv())
    out = io.StringIO()
    call_command("ingest_results", "--series", "bench", str(path), stdout=out)
    assert "analysis:" in out.getvalue()
    series = Series.objects.get(name="bench")
    assert series.kind == Series.METRICS
    assert Run.objects.filter(series=series).count() == len(RELEASES)
    assert set(Run.objects.values_list("samples", flat=True)) == {5}
    metrics = {m.function.name: m for m in Metric.objects.select_related("function")}
    assert metrics["ops"].direction == "higher_is_better"  # from its unit
    assert metrics["parse"].direction == "lower_is_better"
    # ops fell 30%: worse for a throughput, a regression.
    assert flagged(series) == {("parse", PLANTED): "regression", ("ops", PLANTED): "regression"}
    # The same file again stores nothing twice.
    again = io.StringIO()
    call_command("ingest_results", "--series", "bench", str(path), stdout=again)
    assert again.getvalue().count("skipped (already stored)") == len(RELEASES)
    assert Run.objects.filter(series=series).count() == len(RELEASES)


def test_a_users_direction_applies_without_a_new_analysis() -> None:
    store_results("bench", history_csv(), "h.csv")
    series = Series.objects.get(name="bench")
    analysis.analyse_series(series.pk)
    generation = selectors.analysis_generation(series)
    set_metric(series, "ops", direction="lower_is_better")
    assert selectors.analysis_generation(series) == generation
    assert flagged(series)[("ops", PLANTED)] == "improvement"
    # A later upload saying nothing about direction keeps the user's choice.
    store_results("bench", b"release,metric,value,unit\n1.11,ops,700,ops/s\n", "more.csv")
    assert Metric.objects.get(function__name="ops").source == "user"


def test_oriented_equals_deciding_with_the_direction() -> None:
    rng = np.random.default_rng(3)
    x = rng.lognormal(0, 0.05, (6, 12, 4))
    x[:3, 6:] *= 1.4
    x[3:, 6:] *= 0.7
    low = shift_verdicts(x).verdict
    high = shift_verdicts(x, direction="higher_is_better").verdict
    assert np.any(low == REGRESSION)
    assert np.any(low == IMPROVEMENT)
    np.testing.assert_array_equal(oriented(low, np.ones(6, dtype=bool)), high)
    np.testing.assert_array_equal(oriented(low, np.zeros(6, dtype=bool)), low)


def test_replicates_and_missing_values_incremental_equals_full() -> None:
    """Metrics with different replicate counts and a metric added later: an analysis
    updated release by release stores what a full one does."""
    rng = np.random.default_rng(11)
    series_name = "inc"
    for k in range(9):
        rows = ["release,metric,value,unit"]
        for rep in range(4):
            rows.append(f"2.{k},a,{10 * rng.lognormal(0, 0.05):.5f},ns")
            if rep < 2:
                rows.append(f"2.{k},b,{20 * rng.lognormal(0, 0.05):.5f},ns")
            if k >= 4:
                rows.append(f"2.{k},late,{5 * rng.lognormal(0, 0.05):.5f},ns")
        store_results(series_name, ("\n".join(rows) + "\n").encode(), f"r{k}.csv",
                      analyse=False)
        series = Series.objects.get(name=series_name)
        analysis.analyse_series(series.pk)
    incremental = analysis.read_analysis(series, "self", "median", "shifts")
    analysis.analyse_series(series.pk, force=True)
    full = analysis.read_analysis(series, "self", "median", "shifts")
    assert incremental is not None
    assert full is not None
    assert set(incremental) == set(full)
    for key, value in full.items():
        np.testing.assert_array_equal(incremental[key], value, err_msg=key)
    # The runs counted per release are the replicates: 4 of a, so 4 samples a release.
    assert full["run_counts"].tolist() == [4] * 9
    stats = {r["function"]: r for r in selectors.stats_rows(series, "self")
             if r["release"] == "2.5"}
    assert stats["b"]["n"] == 2
    assert stats["a"]["n"] == 4
    assert stats["late"]["n"] == 4


def test_units_convert_or_are_refused() -> None:
    store_results("u", b"release,metric,value,unit\n1,t,2,ms\n1,t,2.2,ms\n", "a.csv")
    store_results("u", b"release,metric,value,unit\n2,t,2100,us\n", "b.csv")
    series = Series.objects.get(name="u")
    ids, self_us, *_ = selectors.release_times(series.releases.get(version="2"))
    assert self_us[0].tolist() == [2.1]  # stored in ms, the metric's unit
    with pytest.raises(IngestError, match="another kind"):
        store_results("u", b"release,metric,value,unit\n3,t,2000,bytes\n", "c.csv")
    assert not series.releases.filter(version="3").exists()  # nothing half-stored


def test_traces_and_results_never_mix(write_trace: Any, simple_events: Any) -> None:
    get_release("traces", "1")
    Run.objects.create(series=Series.objects.get(name="traces"),
                       release=Series.objects.get(name="traces").releases.get(),
                       sha256="0" * 64, file_name="t.json", size_bytes=1)
    with pytest.raises(IngestError, match="trace files"):
        store_results("traces", b"release,metric,value\n2,x,1\n", "r.csv")
    store_results("bench", b"release,metric,value\n1,x,1\n", "r.csv")
    with pytest.raises(IngestError, match="benchmark results"):
        get_release("bench", "2")


def test_bad_files_store_nothing(tmp_path: Path) -> None:
    for data, reason in [(b"", "empty"), (b"release,metric,value\n1,x,nan\n", ""),
                         (b"{not json", "")]:
        with pytest.raises((ResultsError, IngestError)) as info:
            store_results("bad", data, "broken.json", release="1")
        assert info.value.message.startswith("broken.json: ")
        assert reason in info.value.message
    assert not Series.objects.filter(name="bad").exists()
    path = tmp_path / "broken.csv"
    path.write_bytes(b"release,metric,value\n1,x,oops\n")
    with pytest.raises(CommandError, match="1 of 1"):
        call_command("ingest_results", "--series", "bad", str(path), stdout=io.StringIO())


@pytest.fixture
def token() -> str:
    user = get_user_model().objects.create_user("ci", password="x")
    return ApiToken.issue(user, "CI")[1]


def _post(client: Client, committed: Any, token: str, data: bytes, name: str, **fields: Any
          ) -> Any:
    upload = io.BytesIO(data)
    upload.name = name
    return committed(client.post, "/api/series/bench/results", {"file": upload, **fields},
                     headers={"Authorization": f"Bearer {token}"})


def test_api_upload_release_by_release(client: Client, committed: Any, token: str) -> None:
    lines = history_csv().decode().splitlines()

    def csv_of(release: str) -> bytes:
        return "\n".join([lines[0]] + [line for line in lines[1:]
                                       if line.startswith(release + ",")]).encode()

    for release in RELEASES:
        body = "metric,value,unit\n" + "\n".join(
            ",".join(line.split(",")[1:]) for line in lines[1:]
            if line.startswith(release + ","))
        response = _post(client, committed, token, body.encode(), f"{release}.csv",
                         release=release)
        assert response.status_code == 400  # the CSV needs its release column
        response = _post(client, committed, token, csv_of(release), f"{release}.csv")
        assert response.status_code == 201, response.content
        assert response.json()["runs"][0]["samples"] == 5
    series = Series.objects.get(name="bench")
    assert flagged(series) == {("parse", PLANTED): "regression", ("ops", PLANTED): "regression"}
    again = _post(client, committed, token, csv_of(RELEASES[0]), "again.csv")
    assert again.status_code == 200  # the same bytes: stored once
    assert [r["duplicate"] for r in again.json()["runs"]] == [True]
    bad = _post(client, committed, token, b"release,metric,value\n1.1,x,1e400\n", "bad.csv")
    assert bad.status_code == 400
    assert bad.json()["detail"].startswith("bad.csv: ")
    # Alerts speak the metric's unit and say which way is better.
    record_series_alerts(series.pk)
    alerts = {a.subject: a for a in Alert.objects.filter(series=series)}
    assert set(alerts) == {"parse", "ops"}
    assert alerts["parse"].unit == "ms"
    assert alerts["ops"].unit == "ops/s"
    assert alerts["ops"].direction == Alert.REGRESSION
    assert "fell 30%" in alerts["ops"].explanation or "fell 29%" in alerts["ops"].explanation
    assert "time" not in alerts["ops"].explanation.split(" between ")[0]
    # The metric's direction through the API; a scoped token may not touch others' series.
    response = client.patch("/api/series/bench/metric", {"metric": "ops",
                            "direction": "lower_is_better"}, content_type="application/json",
                            headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    assert response.json()["source"] == "user"
    other = get_user_model().objects.create_user("other", password="x")
    other_token = ApiToken.issue(other, "CI")[1]
    response = client.patch("/api/series/bench/metric", {"metric": "ops",
                            "direction": "higher_is_better"},
                            content_type="application/json",
                            headers={"Authorization": f"Bearer {other_token}"})
    assert response.status_code == 403
    assert _post(client, committed, other_token, lines[0].encode() + b"\n", "x.csv"
                 ).status_code == 403


def test_pages_of_a_metric_series(client: Client) -> None:
    store_results("bench", history_csv(), "h.csv")
    series = Series.objects.get(name="bench")
    analysis.analyse_series(series.pk)
    parse = Function.objects.get(series=series, name="parse")
    page = client.get("/series/bench/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "parse (ms)" in text
    assert "ops (ops/s)" in text
    assert "self time" not in text
    assert "µs" not in text
    page = client.get(f"/series/bench/functions/{parse.pk}/")
    assert page.status_code == 200, page.status_code
    text = page.content.decode()
    assert "Median (ms)" in text
    assert "lower is better" in text
    page = client.get(f"/series/bench/releases/{PLANTED}/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Values compared" in text
    assert "(ops/s)" in text  # the regression's unit beside its name
    assert "-300" in text or "-29" in text  # ops/s as stored, not divided into "ms"
    assert 'id="metrics"' in text
    run = Run.objects.filter(series=series).first()
    assert "not kept as files" in client.get(f"/runs/{run.pk}/").content.decode()
    page = client.get(f"/series/bench/compare/?base=1.5&new={PLANTED}")
    assert page.status_code == 200
    result = client.get(f"/series/bench/compare/?base=1.5&new={PLANTED}&format=json").json()
    verdicts = {r["function"]: r["verdict"] for r in result}
    assert verdicts == {"parse": "regression", "ops": "regression", "render": "unchanged"}


def test_upload_page_takes_results(client: Client, committed: Any) -> None:
    user = get_user_model().objects.create_user("u", password="pw")
    client.force_login(user)
    upload = io.BytesIO(history_csv())
    upload.name = "history.csv"
    bad = io.BytesIO(b"release,metric,value\n1.1,x,zz\n")
    bad.name = "bad.csv"
    form = {"series": "bench", "thread_name": "CrRendererMain", "process_name": "Renderer"}
    response = committed(client.post, "/upload/", {**form, "release": "", "files": [upload]})
    assert response.status_code == 302, response.content
    runs = client.get("/api/uploads/" + response["Location"].rstrip("/").rsplit("/", 1)[-1])
    assert {r["status"] for r in runs.json()} == {"done"}
    assert len(runs.json()) == 10
    response = committed(client.post, "/upload/", {**form, "release": "1.11", "files": [bad]})
    assert response.status_code == 302
    batch = response["Location"].rstrip("/").rsplit("/", 1)[-1]
    (failed,) = client.get(f"/api/uploads/{batch}").json()
    assert failed["status"] == "failed"
    assert failed["error"].startswith("bad.csv: ")
    assert flagged(Series.objects.get(name="bench"))[("parse", PLANTED)] == "regression"


def test_the_longest_names_and_units_a_reader_takes_are_stored() -> None:
    """What the database enforces (PostgreSQL: lengths, NUL) is met by what the readers
    accept: the second pass of `make test` runs this on PostgreSQL."""
    name, unit = "m" * 1000, "u" * 40
    store_results("long", f"release,metric,value,unit\n1,{name},2.5,{unit}\n".encode(),
                  "long.csv")
    metric = Metric.objects.get(function__series__name="long")
    assert (metric.function.name, metric.unit) == (name, unit)
    for bad in (f"release,metric,value,unit\n1,x,1,{'u' * 41}\n",
                "release,metric,value\n1,a\0b,1\n"):
        with pytest.raises(ResultsError, match="^bad.csv: "):
            store_results("long", bad.encode(), "bad.csv")
    set_metric(Series.objects.get(name="long"), name, unit="v" * 40)
    with pytest.raises(IngestError):
        set_metric(Series.objects.get(name="long"), name, unit="v" * 41)


def test_openapi_documents_the_results_endpoints(client: Client) -> None:
    paths = client.get("/api/openapi.json").json()["paths"]
    assert "post" in paths["/api/series/{name}/results"]
    assert "patch" in paths["/api/series/{name}/metric"]
    assert "Google Benchmark" in paths["/api/series/{name}/results"]["post"]["description"]


def test_the_commands_formats_are_the_readers() -> None:
    """`ingest_results --format` lists the formats without importing the readers (--help
    stays fast): the two lists must not drift apart."""
    from deviations.management.commands.ingest_results import FORMATS as COMMAND_FORMATS
    from ingest.services import FORMATS

    assert tuple(COMMAND_FORMATS) == tuple(FORMATS)
