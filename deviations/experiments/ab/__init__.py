"""Paired interleaved A/B runs (seed 002): upload, per-slice paired differences, the A/A
floor of each host, the four-number result line; docs/statistics.md, "Paired A/B"."""
