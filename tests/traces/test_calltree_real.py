"""Call-tree attribution on the real TracerBench runs (../shared/data/traces): the
regression of ``TimerFire``'s total time that the shift rule finds at 75.0.3730.0 is
explained by its callee ``ScheduledAction::execute`` and its own self time."""

from __future__ import annotations

import pytest

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
