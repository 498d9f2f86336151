"""Getting data in: the pure readers of every input format (bytes -> plain data; no
database, no Django). The features store what they read."""
