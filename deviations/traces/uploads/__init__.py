"""Getting trace runs in: the write path of trace series.

``runs`` registers a file as a ``Run`` and stores its times (parsed by the pure reader
``ingest.traces``) in one transaction; ``submit`` is the entry of the upload page and the
API (register, then queue); ``tasks`` holds the ingest task and its sweeper; ``views``,
``forms`` and ``urls`` are the upload page (/upload/).
"""
