"""Apache Otava's change points of many series, for the release-verdict harness.

Runs in Otava's own virtual environment (``tests/simulations/baselines.py`` says how it is
made and calls this with it)::

    .venv-otava/bin/python tests/simulations/otava_driver.py IN.npz OUT.json \\
        [--window-len 50] [--max-pvalue 0.001] [--min-magnitude 0.0]

``IN.npz`` holds ``values`` (series × points, NaN after each series' ``lengths[i]``
points). ``OUT.json`` gets, per series, its change points as ``[index, mean_before,
mean_after, pvalue]`` from ``otava.analysis.compute_change_points`` (``index``: the first
point of the new segment). Only numpy, the standard library and Otava are imported.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from otava.analysis import compute_change_points  # type: ignore[import-not-found]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--window-len", type=int, default=50)
    parser.add_argument("--max-pvalue", type=float, default=0.001)
    parser.add_argument("--min-magnitude", type=float, default=0.0)
    args = parser.parse_args(argv)
    data = np.load(args.source)
    out = []
    for row, n in zip(data["values"], data["lengths"], strict=True):
        series = [float(v) for v in row[: int(n)]]
        found = []
        if len(series) >= 2:
            points, _ = compute_change_points(
                series, window_len=args.window_len, max_pvalue=args.max_pvalue,
                min_magnitude=args.min_magnitude,
            )
            found = [[int(c.index), float(c.stats.mean_1), float(c.stats.mean_2),
                      float(c.stats.pvalue)] for c in points]
        out.append(found)
    with open(args.target, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
