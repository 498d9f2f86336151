"""Argument checks shared by the statistics modules: one copy of each, one wording.

Every public function validates its inputs through these so that a confidence level or a
sample is refused with the same message wherever it is passed.
"""

import numpy as np
import numpy.typing as npt

from ._typing import FloatArray

__all__ = ["as_sample", "check_confidence"]


def check_confidence(confidence: float) -> None:
    """Refuse a two-sided confidence level outside the open interval (0, 1)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")


def as_sample(
    x: npt.ArrayLike, name: str = "x", *, minimum: int = 0, unit: str = "values"
) -> FloatArray:
    """One sample as a 1-D float64 array, refusing what no statistic here can use.

    Parameters
    ----------
    x : array_like
        The sample.
    name : str
        Argument name used in the error message.
    minimum : int, default 0
        Fewest values accepted (an interval needs a spread: at least 2).
    unit : str, default "values"
        What the values are called in the message ("runs" for run times).

    Raises
    ------
    ValueError
        Not one-dimensional, a NaN or infinite value, fewer than ``minimum`` values.
    """
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got NaN or infinite values")
    if arr.size < minimum:
        raise ValueError(f"{name} needs at least {minimum} {unit}, got {arr.size}")
    return arr
