"""One base for errors a user can fix: a message, a code and the HTTP status.

Parsers, validators and services raise ``UserError`` (or a subclass) instead of returning
an error string; the API turns it into a JSON answer in one handler (``deviations.api``),
forms into a form error in one place (``deviations.core.forms``), the CLI into one line on
stderr. Nothing in this module imports Django, so the pure parsers of ``ingest`` can
raise it.
"""

from __future__ import annotations


class UserError(ValueError):
    """A problem with what a user sent, worded for them. ``str(e)`` is the message.

    A ``ValueError``, so code that validates values may catch it as one.
    """

    status: int = 400
    code: str = "invalid"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status


class TooLargeError(UserError):
    """More bytes than the configured limit (HTTP 413)."""

    status = 413
    code = "too_large"

