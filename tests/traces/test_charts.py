"""Figure builders of deviations/charts.py: encodings, hover data, escaping, payload shape."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
import pytest

from deviations.stats.releases import ComparisonMatrix, compare_matrix
from deviations.traces import charts

NAN = float("nan")
EVIL_FUNCTION = "<img src=x onerror=alert(1)>"
EVIL_RELEASE = "<b>57.0.2910.0</b>"


# What a page would pass from a whole compare_matrix result (the pages read stored arrays).
def matrix_of_result(
    result: ComparisonMatrix, functions: Sequence[str], releases: Sequence[str],
    function_urls: Sequence[str] | None = None, **kwargs: Any,
) -> dict[str, Any]:
    """:func:`deviation_matrix` of a :func:`~deviations.stats.releases.compare_matrix` result.

    Uses the per-release intervals of the estimator the verdicts were computed with.
    """
    chosen = result.median if result.estimator == "median" else result.mean
    return charts.deviation_matrix(
        functions, releases, result.verdict, result.gap, result.diff, result.diff_lo,
        result.diff_hi, chosen.estimate, chosen.lo, chosen.hi, result.digression,
        function_urls, **kwargs,
    )


def cis_of_result(
    result: ComparisonMatrix, f: int, releases: Sequence[str], **kwargs: Any
) -> dict[str, Any]:
    """:func:`function_cis` of row ``f`` (one function) of a ``compare_matrix`` result."""
    def row(ia: Any) -> list[Any]:
        return [ia.estimate[f], ia.lo[f], ia.hi[f]]

    return charts.function_cis(releases, row(result.median), row(result.mean), result.verdict[f],
                        result.digression[f], diff=result.diff[f], gap=result.gap[f],
                        **kwargs)


def trace(fig: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [t for t in fig["data"] if t["name"] == name]
    return found


def dumps(fig: dict[str, Any]) -> str:
    """The JSON a view sends: must not need NaN or numpy support."""
    return json.dumps(fig, allow_nan=False)


@pytest.fixture
def small() -> dict[str, Any]:
    """3 functions × 4 releases (times in µs) covering every verdict code."""
    est = np.array([[250.0, 500.0, 500.0, 250.0],
                    [100.0, 101.0, 99.0, 100.0],
                    [1000.0, 1000.0, 1500.0, 1500.0]])  # fmt: skip
    half = 0.04 * est
    lo, hi = est - half, est + half
    diff = est[:, 1:] - est[:, :-1]
    gap = np.sign(diff) * np.maximum(np.maximum(lo[:, 1:] - hi[:, :-1], lo[:, :-1] - hi[:, 1:]), 0)
    diff_lo, diff_hi = diff - 10.0, diff + 10.0
    diff_lo[1, 1] = NAN
    return {
        "functions": ["Paint", "V8.ScriptCompiler", "GetRenderStyleForStrike"],
        "releases": ["56.0.2909.0", "56.0.2910.0", "56.0.2911.0", "56.0.2912.0"],
        "verdict": np.array([[2, 0, 3], [1, 0, 0], [-1, 2, 0]], dtype=np.int8),
        "gap": gap, "diff": diff, "diff_lo": diff_lo, "diff_hi": diff_hi,
        "estimate": est, "lo": lo, "hi": hi,
        "digression": np.array([[True, False, False], [False] * 3, [False] * 3]),
        "function_urls": ["/series/s/functions/1/", "/series/s/functions/2/",
                          "https://example.org/series/s/functions/3/"],
    }  # fmt: skip


def test_appeared_and_vanished_have_their_own_markers(small: dict[str, Any]) -> None:
    small["verdict"] = np.array([[4, 0, 3], [1, 0, 5], [-1, 2, 0]], dtype=np.int8)
    fig = charts.deviation_matrix(**small)
    by_name = {t["name"]: t for t in fig["data"]}
    assert by_name["appeared"]["marker"]["symbol"] == "star"
    assert by_name["vanished"]["marker"]["symbol"] == "x"
    assert by_name["appeared"]["x"] == ["56.0.2910.0"]
    assert by_name["appeared"]["y"] == ["Paint"]
    assert len(by_name["regression"]["x"]) == 1  # the appeared cell is not a regression


def test_matrix_traces_symbols_and_counts(small: dict[str, Any]) -> None:
    fig = charts.deviation_matrix(**small)
    names = [t["name"] for t in fig["data"]]
    assert names == ["regression", "improvement", "significant overlap",
                     "non-significant overlap", "digression starts"]  # fmt: skip
    assert {t["type"] for t in fig["data"]} == {"scatter"}  # few points: SVG
    symbols = [t["marker"]["symbol"] for t in fig["data"]]
    assert symbols == ["triangle-up", "triangle-down", "circle", "square", "circle-open"]
    counts = {t["name"]: len(t["x"]) for t in fig["data"]}
    # 9 cells, one without verdict (left out); the digression ring sits on one regression.
    assert counts == {"regression": 2, "improvement": 1, "significant overlap": 1,
                      "non-significant overlap": 4, "digression starts": 1}  # fmt: skip
    for t in fig["data"]:
        assert len(t["y"]) == len(t["x"])
        assert "customdata" not in t or len(t["customdata"]) == len(t["x"])
    reg = trace(fig, "regression")
    assert list(zip(reg["y"], reg["x"], strict=True)) == [
        ("Paint", "56.0.2910.0"), ("GetRenderStyleForStrike", "56.0.2911.0")]
    ring = trace(fig, "digression starts")
    assert (ring["y"], ring["x"]) == (["Paint"], ["56.0.2910.0"])
    assert ring["hoverinfo"] == "skip"
    assert trace(fig, "regression")["marker"]["color"] == charts.REGRESSION_COLOR
    assert trace(fig, "improvement")["marker"]["color"] == charts.IMPROVEMENT_COLOR
    layout = fig["layout"]
    assert layout["xaxis"]["categoryarray"] == small["releases"][1:]
    assert layout["yaxis"]["categoryarray"] == small["functions"]
    assert layout["yaxis"]["range"] == [len(small["functions"]), -1]  # first function on top
    go.Figure(fig)  # Plotly's own validator: attribute names, symbols, value types


def test_matrix_hover_customdata(small: dict[str, Any]) -> None:
    fig = charts.deviation_matrix(**small)
    # The p-value and the runs compared, when the rule gives them (the shift rule).
    with_p = charts.deviation_matrix(
        **small, p_value=np.full((3, 3), 2.5e-4), n_before=np.full((3, 3), 12),
        n_after=np.full((3, 3), 25))
    got = dict(zip(charts.MATRIX_CUSTOMDATA, trace(with_p, "regression")["customdata"][0],
                   strict=True))
    assert got["p_value"] == 2.5e-4
    assert got["runs"] == "12 runs before, 25 after"
    reg = trace(fig, "regression")
    cd = dict(zip(charts.MATRIX_CUSTOMDATA, reg["customdata"][0], strict=True))
    # Paint 56.0.2909.0 -> 56.0.2910.0: 250 µs ± 4% then 500 µs ± 4%, shown in ms.
    assert cd == {
        "url": "/series/s/functions/1/", "release_a": "56.0.2909.0",
        "estimate_a": 0.25, "lo_a": 0.24, "hi_a": 0.26,
        "estimate_b": 0.5, "lo_b": 0.48, "hi_b": 0.52,
        "diff": 0.25, "diff_lo": 0.24, "diff_hi": 0.26, "gap": 0.22, "relative": 1.0,
        "p_value": None, "runs": "",
        "note": " · starts a digression (comes back later)",
    }  # fmt: skip
    assert reg["customdata"][1][-1] == ""
    for i, column in enumerate(charts.MATRIX_CUSTOMDATA):
        assert f"customdata[{i}]" in reg["hovertemplate"] or column in ("url", "gap", "note")
    assert "customdata[13]" in reg["hovertemplate"]
    assert "(%{customdata[12]:+.1%})" in reg["hovertemplate"]  # the effect size in %
    assert reg["hovertemplate"].endswith("<extra></extra>")
    assert "regression" in reg["hovertemplate"]
    assert "%{y}" in reg["hovertemplate"]
    assert "%{x}" in reg["hovertemplate"]
    square = trace(fig, "non-significant overlap")
    assert len(square["customdata"][0]) == len(charts.MATRIX_CUSTOMDATA) - 1  # no note
    assert square["marker"]["size"] == 4
    assert square["marker"]["color"] == "#D0D0D0"


def test_matrix_nan_becomes_none_and_json_is_strict(small: dict[str, Any]) -> None:
    fig = charts.deviation_matrix(**small)
    square = trace(fig, "non-significant overlap")
    row = next(c for c, y, x in zip(square["customdata"], square["y"], square["x"], strict=True)
               if (y, x) == ("V8.ScriptCompiler", "56.0.2911.0"))  # fmt: skip
    assert row[charts.MATRIX_CUSTOMDATA.index("diff_lo")] is None
    text = dumps(fig)
    assert "NaN" not in text
    assert json.loads(text) == fig


def test_matrix_sizes_grow_with_gap(small: dict[str, Any]) -> None:
    fig = charts.deviation_matrix(**small)
    reg = trace(fig, "regression")
    gaps = [c[charts.MATRIX_CUSTOMDATA.index("gap")] / c[2] for c in reg["customdata"]]
    assert gaps[0] > gaps[1]  # Paint doubles, GetRenderStyleForStrike grows by half
    assert reg["marker"]["size"][0] > reg["marker"]["size"][1]
    ring = trace(fig, "digression starts")
    assert ring["marker"]["size"][0] > reg["marker"]["size"][0]


def test_marker_size_mapping() -> None:
    rel = np.array([0.0, 0.01, 0.1, 0.25, 0.5, 1.0, 3.0])
    sizes = charts.marker_size(rel * 200.0, np.full(rel.size, 200.0))
    assert sizes[0] == charts.SIZE_MIN
    assert sizes[-2] == sizes[-1] == charts.SIZE_MAX
    assert np.all(np.diff(sizes[:-1]) > 0)
    # Area linear in the relative gap between the two ends.
    area = sizes**2
    assert area[4] - area[0] == pytest.approx((area[5] - area[0]) / 2, rel=0.02)
    # Sign of the gap does not matter; a missing or zero estimate gives the smallest size.
    assert charts.marker_size([-50.0], [200.0])[0] == charts.marker_size([50.0], [200.0])[0]
    assert list(charts.marker_size([50.0, 50.0], [NAN, 0.0])) == [charts.SIZE_MIN] * 2


def test_matrix_without_urls_and_show_modes(
    small: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    fig = charts.deviation_matrix(**{**small, "function_urls": None})
    assert {c[0] for t in fig["data"] for c in t.get("customdata", [])} == {None}
    lean = charts.deviation_matrix(**small, show="deviations")
    assert "non-significant overlap" not in [t["name"] for t in lean["data"]]
    assert "not shown" in lean["layout"]["title"]["text"]
    assert "not shown" not in charts.deviation_matrix(**small)["layout"]["title"]["text"]
    monkeypatch.setattr(charts, "AUTO_MAX_SQUARES", 3)  # the fixture has 4 squares
    auto = charts.deviation_matrix(**small)
    assert [t["name"] for t in auto["data"]] == [t["name"] for t in lean["data"]]
    assert len(charts.deviation_matrix(**small, show="all")["data"]) == 5


def test_matrix_payload_is_compact() -> None:
    """~180 bytes a cell with 30-character names: 4 significant digits, one JSON row each."""
    rng = np.random.default_rng(11)
    n_f, n_r = 100, 51
    est = rng.lognormal(np.log(300.0), 1.0, (n_f, n_r))
    diff = est[:, 1:] - est[:, :-1]
    fig = charts.deviation_matrix(
        [f"blink::LayoutObject::Paint{i:04d}" for i in range(n_f)],
        [f"57.0.{2900 + r}.0" for r in range(n_r)],
        np.zeros((n_f, n_r - 1), dtype=np.int8), np.zeros_like(diff), diff, diff * 0.9,
        diff * 1.1, est, est * 0.97, est * 1.03, np.zeros(diff.shape, dtype=bool),
        [f"/series/chromium/functions/{i}/" for i in range(n_f)], show="all",
    )
    assert len(trace(fig, "non-significant overlap")["x"]) == diff.size
    assert trace(fig, "non-significant overlap")["type"] == "scatter"  # 5,000: still SVG
    assert len(json.dumps(fig, allow_nan=False)) / diff.size < 200


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"verdict": np.zeros((3, 2), dtype=np.int8)}, "verdict must have shape"),
        ({"estimate": np.zeros((3, 3))}, "estimate must have shape"),
        ({"function_urls": ["/a/"]}, "function_urls must have 3"),
        ({"function_urls": ["javascript:alert(1)", "/b/", "/c/"]}, "relative or http"),
        ({"function_urls": ["/a/", " JavaScript:alert(1)", "/c/"]}, "relative or http"),
        ({"function_urls": ["/a/", "/b/", "data:text/html,x"]}, "relative or http"),
        ({"releases": ["1.0"], "verdict": np.zeros((3, 0))}, "at least two releases"),
        ({"show": "some"}, "show must be"),
    ],
)
def test_matrix_rejects_bad_input(
    small: dict[str, Any], change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        charts.deviation_matrix(**{**small, **change})


def test_plotly_text_escapes_markup() -> None:
    assert charts.plotly_text(EVIL_FUNCTION) == "&lt;img src=x onerror=alert(1)&gt;"
    assert charts.plotly_text('a & "b" <br>') == "a &amp; &#34;b&#34; &lt;br&gt;"
    assert charts.plotly_text("&lt;") == "&amp;lt;"  # already-escaped text stays literal
    assert charts.plotly_text(56) == "56"


def assert_only_escaped(fig: dict[str, Any], *raw: str) -> None:
    text = dumps(fig)
    for s in raw:
        assert s not in text
        assert charts.plotly_text(s) in text
    templates = [t.get("hovertemplate", "") for t in fig["data"]]
    for s in raw:
        assert not any(charts.plotly_text(s) in tmpl for tmpl in templates)


def test_matrix_escapes_upload_strings(small: dict[str, Any]) -> None:
    functions = [EVIL_FUNCTION, *small["functions"][1:]]
    releases = [small["releases"][0], EVIL_RELEASE, *small["releases"][2:]]
    fig = charts.deviation_matrix(**{**small, "functions": functions, "releases": releases},
                                  title="Series <script>")  # fmt: skip
    assert_only_escaped(fig, EVIL_FUNCTION, EVIL_RELEASE, "Series <script>")
    reg = trace(fig, "regression")
    assert reg["y"][0] == charts.plotly_text(EVIL_FUNCTION)
    assert reg["x"][0] == charts.plotly_text(EVIL_RELEASE)
    improvement = trace(fig, "improvement")
    assert improvement["customdata"][0][1] == "56.0.2911.0"
    square = trace(fig, "non-significant overlap")
    assert charts.plotly_text(EVIL_RELEASE) in [c[1] for c in square["customdata"]]


@pytest.fixture
def one_function() -> dict[str, Any]:
    """Seed 003 Figure 7 in miniature: up, up again, back down to the first level."""
    est = np.array([100.0, 100.0, 160.0, 250.0, 250.0, 100.0])
    mean = est * 1.1
    return {
        "releases": [f"57.0.29{k}.0" for k in range(40, 46)],
        "median": (est, est * 0.95, est * 1.05),
        "mean": (mean, mean * 0.9, mean * 1.1),
        "verdict": np.array([0, 2, 2, 0, 3], dtype=np.int8),
        "digression": np.array([False, True, False, False, False]),
    }


def test_function_cis_marks_deviation_at_its_release(one_function: dict[str, Any]) -> None:
    fig = charts.function_cis(**one_function)
    rel = one_function["releases"]
    names = [t["name"] for t in fig["data"]]
    assert names == ["median CI", "mean CI", "regression", "improvement"]
    reg, imp = trace(fig, "regression"), trace(fig, "improvement")
    assert reg["x"] == [2, 3]
    assert imp["x"] == [5]
    assert [c[:2] for c in reg["customdata"]] == [[rel[1], rel[2]], [rel[2], rel[3]]]
    assert imp["customdata"][0][:4] == [rel[4], rel[5], -0.15, -0.1325]  # ms: diff, gap
    assert reg["marker"]["symbol"] == "triangle-up"
    assert imp["marker"]["symbol"] == "triangle-down"
    assert reg["y"] == [0.168, 0.2625]  # on top of the later release's median CI
    assert reg["marker"]["line"]["width"] == [2, 0]  # the first regression starts a digression
    assert "digression" in reg["customdata"][0][4]
    assert reg["customdata"][1][4] == ""
    bands = [(s["x0"], s["x1"], s["fillcolor"]) for s in fig["layout"]["shapes"]]
    assert bands == [(1, 2, charts.REGRESSION_COLOR), (2, 3, charts.REGRESSION_COLOR),
                     (4, 5, charts.IMPROVEMENT_COLOR)]  # fmt: skip
    med = trace(fig, "median CI")
    assert med["y"] == [0.1, 0.1, 0.16, 0.25, 0.25, 0.1]
    assert med["error_y"]["array"][2] == 0.008
    assert med["error_y"]["arrayminus"][2] == 0.008
    assert med["x"][2] == pytest.approx(2 + charts.MEDIAN_DX)
    assert trace(fig, "mean CI")["x"][2] == pytest.approx(2 + charts.MEAN_DX)
    assert fig["layout"]["xaxis"]["ticktext"] == rel
    assert "<extra>median CI</extra>" in med["hovertemplate"]
    go.Figure(fig)


def test_function_cis_given_gap_and_units(one_function: dict[str, Any]) -> None:
    gap = np.array([0.0, 30.0, 70.0, 0.0, -120.0])
    fig = charts.function_cis(**one_function, gap=gap, unit="us")
    assert trace(fig, "improvement")["customdata"][0][3] == -120.0
    assert trace(fig, "median CI")["y"][0] == 100.0
    assert "µs" in fig["layout"]["yaxis"]["title"]["text"]


def test_function_cis_samples_strip(one_function: dict[str, Any]) -> None:
    rng = np.random.default_rng(3)
    samples = [rng.normal(e, 5.0, size=n).tolist()
               for e, n in zip(one_function["median"][0], [5, 10, 5, 20, 5, 2], strict=True)]
    fig = charts.function_cis(**one_function, samples=samples)
    runs = trace(fig, "runs")
    assert len(runs["x"]) == len(runs["y"]) == 47
    assert charts.function_cis(**one_function, samples=samples) == fig  # deterministic jitter
    x = np.array(runs["x"])
    slot = np.repeat(np.arange(6), [5, 10, 5, 20, 5, 2])
    assert np.all(np.abs(x - slot - charts.SAMPLES_DX) <= 0.07 + 1e-9)
    assert len(set(x[slot == 3])) == 20  # spread, not stacked
    assert runs["customdata"][5] == ["", one_function["releases"][1]]  # no run pages given
    assert "click" not in runs["hovertemplate"]
    urls = [[f"/runs/{r}-{k}/" for k in range(len(s))] for r, s in enumerate(samples)]
    linked = trace(charts.function_cis(**one_function, samples=samples, sample_urls=urls), "runs")
    assert linked["customdata"][5] == ["/runs/1-0/", one_function["releases"][1]]
    assert "click: the run and its file" in linked["hovertemplate"]
    with pytest.raises(ValueError, match="sample_urls must have the shape of samples"):
        charts.function_cis(**one_function, samples=samples, sample_urls=urls[:-1])
    with pytest.raises(ValueError, match="samples must have 6"):
        charts.function_cis(**one_function, samples=samples[:-1])
    dumps(fig)


def test_function_cis_escapes_and_accepts_interval_objects(one_function: dict[str, Any]) -> None:
    class Iv:
        def __init__(self, e: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
            self.estimate, self.lo, self.hi = e, lo, hi

    releases = [EVIL_RELEASE, *one_function["releases"][1:]]
    args = {**one_function, "releases": releases, "median": Iv(*one_function["median"])}
    fig = charts.function_cis(**args, title=EVIL_FUNCTION, samples=[[1.0, 2.0]] * 6)
    assert_only_escaped(fig, EVIL_FUNCTION, EVIL_RELEASE)
    assert fig == charts.function_cis(**{**args, "median": one_function["median"]},
                                      title=EVIL_FUNCTION, samples=[[1.0, 2.0]] * 6)  # fmt: skip
    with pytest.raises(ValueError, match="median est must have shape"):
        charts.function_cis(**{**one_function, "median": (np.ones(3), np.ones(3), np.ones(3))})


def test_ci_narrowing() -> None:
    n = [5, 10, 20, 50]
    est = np.array([[250.0, 70.0]] * 4)
    half = np.array([[60.0], [40.0], [28.0], [18.0]]) * np.array([1.0, 0.5])
    fig = charts.ci_narrowing(n, est, est - half, est + half,
                              labels=["56.0.2909.0", EVIL_RELEASE], title="Paint")  # fmt: skip
    assert_only_escaped(fig, EVIL_RELEASE)
    assert fig["layout"]["xaxis"]["ticktext"] == ["5 runs", "10 runs", "20 runs", "50 runs"]
    ci = [t for t in fig["data"] if "error_y" in t]
    assert [t["name"] for t in ci] == ["56.0.2909.0", charts.plotly_text(EVIL_RELEASE)]
    widths = [t for t in fig["data"] if t.get("yaxis") == "y2" and t["mode"] == "lines+markers"]
    assert widths[0]["y"] == [0.12, 0.08, 0.056, 0.036]
    assert all(np.all(np.diff(t["y"]) < 0) for t in widths)
    ref = [t for t in fig["data"] if t["name"] == "∝ 1/√n"]
    assert ref[0]["y"][0] == 0.12
    assert ref[0]["y"][3] == pytest.approx(0.12 * math.sqrt(5 / 50), rel=1e-3)
    assert ci[0]["x"][0] < ci[1]["x"][0]  # the two releases side by side within a slot
    go.Figure(fig)
    single = charts.ci_narrowing(n, est[:, 0], (est - half)[:, 0], (est + half)[:, 0])
    assert [t["name"] for t in single["data"] if "error_y" in t] == ["release 1"]
    with pytest.raises(ValueError, match="labels must have 2"):
        charts.ci_narrowing(n, est, est - half, est + half, labels=["one"])
    with pytest.raises(ValueError, match="positive"):
        charts.ci_narrowing([0, 5, 10, 20], est, est - half, est + half)


def test_rounding_keeps_four_significant_digits() -> None:
    rng = np.random.default_rng(7)
    x = rng.lognormal(0.0, 6.0, 2000) * rng.choice([-1.0, 1.0], 2000)
    out = charts._round_sig(x)
    assert np.allclose(out, x, rtol=5e-4)
    for v in out.tolist():  # what json.dumps writes: at most 4 significant digits
        assert len(repr(v).split("e")[0].lstrip("-").replace(".", "").strip("0")) <= 4


def test_matrix_from_real_compare_matrix() -> None:
    """Field names and shapes of compare_matrix feed the builders; planted changes show up."""
    rng = np.random.default_rng(2017)
    n_f, n_r, runs = 6, 8, 10
    level = np.full((n_f, n_r), 300.0)
    level[0, 4:] *= 2.0  # a lasting regression at release 4
    level[1, 2:5] *= 2.0  # a digression: up at release 2, back at release 5
    samples = level[:, :, None] * rng.lognormal(0.0, 0.03, (n_f, n_r, runs))
    samples[5, 0, 1:] = NAN  # one run only: no verdict for the first pair of function 5
    result = compare_matrix(samples)
    functions = [f"f{i}" for i in range(n_f)]
    releases = [f"1.{r}" for r in range(n_r)]
    fig = matrix_of_result(result, functions, releases,
                                              [f"/f/{i}/" for i in range(n_f)])  # fmt: skip
    reg, imp = trace(fig, "regression"), trace(fig, "improvement")
    assert ("f0", "1.4") in zip(reg["y"], reg["x"], strict=True)
    assert ("f1", "1.2") in zip(reg["y"], reg["x"], strict=True)
    assert ("f1", "1.5") in zip(imp["y"], imp["x"], strict=True)
    ring = trace(fig, "digression starts")
    assert list(zip(ring["y"], ring["x"], strict=True)) == [("f1", "1.2")]
    shown = sum(len(t["x"]) for t in fig["data"][:4])
    assert shown == np.count_nonzero(result.verdict >= 0) == n_f * (n_r - 1) - 1
    i = list(zip(reg["y"], reg["x"], strict=True)).index(("f0", "1.4"))
    cd = dict(zip(charts.MATRIX_CUSTOMDATA, reg["customdata"][i], strict=True))
    assert cd["url"] == "/f/0/"
    assert cd["release_a"] == "1.3"
    assert cd["estimate_b"] == pytest.approx(result.median.estimate[0, 4] / 1000, rel=1e-3)
    assert cd["gap"] == pytest.approx(result.gap[0, 3] / 1000, rel=1e-3)
    dumps(fig)

    cis = cis_of_result(result, 1, releases, samples=samples[1].tolist())
    assert trace(cis, "regression")["x"] == [2]
    assert trace(cis, "improvement")["x"] == [5]
    assert trace(cis, "regression")["marker"]["line"]["width"] == [2]
    assert len(trace(cis, "runs")["x"]) == n_r * runs
    dumps(cis)


def test_large_matrices_switch_to_webgl_and_drop_squares() -> None:
    n_f, n_r = 120, 51
    est = np.full((n_f, n_r), 100.0)
    diff = np.zeros((n_f, n_r - 1))
    verdict = np.zeros(diff.shape, dtype=np.int8)
    verdict[::10, 5] = 2  # a regression on every tenth function
    args = (
        [f"f{i}" for i in range(n_f)], [f"1.{r}" for r in range(n_r)], verdict, diff + 5,
        diff + 5, diff + 1, diff + 9, est, est * 0.97, est * 1.03, np.zeros(diff.shape, bool),
    )
    auto = charts.deviation_matrix(*args)  # 5,988 squares > AUTO_MAX_SQUARES
    assert "non-significant overlap" not in {t["name"] for t in auto["data"]}
    assert {t["type"] for t in auto["data"]} == {"scatter"}
    every = charts.deviation_matrix(*args, show="all")  # 6,000 points > SVG_MAX_POINTS
    assert {t["type"] for t in every["data"]} == {"scattergl"}
