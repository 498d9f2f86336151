"""The shared text helpers: escaping for Plotly, one-line headers, CSV cells."""

from __future__ import annotations

import io

import pytest

from deviations.core.tables import write_csv
from deviations.core.text import csv_cell, one_line, plotly_text


def test_plotly_text_escapes_markup_and_quotes() -> None:
    assert plotly_text("<b onclick='x'>&\"") == "&lt;b onclick=&#39;x&#39;&gt;&amp;&#34;"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [("nl\nBcc: x@y", "nl Bcc: x@y"), ("a\r\n\tb", "a b"), ("nul\x00x", "nul x"),
     ("ls\u2028ps\u2029", "ls ps "), ("plain", "plain")],
)
def test_one_line(raw: str, shown: str) -> None:
    assert one_line(raw) == shown


@pytest.mark.parametrize("name", ["=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)",
                                  "\t=1", "\r=1"])
def test_formulas_become_text(name: str) -> None:
    assert csv_cell(name) == "'" + name


@pytest.mark.parametrize("value", ["Paint", "a=b", "", -3.5, 7, None])
def test_other_cells_are_unchanged(value: object) -> None:
    assert csv_cell(value) == value


def test_write_csv() -> None:
    out = io.StringIO()
    write_csv(out, [{"function": "=1+2", "diff": -3.5, "extra": "x"}, {"function": "ok"}],
              ["function", "diff"])
    assert out.getvalue() == "function,diff\n'=1+2,-3.5\nok,\n"


def test_p_values_keep_two_significant_digits_and_are_never_zero() -> None:
    from deviations.templatetags.figures import pvalue

    assert pvalue(7.31e-5) == "7.3e-05"
    assert pvalue(3.14159e-9) == "3.1e-09"
    assert pvalue(0.0) == "< 1e-300"
    assert pvalue(0.0421) == "0.042"
    assert pvalue(0.5) == "0.5"
    assert pvalue(None) == ""
