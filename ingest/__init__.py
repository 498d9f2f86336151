"""Getting data in: trace and histogram parsers (no DB access) and their storage."""
