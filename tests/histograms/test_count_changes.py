"""Boolean and enumerated probes are judged on their counts too: a share change found by
the count rule is stored with its kind, shares, interval and clients, and shown in words
(pages, exports, alerts); other histogram types keep the shape rule alone."""

from __future__ import annotations

import json

import numpy as np
import pytest

from deviations.histograms import detection
from deviations.histograms.models import HistogramChange
from deviations.histograms.notify import alert_data
from deviations.histograms.store import store_histogram_file
from tests.conftest import plain_histogram

pytestmark = pytest.mark.django_db

BUILDS, AT = 40, 25


def _records(probe: str, histogram_type: str | None, move: float) -> list[dict]:
    rng = np.random.default_rng(11)
    out = []
    for b in range(BUILDS):
        share = 0.2 + rng.normal(0, 0.002) + (move if b >= AT else 0.0)
        n = 20_000
        true = int(rng.binomial(n, share))
        extra = {"histogram_type": histogram_type} if histogram_type else {}
        out.append(plain_histogram(probe, f"{b + 1:03d}", [n - true, true], **extra))
    return out


def test_boolean_share_change_is_stored_and_worded() -> None:
    records = _records("B_FLAG", "boolean", 0.03) + _records("PLAIN", None, 0.03)
    store_histogram_file(json.dumps(records).encode(), display_name="b.json")
    detection.detect()
    change = HistogramChange.objects.get(probe__name="B_FLAG")
    assert change.kind == "proportion"
    assert change.build_id == f"{AT + 1:03d}"
    assert change.bucket == "true"
    assert change.share_before == pytest.approx(0.2, abs=0.005)
    assert change.share_after == pytest.approx(0.23, abs=0.005)
    assert change.diff_lo < change.share_after - change.share_before < change.diff_hi
    assert change.clients_after == pytest.approx(20_000, rel=0.01)
    words = change.describe()
    assert words.startswith("share of `true` rose from ")
    assert "95% interval of the change +" in words
    data = alert_data(change)
    assert data.unit == "points"
    assert data.distance is None
    assert data.effect == pytest.approx(100 * (change.share_after - change.share_before))
    assert words in data.explanation
    # A 3-point move at 20,000 clients is confirmed by the first look (2 later builds).
    assert change.confirm_builds == 2
    assert "and the 2 following builds confirmed it" in data.explanation
    # A probe without a categorical type keeps the Hellinger rule alone (blind here).
    assert not HistogramChange.objects.filter(probe__name="PLAIN").exists()


def test_count_changes_are_exported_in_words(client) -> None:
    from io import StringIO

    from django.core.management import call_command

    store_histogram_file(json.dumps(_records("B_FLAG", "boolean", -0.03)).encode(),
                         display_name="b.json")
    detection.detect()
    out = StringIO()
    call_command("export_histogram_changes", stdout=out)
    (row,) = json.loads(out.getvalue())
    assert row["kind"] == "proportion"
    assert row["change"].startswith("share of `true` fell from ")
    page = client.get(HistogramChange.objects.get().get_absolute_url())
    assert "share change: share of `true` fell" in page.content.decode()
