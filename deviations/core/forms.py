"""``UserError`` in forms and model validation: the one place it becomes a ValidationError."""

from collections.abc import Callable
from typing import TypeVar

from django.core.exceptions import ValidationError

from deviations.core.errors import UserError

T = TypeVar("T")


def validated(check: Callable[[T], T], value: T) -> T:
    """``check(value)``, with a ``UserError`` turned into a ``ValidationError`` (same text)."""
    try:
        return check(value)
    except UserError as exc:
        raise ValidationError(exc.message, code=exc.code) from None


def form_error(exc: UserError) -> ValidationError:
    """The ``ValidationError`` a form shows for an error raised by a service."""
    return ValidationError(exc.message, code=exc.code)
