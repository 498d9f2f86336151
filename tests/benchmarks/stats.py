"""python -m tests.benchmarks.stats: the statistics core's speed, measured side by side.

Prints the figures of the two parts and, last, one line with the ratios:

- the whole comparison matrix (100 releases × 1,000 functions × 50 runs) against a plain
  loop of the scalar ``compare`` per cell (``tests/benchmarks/stats_matrix.py``);
- the sequential test fed 1,000,000 observations per arm in batches of 1,000 against
  recomputing from scratch after every batch (``tests/benchmarks/stats_sequential.py``).
"""

from tests.benchmarks import stats_matrix, stats_sequential


def main() -> None:
    matrix = stats_matrix.measure()
    for key, value in matrix.items():
        print(f"{key} = {value:.4g}")
    sequential = stats_sequential.measure()
    for key, value in sequential.items():
        print(f"{key} = {value:.4g}")
    print(
        f"matrix_s={matrix['matrix_s']:.3f} matrix_vs_loop={matrix['matrix_vs_loop']:.4f} "
        f"sequential_s={sequential['sequential_s']:.3f} "
        f"sequential_vs_recompute={sequential['sequential_vs_recompute']:.4f}"
    )


if __name__ == "__main__":
    main()
