import pytest
from django.core.management import call_command

from deviations.management.commands.demo import RESULTS_SERIES, SERIES
from deviations.traces import demo
from deviations.traces.models import Release, Run, Series

pytestmark = pytest.mark.django_db


def test_demo_fills_a_series_once(capsys) -> None:
    call_command("demo", "--runs", "2")
    series = Series.objects.get(name=SERIES)
    assert Release.objects.filter(series=series).count() == len(demo.RELEASES)
    assert Run.objects.filter(series=series, status=Run.DONE).count() == 2 * len(demo.RELEASES)
    assert not Run.objects.exclude(status=Run.DONE).exists()
    call_command("demo")
    assert "already present" in capsys.readouterr().out
    assert Run.objects.filter(series=series).count() == 2 * len(demo.RELEASES)
    # The demo metric series: one results file of every release, each metric 5 values.
    results = Series.objects.get(name=RESULTS_SERIES)
    assert results.kind == Series.METRICS
    assert Run.objects.filter(series=results).count() == len(demo.RESULTS_RELEASES)


def test_planted_changes_show_in_the_self_times(tmp_path) -> None:
    """The generator plants what its docstring says (checked on the parsed traces)."""
    import numpy as np

    from ingest.traces import parse_trace

    def median_self(name: str, release: str) -> float:
        values = []
        for run in runs:
            if run.release == release:
                times = parse_trace(run.path)
                values.append(times.self_us[times.names.index(name)])
        return float(np.median(values))

    runs = demo.write_demo_traces(tmp_path, runs_per_release=3)
    before, after = demo.RELEASES[7], demo.RELEASES[8]
    assert median_self("Paint", after) / median_self("Paint", before) == pytest.approx(2, rel=0.25)
    assert median_self("Layout", demo.RELEASES[0]) == pytest.approx(
        median_self("Layout", demo.RELEASES[1]), rel=0.25
    )
