"""The process's page cache (``core.memo``)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from django.test import override_settings

from deviations.core import memo


@pytest.fixture(autouse=True)
def empty() -> None:
    memo.forget()


def test_a_value_too_large_to_keep_is_said_not_dropped_silently(
        caplog: pytest.LogCaptureFixture) -> None:
    made = []

    def make() -> tuple[np.ndarray, int]:
        made.append(1)
        value = np.zeros(3 * 1024**2 // 8)
        return value, value.nbytes

    with override_settings(DEVIATIONS_PAGE_CACHE_MB=1), caplog.at_level(logging.WARNING):
        memo.remembered(("matrix", 1), make)
        memo.remembered(("matrix", 1), make)
    assert len(made) == 2  # not kept: made again
    assert "page cache: matrix of 3 MB is larger than DEVIATIONS_PAGE_CACHE_MB (1)" in (
        caplog.text)


def test_a_value_that_fits_is_kept_and_nothing_is_said(caplog: pytest.LogCaptureFixture
                                                       ) -> None:
    made = []

    def make() -> tuple[str, int]:
        made.append(1)
        return "page", 100

    with caplog.at_level(logging.WARNING):
        assert memo.remembered(("page", 1), make) == "page"
        assert memo.remembered(("page", 1), make) == "page"
    assert made == [1]
    assert caplog.text == ""


def test_a_cache_turned_off_keeps_nothing_and_says_nothing(
        caplog: pytest.LogCaptureFixture) -> None:
    with override_settings(DEVIATIONS_PAGE_CACHE_MB=0), caplog.at_level(logging.WARNING):
        memo.remembered(("page", 2), lambda: ("x", 10))
    assert caplog.text == ""
