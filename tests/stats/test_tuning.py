"""Scoring detections and tuning the adaptive histogram rule (deviations.stats.tuning)."""

from __future__ import annotations

import numpy as np
import pytest

from deviations.stats.tuning import score_detections, tune
from tests.stats.samples import expected_series, noisy


def test_score_and_tune():
    found, labelled, fa = score_detections(
        [[0, 0, 1, 0, 0, 1], [1, 0, 0, 0, 0, 0]],
        [[0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]],
    )
    assert (found, labelled, fa) == (1, 1, 2)
    rng = np.random.default_rng(7)
    lasting = [noisy(expected_series(builds=45, shift_at=30, shift=1.5), rng) for _ in range(3)]
    spikes = [
        noisy(expected_series(builds=45, shift_at=30, shift=4, duration=1), rng) for _ in range(3)
    ]
    counts = np.stack(lasting + spikes)
    starts = np.zeros(counts.shape[:2], dtype=bool)
    starts[:3, 30] = True
    result = tune(counts, starts, k_grid=(3.0, 5.0), floor_grid=(0.05,), stability_grid=(1.0,))
    assert result.recall == 1.0
    assert len(result.rows) == 2
    assert all(r.false_alerts == 0 for r in result.rows)
    with pytest.raises(ValueError, match="false alerts"):
        tune(counts, np.zeros_like(starts), k_grid=(3.0,), floor_grid=(0.05,))
