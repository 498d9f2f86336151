import pytest

from deviations.core.errors import UserError
from deviations.core.versions import check_series_name, check_version, sort_key


def ordered(versions: list[str]) -> list[str]:
    return sorted(versions, key=sort_key)


def test_dotted_versions_sort_numerically() -> None:
    assert ordered(["56.0.2910.0", "56.0.2909.0", "57.0.2925.0", "54.0.2837.0", "9.0.1.0"]) == [
        "9.0.1.0", "54.0.2837.0", "56.0.2909.0", "56.0.2910.0", "57.0.2925.0",
    ]


def test_build_ids_sort_as_numbers() -> None:
    assert ordered(["20140521030202", "20140520030202", "9"]) == [
        "9", "20140520030202", "20140521030202",
    ]


def test_leading_zeros_and_suffixes() -> None:
    assert sort_key("1.02") == sort_key("1.2")
    assert ordered(["1.10-rc1", "1.9", "1.10"]) == ["1.9", "1.10", "1.10-rc1"]


def test_explicit_order_replaces_the_version() -> None:
    assert sort_key("deadbeef", order=2) < sort_key("cafe", order=10)
    with pytest.raises(ValueError, match=">= 0"):
        sort_key("x", order=-1)


@pytest.mark.parametrize("bad", ["", "a/b", "../x", "<img>", "a b", "x" * 101, ".hidden"])
def test_bad_versions_are_refused(bad: str) -> None:
    with pytest.raises(UserError, match="release version"):
        check_version(bad)


@pytest.mark.parametrize("bad", ["", "a/b", "a b", "<script>", "-x"])
def test_bad_series_names_are_refused(bad: str) -> None:
    with pytest.raises(UserError, match="series name"):
        check_series_name(bad)


def test_good_names() -> None:
    assert check_version("56.0.2909.0") == "56.0.2909.0"
    assert check_version("20161020030211") == "20161020030211"
    assert check_series_name("chromium-linux.example-load") == "chromium-linux.example-load"
