"""Culprit ranges: an alert's last good and first bad release, their revisions, the
series' log link (``alerts.selectors.culprit_range``)."""

from __future__ import annotations

import pytest

from deviations.alerts.models import Alert
from deviations.alerts.recording import record
from deviations.alerts.selectors import (
    CulpritRange,
    culprit_range,
    culprit_ranges,
    group_range,
    log_url,
)
from deviations.traces.models import Release, Series
from tests.alerts.test_groups import trace

pytestmark = pytest.mark.django_db


@pytest.fixture
def series() -> Series:
    """Series "s" with releases 1..6."""
    s = Series.objects.create(name="s")
    for v in range(1, 7):
        Release.objects.create(series=s, version=str(v))
    return s

CHROMIUM = "https://chromium.googlesource.com/chromium/src/+log/{from}..{to}"


def _alert(series: Series, a: str, b: str, function: str = "Paint") -> Alert:
    record([trace(series, function, a, b)])
    return Alert.objects.get(subject=function, from_label=a, to_label=b)


def test_a_range_is_named_by_revisions_and_linked_through_the_template(series) -> None:
    Release.objects.filter(series=series, version="3").update(revision="r1234")
    Release.objects.filter(series=series, version="4").update(revision="r1240")
    series.log_url_template = CHROMIUM
    series.save()
    got = culprit_range(_alert(series, "3", "4"))
    assert got == CulpritRange(
        series="s", last_good="3", first_bad="4", last_good_revision="r1234",
        first_bad_revision="r1240",
        log_url="https://chromium.googlesource.com/chromium/src/+log/r1234..r1240",
        text="r1234..r1240")


def test_without_revisions_the_versions_are_named_and_nothing_is_linked(series) -> None:
    series.log_url_template = CHROMIUM
    series.save()
    Release.objects.filter(series=series, version="4").update(revision="abc")
    got = culprit_range(_alert(series, "3", "4"))
    assert (got.text, got.log_url, got.last_good_revision, got.first_bad_revision) == (
        "3..4", None, None, "abc")


def test_without_a_template_revisions_are_named_without_a_link(series) -> None:
    Release.objects.filter(series=series, version="3").update(revision="a1")
    Release.objects.filter(series=series, version="4").update(revision="b2")
    got = culprit_range(_alert(series, "3", "4"))
    assert (got.text, got.log_url) == ("a1..b2", None)


def test_revisions_are_url_quoted_in_the_link() -> None:
    url = log_url("https://example.org/compare/{from}...{to}", "a/b?{to}", "c&d#e")
    assert url == "https://example.org/compare/a%2Fb%3F%7Bto%7D...c%26d%23e"


def test_ranges_of_many_alerts_and_of_a_group(series) -> None:
    for v, rev in (("2", "aa"), ("3", "bb"), ("5", "dd")):
        Release.objects.filter(series=series, version=v).update(revision=rev)
    series.log_url_template = "https://github.com/o/r/compare/{from}...{to}"
    series.save()
    first, second = _alert(series, "2", "3"), _alert(series, "3", "4", "Layout")
    ranges = culprit_ranges([first, second])
    assert ranges[first.pk].log_url == "https://github.com/o/r/compare/aa...bb"
    assert ranges[second.pk].text == "3..4"
    # (2, 3] and (2, 5] overlap: one group, whose range is their union.
    wide = _alert(series, "2", "5", "Style")
    assert wide.group_id == first.group_id
    got = group_range(wide.group)
    assert (got.text, got.log_url) == ("aa..dd", "https://github.com/o/r/compare/aa...dd")


def test_a_release_deleted_since_leaves_the_versions() -> None:
    s = Series.objects.create(name="gone", log_url_template=CHROMIUM)
    for v in ("1", "2"):
        Release.objects.create(series=s, version=v, revision=f"r{v}")
    a = _alert(s, "1", "2")
    Release.objects.filter(series=s, version="1").delete()
    got = culprit_range(a)
    assert (got.text, got.log_url) == ("1..2", None)
