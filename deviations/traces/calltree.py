"""Why a function got slower: its runs' call trees compared (a read: no writes here).

Each done run of a trace series stores its call tree aggregated by (caller, callee)
(``RunCalls``, beside ``RunTimes``). Two sets of runs (two releases, or the two levels a
flag compared) are read and compared on demand by
:func:`deviations.stats.attribution.attribute_change`, as the compare view compares
functions: the change of a function's total time split among its self time and callees,
each with the interval of its median difference, Benjamini–Hochberg over the comparison's
family, and its share of the mean change. Differences are later − earlier.

- :func:`function_attribution`: one function, its callees (the function page, per flag);
- :func:`release_calltree`: every caller's decomposition between two releases and the call
  tree drawn from the thread root or a function (the compare view's diff, the API, the
  CLI). The stored graph is aggregated by (caller, callee), not by path: where a function
  has several callers, its callees' time below each caller is its aggregate split in
  proportion to the time that caller gives it (said on the page).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from deviations.core.errors import UserError
from deviations.stats.attribution import TOTAL, Attribution, attribute_change
from deviations.stats.intervals import MIN_RUNS
from deviations.stats.releases import IMPROVEMENT, NO_VERDICT, REGRESSION, verdict_name
from deviations.stats.twosample import TWO_SAMPLE_VERDICTS
from deviations.traces import selectors
from deviations.traces.models import Release, Run, RunCalls, RunTimes, Series
from deviations.traces.store import binary_values

FDR: Final = 0.05
"""False-discovery rate of the Benjamini–Hochberg step over the comparison's rows."""
MAX_DEPTH: Final = 8
"""Levels of the drawn tree below its root: deeper frames are cut (said on the page)."""
MAX_NODES: Final = 400
"""Frames drawn at most (largest first): an icicle of thousands of slivers is unreadable
and slow to draw."""
MIN_SHARE: Final = 0.002
"""Frames under 0.2% of the root's time are cut: below a pixel on a 500 px wide chart."""
MAX_TABLE_ROWS: Final = 500
"""Edges in the compare page's table, the largest |difference| first (the API and the CLI
give every one): a trace of a million distinct caller–callee pairs would not fit a page."""
ROOT_NAME: Final = "(measured threads)"
SELF_NAME: Final = "(self)"
#: The longest stored function name: ingest shortens longer ones to their first
#: MAX_NAME_CHARS characters, "…" and 8 hex digits (ingest.traces).
MAX_FUNCTION_CHARS: Final = 1_000 + 9

FIELDS = ["caller", "callee", "base_median", "base_lo", "base_hi", "new_median", "new_lo",
          "new_hi", "diff", "diff_lo", "diff_hi", "change_pct", "q_value", "significant",
          "verdict", "share_of_caller", "base_mean", "new_mean"]
"""The API's and CLI's columns per edge (µs; ``share_of_caller``: the edge's part of its
caller's mean change, from means, which add)."""


class CallTreeError(UserError):
    """A call tree that cannot be compared: the message says why (HTTP 400; 404 unknown)."""

    code = "calltree"


def no_tree_words(series: Series, runs: int) -> str:
    """What a page says about runs stored before their call tree was."""
    return (f"{runs} run{'s' if runs != 1 else ''} ha{'ve' if runs != 1 else 's'} no call "
            "tree (ingested before call trees were stored); `manage.py reingest --series "
            f"{series.name}` adds it (give it the thread options of the ingest, if any)")


@dataclass(frozen=True)
class _Runs:
    """Done runs that have a call tree: function times and edges as (rows, runs) matrices."""

    fids: np.ndarray  # sorted distinct function ids
    self_us: np.ndarray
    total_us: np.ndarray
    pairs: np.ndarray  # (edges, 2): caller id (RunCalls.ROOT for a thread's top), callee id
    edge_us: np.ndarray
    runs: int
    without_tree: int


