"""Live canaries: a candidate (arm B) against the current build (arm A), observations in
batches, an anytime-valid sequential test (``deviations.stats.sequential``) updated by a
task after each batch, a page that refreshes itself (docs/statistics.md, "Canaries")."""
