"""Release names: validation and the sort key that orders a series.

A series is ordered by its releases' versions compared the way people read them: runs of
digits compare as numbers, so ``56.0.2909.0 < 56.0.2910.0 < 57.0.2925.0`` and Mozilla
build ids ``20140520030202 < 20140521030202``. An explicit ``order`` number replaces the
version in that comparison when the names do not sort (deploy hashes, codenames).
"""

import re

from deviations.core.errors import UserError

VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~-]{0,99}$")
SERIES_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")

# Digit runs are left-padded to this width; 30 digits outnumber any build id or version part.
_DIGITS = 30
_TOKEN = re.compile(r"(\d+)")


def check_version(version: str) -> str:
    """``version`` if it can name a release, else ``UserError`` saying why."""
    if not VERSION_RE.match(version):
        raise UserError(
            f"release version {version!r} is not valid: 1 to 100 characters, letters, digits "
            "and . _ + ~ -, starting with a letter or digit"
        )
    sort_key(version)  # its numbers must fit the sort key
    return version


#: The largest ``order`` a release can have (the database column is a signed 64-bit integer).
MAX_ORDER = 2**63 - 1


def check_order(order: int | None) -> int | None:
    """``order`` if it can sort a release (None, or 0 to ``MAX_ORDER``), else ``UserError``."""
    if order is not None and not 0 <= order <= MAX_ORDER:
        raise UserError(f"release order must be an integer from 0 to {MAX_ORDER:,}, got {order}")
    return order


def check_series_name(name: str) -> str:
    """``name`` if it can name a series, else ``UserError`` saying why."""
    if not SERIES_NAME_RE.match(name):
        raise UserError(
            f"series name {name!r} is not valid: 1 to 100 characters, letters, digits and "
            ". _ -, starting with a letter or digit"
        )
    return name


def sort_key(version: str, order: int | None = None) -> str:
    """A string whose plain (byte-wise) order is the natural order of versions.

    ``order`` (a non-negative integer), when given, sorts in place of the version.
    ``UserError`` when a number is longer than 30 digits or ``order`` is negative.
    Digit runs are zero-padded to a fixed width, so comparing the strings compares the
    numbers; the separators between them compare as characters.
    """
    text = str(order) if order is not None else version
    if order is not None and order < 0:
        raise UserError(f"release order must be >= 0, got {order}")
    parts = _TOKEN.split(text)
    for i in range(1, len(parts), 2):
        digits = parts[i].lstrip("0") or "0"
        if len(digits) > _DIGITS:
            raise UserError(f"{text!r} has a number longer than {_DIGITS} digits")
        parts[i] = digits.rjust(_DIGITS, "0")
    return "".join(parts)


#: The longest revision a release may carry (a git hash is 40 or 64, an svn number fewer).
MAX_REVISION = 100


def check_revision(revision: str) -> str:
    """``revision`` (a commit hash or number) if a release can carry it, else ``UserError``:
    1 to 100 printable characters, no whitespace (it goes into log URLs and CI output)."""
    if not revision or len(revision) > MAX_REVISION or any(
            ch.isspace() or not ch.isprintable() for ch in revision):
        raise UserError(
            f"revision {revision[:120]!r} is not valid: 1 to {MAX_REVISION} printable "
            "characters without spaces (a commit hash or number)", code="invalid_revision")
    return revision


#: The longest log-URL template a series may carry.
MAX_LOG_URL_TEMPLATE = 500


def check_log_url_template(template: str) -> str:
    """``template`` if it can link a series' commit ranges, else ``UserError``: an http(s)
    URL of at most 500 printable characters without spaces holding ``{from}`` and ``{to}``
    (e.g. ``https://github.com/o/r/compare/{from}...{to}``)."""
    problem = ""
    if len(template) > MAX_LOG_URL_TEMPLATE:
        problem = f"at most {MAX_LOG_URL_TEMPLATE} characters"
    elif any(ch.isspace() or not ch.isprintable() for ch in template):
        problem = "no spaces or control characters"
    elif not template.lower().startswith(("http://", "https://")) or len(
            template.split("://", 1)[1].split("/", 1)[0]) == 0:
        problem = "it must start with http:// or https:// and a host"
    elif "{from}" not in template or "{to}" not in template:
        problem = "it must contain {from} and {to}"
    if problem:
        raise UserError(f"log URL template {template[:120]!r} is not valid: {problem}",
                        code="invalid_log_url_template")
    return template
