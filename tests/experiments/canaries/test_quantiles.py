"""Canaries judged on chosen quantiles (``Canary.quantiles``, stats.quantiles): the setting
checked, the per-quantile decisions stored and equal to the test run directly, a cold
worker restoring them, and the page, API and CLI saying which quantile decided."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.test import Client
from scipy import stats

from deviations.core.errors import UserError
from deviations.experiments.canaries import selectors, services, state
from deviations.experiments.canaries.models import Canary, CanaryState
from deviations.stats.quantiles import QuantileSequentialTest

MEDIAN, LOG_SD = 800.0, 0.4


def _tail_only(rng: np.random.Generator, n: int) -> np.ndarray:
    """Lognormal latencies with p50 and p90 unchanged and the p99 × 1.25."""
    z90, z99 = stats.norm.ppf(0.9), stats.norm.ppf(0.99)
    stretch = (z99 + math.log(1.25) / LOG_SD - z90) / (z99 - z90)
    z = rng.standard_normal(n)
    return MEDIAN * np.exp(LOG_SD * np.where(z > z90, z90 + (z - z90) * stretch, z))


@pytest.mark.django_db
@pytest.mark.parametrize(("kwargs", "message"), [
    ({"quantiles": [1.0]}, "quantiles"),
    ({"quantiles": [0.5, 0.5]}, "once"),
    ({"quantiles": ["0.5"]}, "quantiles"),
    ({"quantiles": [True]}, "quantiles"),
    ({"quantiles": [0.01 * i for i in range(1, 12)]}, "at most 10"),
    ({"quantiles": [0.5], "method": "signs"}, "method"),
    ({"quantiles": [0.5], "tau": 0.1}, "tau"),
])
def test_create_checks_the_quantiles(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message):
        services.create_canary("play", bad="higher", **kwargs)
    assert not Canary.objects.exists()
    canary = services.create_canary("play", bad="higher", quantiles=[0.99, 0.5, 0.9])
    assert canary.quantiles == [0.5, 0.9, 0.99]
    assert services.create_canary("other", bad="any").quantiles == []


@pytest.mark.django_db
def test_p99_only_change_is_decided_by_the_p99(committed: Any, monkeypatch: Any) -> None:
    """Batches of 500 per arm, p99 alone +25 %: the state matches the test run directly on
    the same looks (one per batch), survives a cold restore (checkpoint plus batches), and
    the words name the p99."""
    monkeypatch.setattr(state, "CHECKPOINT_MIN", 2_000)
    canary = services.create_canary("play", bad="higher", unit="ms",
                                    quantiles=[0.5, 0.9, 0.99])
    rng = np.random.default_rng(2210)
    reference = QuantileSequentialTest((0.5, 0.9, 0.99), alpha=0.05)
    for i in range(40):
        a = rng.lognormal(math.log(MEDIAN), LOG_SD, 500)
        b = _tail_only(rng, 500)
        committed(services.receive_batch, canary.pk, f"a{i}", "A", a.tolist())
        if i == 3:
            state.forget_cache()  # a cold worker: checkpoint + batches + stored evidence
        committed(services.receive_batch, canary.pk, f"b{i}", "B", b.tolist())
        reference.update(a, [])
        expected = reference.update([], b)
        if expected.decided_by:
            break
    st = CanaryState.objects.get(canary=canary)
    assert expected.decided_by == (0.99,)
    assert st.n_b <= 20_000
    assert (st.decision, st.headline) == ("reject", "regression")
    (p99,) = [v for v in expected.verdicts if v.q == 0.99]
    assert [st.decided_n_a, st.decided_n_b] == list(p99.decided_at or ())
    assert st.p_value == pytest.approx(min(p99.p_above, p99.p_below), rel=1e-12)
    rows = st.summary["quantiles"]["verdicts"]
    assert [r["decision"] for r in rows] == ["continue", "continue", "b_above"]
    assert rows[2]["diff"][0] >= 0
    view = selectors.canary_view(Canary.objects.select_related("state").get(pk=canary.pk))
    n = p99.decided_at[0] if p99.decided_at else 0
    assert view["words"][0] == (
        f"p99 rose: B's p99 above A's with 95% anytime-valid confidence after {n:,} "
        "observations per arm")
    assert view["words"][1].startswith("p50 changed by between")
    assert view["words"][1].endswith("(no decision yet)")
    assert len(view["words"]) == 3  # the quantiles' words only, not the DKW bands'
    assert not any("distribution functions differ" in w for w in view["words"])
    page = Client().get(canary.get_absolute_url()).content.decode()
    assert "p99 rose: B&#x27;s p99 above A&#x27;s" in page


@pytest.mark.django_db(transaction=True)  # the CLI commits: the state updates on commit
def test_cli_creates_and_reports_a_quantile_decision(tmp_path: Path) -> None:
    def run(*args: str) -> str:
        out = io.StringIO()
        call_command("canary", *args, stdout=out)
        return out.getvalue()

    created = run("create", "rpc", "--bad", "lower", "--unit", "ms",
                  "--quantiles", "0.5,0.9,0.99")
    canary_id = created.strip().splitlines()[-1]
    assert Canary.objects.get(pk=canary_id).quantiles == [0.5, 0.9, 0.99]
    rng = np.random.default_rng(2211)
    lines = ["arm,value"]
    for _ in range(3_000):  # B 20 % faster everywhere: "lower is worse", a regression
        lines += [f"A,{rng.lognormal(math.log(MEDIAN), LOG_SD):.3f}",
                  f"B,{rng.lognormal(math.log(MEDIAN / 1.2), LOG_SD):.3f}"]
    path = tmp_path / "rpc.csv"
    path.write_text("\n".join(lines) + "\n")
    run("feed", canary_id, str(path), "--batch-size", "400")
    text = run("status", canary_id)
    assert "regression" in text.splitlines()[0]
    assert " fell: B's p" in text.splitlines()[1]
    assert "  test: quantiles p50, p90, p99: an anytime-valid decision each" in text
    assert "below A's with 95% anytime-valid confidence after" in text
    as_json = json.loads(run("status", canary_id, "--format", "json"))
    decided = [v for v in as_json["quantile_verdicts"] if v["decision"] != "continue"]
    assert decided
    assert all(v["decision"] == "b_below" and v["diff"][1] <= 0 for v in decided)
    with pytest.raises(Exception, match="quantiles"):
        run("create", "bad", "--bad", "any", "--quantiles", "0.5,x")


@pytest.mark.django_db
def test_api_and_form_take_the_quantiles(api: Client, post: Any, client: Client,
                                         ci_user: Any) -> None:
    made = post(api, "/api/canaries", {"name": "rpc", "bad": "higher",
                                       "quantiles": [0.5, 0.99]})
    assert made.status_code == 201
    assert made.json()["quantiles"] == [0.5, 0.99]
    assert made.json()["quantile_verdicts"] == []
    refused = post(api, "/api/canaries", {"name": "rpc", "bad": "higher",
                                          "quantiles": [0.5], "method": "signs"})
    assert refused.status_code == 400
    assert "quantiles" in refused.json()["detail"]
    client.force_login(ci_user)
    response = client.post("/canaries/new/", {"name": "web", "bad": "lower", "alpha": 0.05,
                                              "quantile": 0.95, "quantiles": "0.9, 0.5"})
    assert response.status_code == 302
    assert Canary.objects.get(name="web").quantiles == [0.5, 0.9]
    bad = client.post("/canaries/new/", {"name": "web2", "bad": "lower", "alpha": 0.05,
                                         "quantile": 0.95, "quantiles": "0.5, high"})
    assert bad.status_code == 200
    assert not Canary.objects.filter(name="web2").exists()
