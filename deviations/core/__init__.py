"""What every feature shares: the user-facing error base, release names, array packing and
name digests, text escaping for pages and charts, batched queries, API tokens and the
static-file finder for plotly.js. Nothing here imports a feature."""
