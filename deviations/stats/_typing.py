"""Array aliases shared by the statistics modules (kept tiny on purpose)."""

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Int8Array = npt.NDArray[np.int8]
BoolArray = npt.NDArray[np.bool_]

__all__ = ["BoolArray", "FloatArray", "Int8Array", "IntArray"]