def _load(series: Series, release_ids: list[int]) -> _Runs:
    run_ids = list(Run.objects.filter(series=series, status=Run.DONE,
                                      release_id__in=release_ids)
                   .order_by("created", "id").values_list("id", flat=True))
    calls = {run_id: rest for run_id, *rest in binary_values(
        RunCalls.objects.filter(run__in=run_ids), ("run_id", "caller_ids", "callee_ids",
                                                    "time_us"))}
    with_tree = [r for r in run_ids if r in calls]
    times = {run_id: rest for run_id, *rest in binary_values(
        RunTimes.objects.filter(run__in=with_tree), ("run_id", "function_ids", "self_us",
                                                      "total_us"))}
    per_run = []
    for r in with_tree:
        fids, s, t = times[r]
        caller, callee, us = calls[r]
        per_run.append((np.frombuffer(bytes(fids), RunTimes.INT),
                        np.frombuffer(bytes(s), RunTimes.FLOAT),
                        np.frombuffer(bytes(t), RunTimes.FLOAT),
                        np.frombuffer(bytes(caller), RunCalls.INT),
                        np.frombuffer(bytes(callee), RunCalls.INT),
                        np.frombuffer(bytes(us), RunCalls.FLOAT)))
    n = len(per_run)
    fids = np.unique(np.concatenate([p[0] for p in per_run])) if n else np.zeros(0, np.int64)
    keys = [p[3] * (1 << 32) + p[4] for p in per_run]
    pair_keys = np.unique(np.concatenate(keys)) if n else np.zeros(0, np.int64)
    self_us, total_us = np.zeros((len(fids), n)), np.zeros((len(fids), n))
    edge_us = np.zeros((len(pair_keys), n))
    for j, (f, s, t, _, _, us) in enumerate(per_run):
        rows = np.searchsorted(fids, f)
        self_us[rows, j], total_us[rows, j] = s, t
        edge_us[np.searchsorted(pair_keys, keys[j]), j] = us
    pairs = np.stack([pair_keys >> 32, pair_keys & 0xFFFFFFFF], axis=1)
    return _Runs(fids, self_us, total_us, pairs, edge_us, n, len(run_ids) - n)


def _rows(series: Series, a: _Runs, b: _Runs, callers: np.ndarray | None
          ) -> tuple[list[tuple[str, int, int]], np.ndarray, np.ndarray, np.ndarray]:
    """The family compared: per caller (every one, or ``callers``) its total, its self time
    and its edges; the thread root's total is the sum of its edges. Rows are (kind,
    caller, callee) with kind "total", "self" or "edge"; absent functions are NaN rows."""
    pairs = np.unique(np.concatenate([a.pairs, b.pairs]), axis=0).reshape(-1, 2)
    if callers is not None:
        pairs = pairs[np.isin(pairs[:, 0], callers)]
    rows: list[tuple[str, int, int]] = []
    owner: list[int] = []
    va: list[np.ndarray] = []
    vb: list[np.ndarray] = []

    index = [{(int(f), int(c)): k for k, (f, c) in enumerate(side.pairs.tolist())}
             for side in (a, b)]

    def value(side: _Runs, kind: str, caller: int, callee: int) -> np.ndarray:
        if kind == "edge":
            at = index[0 if side is a else 1].get((caller, callee))
            return side.edge_us[at] if at is not None else np.zeros(side.runs)
        if caller == RunCalls.ROOT:
            return side.edge_us[side.pairs[:, 0] == caller].sum(axis=0)
        row = int(np.searchsorted(side.fids, caller))
        if row == len(side.fids) or side.fids[row] != caller:
            return np.full(side.runs, np.nan)
        values: np.ndarray = (side.total_us if kind == "total" else side.self_us)[row]
        return values

    every = np.unique(pairs[:, 0]) if callers is None else np.unique(callers)
    for caller in every.tolist():
        total = len(rows)
        kinds = [("total", caller, 0)] + ([("self", caller, 0)] if caller != RunCalls.ROOT
                                          else [])
        kinds += [("edge", caller, int(c)) for c in pairs[pairs[:, 0] == caller, 1].tolist()]
        for kind, f, c in kinds:
            rows.append((kind, f, c))
            owner.append(TOTAL if kind == "total" else total)
            va.append(value(a, kind, f, c))
            vb.append(value(b, kind, f, c))
    shape_a, shape_b = (0, a.runs), (0, b.runs)
    return (rows, np.array(owner, dtype=np.int64),
            np.array(va).reshape(-1, a.runs) if va else np.zeros(shape_a),
            np.array(vb).reshape(-1, b.runs) if vb else np.zeros(shape_b))


