"""The ``receiver`` fixture: a webhook receiver on loopback for one test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.alerts.hooks.receiver import Receiver


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    """A receiver on loopback; the site allows private targets (the tests' own)."""
    settings.DEVIATIONS_WEBHOOK_ALLOW_PRIVATE = True
    found = Receiver()
    yield found
    found.close()
