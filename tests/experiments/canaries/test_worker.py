"""Seed 000's Appendix E replayed through the API and a real worker (PostgreSQL, Redis):
A/A streams keep going, Gamma(10, 10) against Gamma(10, 11) stops with a regression, and
the worker's incrementally updated state equals one test over everything it applied."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from django.test import Client

from deviations.core.packing import unpack
from deviations.experiments.canaries.models import Canary, CanaryBatch, CanaryState
from deviations.stats.sequential import SequentialTest
from tests.core.test_services import worker  # noqa: F401  (the real worker fixture)

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

PAIRS = 5000  # Appendix E stops each stream there
BATCH = 250


def _settled(canary_id: int, timeout: float = 120) -> CanaryState:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        canary = Canary.objects.select_related("state").get(pk=canary_id)
        if canary.state.applied_seq == canary.batches_received:
            return canary.state
        time.sleep(0.1)
    raise AssertionError(f"canary {canary_id}: batches still pending after {timeout} s")


def _replay(api: Client, rng: np.random.Generator, scale_b: float) -> tuple[int, int]:
    """One stream: batches of both arms until the canary refuses (decided) or PAIRS;
    returns the canary and the number of pairs of batches taken."""
    made = api.post("/api/canaries", {"name": "appendix-e", "bad": "higher", "method": "dkw"},
                    content_type="application/json").json()
    url = f"/api/canaries/{made['id']}/observations"
    a = rng.gamma(10, 10, PAIRS)
    b = rng.gamma(10, scale_b, PAIRS)
    for i in range(PAIRS // BATCH):
        part = slice(i * BATCH, (i + 1) * BATCH)
        for arm, data in (("A", a), ("B", b)):
            response = api.post(url, {"batch": f"{i}{arm}", "arm": arm,
                                      "values": data[part].tolist()},
                                content_type="application/json")
            if response.status_code == 409:
                return made["id"], i
            assert response.status_code == 202, response.content
        # A client paced like a canary's traffic: the worker keeps up with it (a client
        # faster than the worker gets its batches applied several at a time, and the stop
        # comes that much later).
        _settled(made["id"])
    return made["id"], PAIRS // BATCH


def _check_state(canary_id: int) -> CanaryState:
    st = _settled(canary_id)
    rows = CanaryBatch.objects.filter(canary_id=canary_id).values_list("arm", "values")
    one = SequentialTest("equal")
    one.update(np.concatenate([unpack(v) for arm, v in rows if arm == "A"]),
               np.concatenate([unpack(v) for arm, v in rows if arm == "B"]))
    assert (st.n_a, st.n_b) == (one.n_a, one.n_b)
    assert st.statistic == pytest.approx(one.statistic)
    assert st.p_value <= one.result().p_value_now * (1 + 1e-12)  # running minimum
    return st


def test_appendix_e_through_the_api_and_a_worker(worker: Any, api: Client) -> None:  # noqa: F811
    rng = np.random.default_rng(2022)
    for _ in range(3):  # A/A: Gamma(10, 10) in both arms, looked at after every batch
        canary_id, _ = _replay(api, rng, 10.0)
        st = _check_state(canary_id)
        assert st.decision == "continue"
        assert (st.n_a, st.n_b) == (PAIRS, PAIRS)
        assert st.headline == "keep_going"
    for _ in range(3):  # Gamma(10, 10) against Gamma(10, 11): B is larger, a regression
        canary_id, stopped = _replay(api, rng, 11.0)
        st = _check_state(canary_id)
        assert st.decision == "reject"
        assert st.headline == "regression"
        assert st.decided_n_a is not None
        assert stopped < PAIRS // BATCH  # the API refused what came after the decision
        # batches accepted before the decision was stored are still applied: one at most
        assert 0 <= st.n_a + st.n_b - st.decided_n_a - st.decided_n_b <= BATCH
        assert stopped * BATCH <= min(st.n_a, st.n_b) <= max(st.n_a, st.n_b) < PAIRS
        assert st.p_value <= 0.05