def _number(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


@dataclass(frozen=True)
class CallTreeComparison:
    """Rows of the family (totals, self times, edges) compared, with names."""

    series: Series
    base_label: str
    new_label: str
    runs_base: int
    runs_new: int
    without_tree: int
    rows: list[tuple[str, int, int]]
    result: Attribution
    names: dict[int, str]

    def name(self, function_id: int) -> str:
        return ROOT_NAME if function_id == RunCalls.ROOT else self.names.get(function_id, "?")

    def row(self, k: int) -> dict[str, Any]:
        c = self.result.comparison
        kind, caller, callee = self.rows[k]
        lo_a, lo_b = np.maximum(c.median_a.lo[k], 0.0), np.maximum(c.median_b.lo[k], 0.0)
        return {
            "kind": kind, "caller": self.name(caller), "caller_id": caller,
            "callee": self.name(callee) if kind == "edge" else None,
            "callee_id": callee if kind == "edge" else None,
            "base_median": _number(c.median_a.estimate[k]), "base_lo": _number(lo_a),
            "base_hi": _number(c.median_a.hi[k]),
            "new_median": _number(c.median_b.estimate[k]), "new_lo": _number(lo_b),
            "new_hi": _number(c.median_b.hi[k]),
            "diff": _number(c.diff.estimate[k]), "diff_lo": _number(c.diff.lo[k]),
            "diff_hi": _number(c.diff.hi[k]),
            "change_pct": _number(100.0 * c.relative[k]),
            "q_value": _number(c.q_value[k]),
            "significant": bool(self.result.significant[k]),
            "verdict": TWO_SAMPLE_VERDICTS[int(c.verdict[k])],
            "share_of_caller": _number(self.result.share[k]),
            "base_mean": _number(self.result.mean_a[k]),
            "new_mean": _number(self.result.mean_b[k]),
        }


def _compare(series: Series, base: list[int], new: list[int], labels: tuple[str, str],
             callers: np.ndarray | None, *, test: str = "auto") -> CallTreeComparison:
    if series.is_metrics:
        raise CallTreeError(f"series {series.name!r} holds benchmark results: it has no "
                            "call tree")
    a, b = _load(series, base), _load(series, new)
    for side, label in ((a, labels[0]), (b, labels[1])):
        if side.runs < MIN_RUNS:
            note = f"; {no_tree_words(series, side.without_tree)}" if side.without_tree else ""
            raise CallTreeError(f"{label} has {side.runs} done run{'s' if side.runs != 1 else ''}"
                                f" with a call tree: a comparison needs at least {MIN_RUNS} on "
                                f"each side{note}")
    rows, owner, va, vb = _rows(series, a, b, callers)
    if not rows:
        raise CallTreeError("no call-tree edge to compare")
    result = attribute_change(va, vb, owner, fdr=FDR,
                              min_relative_change=series.min_relative_change,
                              min_absolute_change=series.min_absolute_change_us,
                              test=test)  # type: ignore[arg-type]
    ids = {x for _, f, c in rows for x in (f, c)} - {RunCalls.ROOT}
    return CallTreeComparison(series, labels[0], labels[1], a.runs, b.runs,
                              a.without_tree + b.without_tree, rows, result,
                              selectors.function_names(series, sorted(ids)))


# --------------------------------------------------------------------------- in words


def time_words(us: float | None, sign: bool = False) -> str:
    """µs as the pages write them: ms from 1 ms, else µs."""
    if us is None:
        return "—"
    fmt = "+,.2f" if sign else ",.2f"
    return f"{us / 1000:{fmt}} ms" if abs(us) >= 1000 else f"{us:{fmt.replace('.2f', '.1f')}} µs"


def _part_words(row: dict[str, Any]) -> str:
    what = "self" if row["kind"] == "self" else f"from `{row['callee']}`"
    pct = f"{row['change_pct']:+.0f}%, " if row["change_pct"] is not None else ""
    sig = "significant" if row["significant"] else "not significant"
    interval = (f"95% interval {time_words(row['diff_lo'], True)} to "
                f"{time_words(row['diff_hi'], True)}")
    deviation = row.get("deviation")
    own = (f"; itself {'an' if deviation == 'improvement' else 'a'} {deviation}"
           if deviation in ("regression", "improvement") else "")
    return f"{time_words(row['diff'], True)} {what} ({pct}{sig}, {interval}{own})"


def words(total: dict[str, Any], parts: list[dict[str, Any]], remainder: float | None,
          shown: int = 4) -> str:
    """"`RunTask` +7.4 ms: 6.1 ms from `V8.Execute` (+38%, significant, …), 0.9 ms self,
    …": the parts that explain the most first (by |share| of the mean change)."""
    head = (f"`{total['caller']}` {time_words(total['diff'], True)} "
            f"(95% interval {time_words(total['diff_lo'], True)} to "
            f"{time_words(total['diff_hi'], True)})")
    listed = "; ".join(_part_words(p) for p in parts[:shown])
    more = f"; {len(parts) - shown} more" if len(parts) > shown else ""
    rest = (f". Medians do not add: {time_words(remainder, True)} of the total's median "
            "change is not in its parts' median changes") if remainder is not None else ""
    return f"{head}: {listed}{more}{rest}."


def _order(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(parts, key=lambda p: (-abs(p["share_of_caller"] or 0.0),
                                        -abs(p["diff"] or 0.0), p["callee"] or ""))


# --------------------------------------------------------------------------- function page


@dataclass(frozen=True)
class FunctionAttribution:
    """One function's change between two sets of runs, split among self time and callees."""

    base_label: str
    new_label: str
    runs_base: int
    runs_new: int
    without_tree: int
    total: dict[str, Any]
    parts: list[dict[str, Any]]  # self and callees, the largest share first
    remainder: float | None
    words: str


def function_attribution(
    series: Series, function_id: int, base: list[Release], new: list[Release], *,
    deviations: dict[int, str] | None = None,
) -> FunctionAttribution:
    """``function_id``'s total-time change from the runs of ``base`` to those of ``new``.

    ``deviations``: each callee's own verdict at the same boundary (function id → verdict),
    shown beside it. Raises ``CallTreeError`` when a side has fewer than two runs with a
    call tree. A function that calls nothing is all self time.
    """
    labels = tuple(_span(rs) for rs in (base, new))
    compared = _compare(series, [r.pk for r in base], [r.pk for r in new],
                        (labels[0], labels[1]), np.array([function_id]))
    rows = [compared.row(k) for k in range(len(compared.rows))]
    for row in rows:
        if row["callee_id"] is not None and deviations:
            row["deviation"] = deviations.get(row["callee_id"])
    total, parts = rows[0], _order(rows[1:])
    remainder = _number(compared.result.remainder[0])
    return FunctionAttribution(labels[0], labels[1], compared.runs_base, compared.runs_new,
                               compared.without_tree, total, parts, remainder,
                               words(total, parts, remainder))


def _span(releases: list[Release]) -> str:
    if len(releases) == 1:
        return releases[0].version
    return f"{releases[0].version} to {releases[-1].version}"


def verdict_words(row: dict[str, Any]) -> str:
    """The flag's own numbers, as its verdict compared them: "+1.18 ms (95% interval
    +0.21 ms to +2.10 ms)"."""
    return (f"{time_words(row['diff'], True)} (95% interval "
            f"{time_words(row.get('diff_lo'), True)} to {time_words(row.get('diff_hi'), True)})")


def runs_disagree(row: dict[str, Any], total: dict[str, Any]) -> bool:
    """True when the runs' comparison of the total (difference of medians over the runs,
    its interval) does not show the flag's side, although the verdict's own comparison
    (the release rule's, e.g. the shift rule's levels of release medians) does: the
    attribution then splits a change that the runs alone do not separate, and the page
    says so instead of printing an interval through zero under a "regression"."""
    lo, hi = total.get("diff_lo"), total.get("diff_hi")
    if lo is None or hi is None:
        return True
    return not (lo > 0 if row["verdict"] == "regression" else hi < 0)


def flag_attributions(series: Series, function_id: int, rows: list[dict[str, Any]],
                      verdicts: dict[str, dict[int, str]]) -> list[dict[str, Any]]:
    """For each regression or improvement of a function's total time (``rows``: the
    function page's rows of the total-time analysis), the attribution over the runs its
    verdict compared (``compared_from`` .. previous against release .. ``compared_to``):
    ``{"release", "previous", "verdict", "attribution" | "error"}``."""
    flagged = [row for row in rows if row["verdict"] in ("regression", "improvement")]
    ends = {v for row in flagged for v in (row["compared_from"] or row["previous"],
                                           row["compared_to"] or row["release"])}
    keys = series.releases.filter(version__in=ends).values_list("sort_key", flat=True)
    # The releases the flags' comparisons span only (a long history: not all of them).
    releases = list(series.releases.filter(sort_key__gte=min(keys, default=""),
                                           sort_key__lte=max(keys, default=""))
                    .order_by("sort_key", "id")) if ends else []
    position = {r.version: k for k, r in enumerate(releases)}
    out = []
    for row in flagged:
        first = position[row["compared_from"] or row["previous"]]
        last = position[row["compared_to"] or row["release"]]
        at = position[row["release"]]
        item: dict[str, Any] = {"release": row["release"], "previous": row["previous"],
                                "verdict": row["verdict"]}
        if row.get("diff") is not None:
            item["verdict_words"] = verdict_words(row)
        try:
            a = item["attribution"] = function_attribution(
                series, function_id, releases[first:at], releases[at:last + 1],
                deviations=verdicts.get(row["release"], {}))
            item["runs_disagree"] = runs_disagree(row, a.total)
        except CallTreeError as exc:
            item["error"] = exc.message
        out.append(item)
    return out


# --------------------------------------------------------------------------- diff view


@dataclass(frozen=True)
class CallTreeDiff:
    """Two releases' call trees compared: every edge and caller, and the tree drawn."""

    comparison: CallTreeComparison
    edges: list[dict[str, Any]]  # every edge, in FIELDS (+ ids)
    totals: dict[int, dict[str, Any]]  # per caller id: its total's row
    remainders: dict[int, float | None]
    root: int  # the function the drawn tree starts from (RunCalls.ROOT: the threads)
    tree: dict[str, list[Any]]  # ids, parents, labels, values, change, significant, edge
    cut: dict[str, int]  # frames not drawn: depth, small, recursion, nodes
    parts: list[dict[str, Any]]  # the root's self time and edges, the largest share first
    words: str

    def part_rows(self) -> list[dict[str, Any]]:
        """The root's parts in FIELDS (the CLI's rows): self time as callee "(self)"."""
        return [dict(p, callee=p["callee"] or SELF_NAME) for p in self.parts]


def release_calltree(series: Series, base: str, new: str, function: str = "", *,
                     test: str = "auto") -> CallTreeDiff:
    """Every caller's decomposition between releases ``base`` and ``new`` (one
    Benjamini–Hochberg family: every total, self time and edge), and the tree from the
    threads' root, or from ``function`` (a name) when given."""
    if test not in ("auto", "rank", "welch", "median"):
        raise CallTreeError(f"unknown test {test!r}: auto, rank, welch or median")
    b_rel = _release(series, base, "base")
    n_rel = _release(series, new, "new")
    if b_rel.pk == n_rel.pk:
        raise CallTreeError(f"base and new are the same release {base!r}: choose two releases")
    root = RunCalls.ROOT
    if len(function) > MAX_FUNCTION_CHARS:
        raise CallTreeError(f"function: a name of {len(function):,} characters; no stored "
                            f"name is longer than {MAX_FUNCTION_CHARS:,}")
    if function:
        found = series.functions.filter(name=function).values_list("id", flat=True).first()
        if found is None:
            raise CallTreeError(f"series {series.name!r} has no function {function!r}",
                                status=404)
        root = int(found)
    compared = _compare(series, [b_rel.pk], [n_rel.pk], (b_rel.version, n_rel.version), None,
                        test=test)
    rows = [compared.row(k) for k in range(len(compared.rows))]
    totals = {r["caller_id"]: r for r in rows if r["kind"] == "total"}
    remainders = {compared.rows[k][1]: _number(compared.result.remainder[k])
                  for k in range(len(rows)) if compared.rows[k][0] == "total"}
    if root not in totals:
        raise CallTreeError(f"{function!r} calls nothing on the measured threads of these "
                            "releases: no tree below it")
    edges = [r for r in rows if r["kind"] == "edge"]
    tree, cut = _tree(compared, rows, root)
    parts = _order([r for r in rows if r["kind"] != "total" and r["caller_id"] == root])
    return CallTreeDiff(compared, edges, totals, remainders, root, tree, cut, parts,
                        words(totals[root], parts, remainders[root]))


def _release(series: Series, version: str, side: str) -> Release:
    if not version:
        raise CallTreeError(f"choose the {side} release (?{side}=VERSION)")
    found = series.releases.filter(version=version).first()
    if found is None:
        raise CallTreeError(f"series {series.name!r} has no release {version!r} ({side})",
                            status=404)
    return found


def _tree(compared: CallTreeComparison, rows: list[dict[str, Any]], root: int
          ) -> tuple[dict[str, list[Any]], dict[str, int]]:
    """The icicle's frames: paths expanded from ``root`` down the aggregated edges, largest
    first. A frame's size is the mean time of both releases ((mean_a + mean_b) / 2: a callee
    that appeared or vanished is drawn too); below the first level a callee's size is its
    aggregate edge scaled by the share of its caller's total that this path gives it."""
    def mean(r: dict[str, Any]) -> float:
        return ((r["base_mean"] or 0.0) + (r["new_mean"] or 0.0)) / 2.0

    totals = {r["caller_id"]: r for r in rows if r["kind"] == "total"}
    below: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        if r["kind"] == "edge":
            below.setdefault(r["caller_id"], []).append(r)
    head = totals[root]
    size0 = mean(head)
    tree: dict[str, list[Any]] = {k: [] for k in ("ids", "parents", "labels", "values",
                                                  "change", "significant", "hover")}
    cut = {"depth": 0, "small": 0, "recursion": 0, "nodes": 0}

    def add(node: str, parent: str, name: str, value: float, row: dict[str, Any]) -> None:
        tree["ids"].append(node)
        tree["parents"].append(parent)
        tree["labels"].append(name)
        tree["values"].append(value)
        tree["change"].append(row["change_pct"])
        tree["significant"].append(row["significant"])
        tree["hover"].append(row)

    add(str(root), "", compared.name(root), size0, head)
    # Breadth-first, the largest frames first, until MAX_NODES.
    frontier: list[tuple[str, int, float, tuple[int, ...]]] = [(str(root), root, size0,
                                                                 (root,))]
    while frontier:
        nxt: list[tuple[str, int, float, tuple[int, ...]]] = []
        for node, fid, size, path in frontier:
            total = mean(totals[fid]) if fid in totals else 0.0
            for r in sorted(below.get(fid, []), key=mean, reverse=True):
                callee = r["callee_id"]
                value = size * mean(r) / total if total > 0 else 0.0
                if value <= 0:
                    continue
                if value < MIN_SHARE * size0:
                    cut["small"] += 1
                elif callee in path:
                    cut["recursion"] += 1
                elif len(path) > MAX_DEPTH:
                    cut["depth"] += 1
                elif len(tree["ids"]) >= MAX_NODES:
                    cut["nodes"] += 1
                else:
                    child = f"{node}/{callee}"
                    add(child, node, r["callee"], value, r)
                    nxt.append((child, callee, value, (*path, callee)))
        frontier = sorted(nxt, key=lambda x: -x[2])
    return tree, cut


def function_flags(series: Series, function: Any, rule: str,
                   columns: tuple[int, int] | None = None) -> dict[str, Any]:
    """The function page's "why": for every regression or improvement of ``function``'s
    total time (median, ``rule``) among the releases ``columns`` (start, stop; all when
    None), its attribution, each callee marked with its own total-time verdict at that
    boundary (read for that boundary only). ``{"flags": [...], "note": str}``; no flags
    for a metric series (no call tree) or before any analysis."""
    if series.is_metrics:
        return {"flags": [], "note": ""}
    mine = selectors.stored_analysis(series, "total", "median", rule,
                                     ("verdict", "first", "last", "diff", "diff_lo",
                                      "diff_hi"), columns=columns,
                                     function_ids=[function.pk], kept=True)
    if mine is None or len(mine["function_ids"]) == 0:
        return {"flags": [], "note": ""}
    start = int(mine["start"])
    versions = selectors.release_versions(mine["release_ids"])
    flagged = [p for p, v in enumerate(mine["verdict"][0].tolist())
               if v in (REGRESSION, IMPROVEMENT)]
    reached = selectors.column_versions(mine, np.concatenate(
        [mine["first"][0, flagged], mine["last"][0, flagged]]))
    rows = [{"release": versions[p + 1], "previous": versions[p],
             "verdict": verdict_name(int(mine["verdict"][0, p])),
             "diff": float(mine["diff"][0, p]), "diff_lo": float(mine["diff_lo"][0, p]),
             "diff_hi": float(mine["diff_hi"][0, p]),
             "compared_from": reached[int(mine["first"][0, p])],
             "compared_to": reached[int(mine["last"][0, p])]} for p in flagged]
    verdicts: dict[str, dict[int, str]] = {}
    for p, row in zip(flagged, rows, strict=True):
        if row["verdict"] in ("regression", "improvement"):
            c = start + p + 1  # the pair ending at this release: its two columns
            found = selectors.stored_analysis(series, "total", "median", rule, ("verdict",),
                                              columns=(c - 1, c + 1), kept=True)
            if found is None:
                return {"flags": [], "note": ""}
            verdicts[row["release"]] = {
                fid: verdict_name(int(v))
                for fid, v in zip(found["function_ids"].tolist(),
                                  found["verdict"][:, 0].tolist(), strict=True)
                if v != NO_VERDICT}
    flags = flag_attributions(series, function.pk, rows, verdicts)
    missing = max((f["attribution"].without_tree for f in flags if "attribution" in f),
                  default=0)
    return {"flags": flags, "note": no_tree_words(series, missing) if missing else ""}


def cut_words(cut: dict[str, int]) -> str:
    """What the drawn tree leaves out, in words ("" when nothing)."""
    parts = [
        (cut["small"], f"under {MIN_SHARE:.1%} of the root's time"),
        (cut["recursion"], "recursive (a function already on the path)"),
        (cut["depth"], f"deeper than {MAX_DEPTH} levels"),
        (cut["nodes"], f"beyond the {MAX_NODES} largest"),
    ]
    said = [f"{n} frame{'s' if n != 1 else ''} {why}" for n, why in parts if n]
    return ("Not drawn: " + "; ".join(said) + " (all are in the table).") if said else ""
