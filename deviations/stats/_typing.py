"""Type aliases shared by the statistics modules (kept tiny on purpose)."""

from typing import Literal

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Int8Array = npt.NDArray[np.int8]
BoolArray = npt.NDArray[np.bool_]

Direction = Literal["lower_is_better", "higher_is_better"]
"""Whether a larger value of the metric is worse (times, latencies: the default) or better
(throughput, frames per second, scores). Differences stay later − earlier either way; the
direction only decides which sign is a regression."""

DIRECTIONS: tuple[Direction, ...] = ("lower_is_better", "higher_is_better")

__all__ = ["DIRECTIONS", "BoolArray", "Direction", "FloatArray", "Int8Array", "IntArray"]
