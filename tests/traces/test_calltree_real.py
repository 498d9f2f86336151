"""Call-tree attribution on the real TracerBench runs (../shared/data/traces): the
regression of ``TimerFire``'s total time that the shift rule finds at 75.0.3730.0 is
explained by its callee ``ScheduledAction::execute`` and its own self time."""

from __future__ import annotations

import pytest
from django.test import Client

from deviations.traces import calltree
from deviations.traces.models import Function, Series
from tests.conftest import SHARED_DATA
from tests.traces.test_real_traces import ingest_tracerbench

TRACES = SHARED_DATA / "traces"
pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not TRACES.is_dir(), reason=f"{TRACES} is absent (shared data)"),
]


def test_tracerbench_timerfire_regression_is_attributed() -> None:
    ingest_tracerbench("tb")
    series = Series.objects.get(name="tb")
    timer = Function.objects.get(series=series, name="TimerFire")
    why = calltree.function_flags(series, timer, "shifts")
    flags = [(f["previous"], f["release"], f["verdict"]) for f in why["flags"]]
    assert flags == [("74.0.3729.0", "75.0.3730.0", "regression")]
    a = why["flags"][0]["attribution"]
    # The verdict's levels: every release up to 74.0.3729.0 against every one from 75.0.3730.0.
    assert (a.base_label, a.new_label) == ("73.0.3681.0 to 74.0.3729.0",
                                           "75.0.3730.0 to 79.0.3944.0")
    assert (a.runs_base, a.runs_new) == (28, 18)
    assert a.total["diff_lo"] > 0
    first = a.parts[0]
    assert first["callee"] == "ScheduledAction::execute"
    assert first["significant"]
    assert first["diff_lo"] > 0
    assert first["share_of_caller"] > 0.5
    assert {p["kind"] for p in a.parts} == {"self", "edge"}
    assert a.words.startswith("`TimerFire` +16.5 µs (95% interval +5.7 µs to +27.3 µs): "
                              "+13.5 µs from `ScheduledAction::execute` (+56%, significant")
    assert not why["flags"][0]["runs_disagree"]
    assert why["flags"][0]["verdict_words"] == "+15.0 µs (95% interval +8.0 µs to +20.0 µs)"


def test_a_flag_whose_runs_do_not_separate_says_so(client: Client) -> None:
    """``V8.Task``'s total rises at 75.0.3731.0 by the shift rule's levels (+172 µs, interval
    above 0), but its pooled runs' medians do not separate (interval through 0, a
    GC scavenge in some runs): the page gives the flag's own numbers in the heading and
    says the split below is not more evidence, instead of a bare "regression" over an
    interval through zero."""
    ingest_tracerbench("tb")
    series = Series.objects.get(name="tb")
    task = Function.objects.get(series=series, name="V8.Task")
    why = calltree.function_flags(series, task, "shifts")
    flag = next(f for f in why["flags"] if f["release"] == "75.0.3731.0")
    assert flag["verdict"] == "regression"
    assert flag["attribution"].total["diff_lo"] < 0 < flag["attribution"].total["diff_hi"]
    assert flag["runs_disagree"]
    assert flag["verdict_words"].startswith("+172.2 µs (95% interval +65.0 µs to ")
    page = client.get(f"/series/tb/functions/{task.pk}/?metric=total").content.decode()
    assert "75.0.3730.0 → 75.0.3731.0: regression, +172.2 µs (95% interval" in page
    assert 'class="warning why-disagree"' in page
    timer = Function.objects.get(series=series, name="TimerFire")
    page = client.get(f"/series/tb/functions/{timer.pk}/?metric=total").content.decode()
    assert "why-disagree" not in page
