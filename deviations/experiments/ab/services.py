"""Writes of A/B runs: store an upload (an A/B file, its A/A file, or both) with its
analysis in one transaction; record a host's A/A floors; change a run's smallest change
that matters. Parsing is ``ingest.services.parse_ab_file``; statistics ``analysis``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from deviations.core import access
from deviations.core.errors import UserError
from deviations.core.models import Ownership
from deviations.core.versions import SERIES_NAME_RE
from deviations.experiments.ab import analysis
from deviations.experiments.ab.models import AAFloorRecord, ABHost, ABRun
from ingest.services import parse_ab_file


@dataclass(frozen=True)
class Stored:
    run: ABRun | None  # the A/B run, or None when only an A/A file was sent
    aa_run: ABRun | None
    created: bool
    moved: list[str]  # metrics whose floor the A/A run moved


def get_host(name: str | None) -> ABHost | None:
    if not name:
        return None
    name = name.strip()
    if not SERIES_NAME_RE.match(name):  # host names travel in URLs, like series names
        raise UserError(
            f"host name {name!r} is not valid: 1 to 100 characters, letters, digits and "
            ". _ -, starting with a letter or digit"
        )
    return ABHost.objects.get_or_create(name=name)[0]


def stored_floors(host: ABHost | None) -> dict[str, analysis.Floor]:
    """The host's current floor per metric: its newest A/A record of each metric."""
    if host is None:
        return {}
    return {
        metric: analysis.Floor(rec.floor, f"stored A/A run #{rec.run_id} of host {host.name}")
        for metric, rec in _latest_records(host).items()
    }


def _latest_records(host: ABHost) -> dict[str, AAFloorRecord]:
    out: dict[str, AAFloorRecord] = {}
    for rec in AAFloorRecord.objects.filter(host=host).select_related("run"):
        out.setdefault(rec.metric, rec)  # ordered newest first per metric
    return out


def _check_min_change(value: float | None) -> float:
    if value is None:
        return analysis.DEFAULT_MIN_CHANGE_PCT
    if not 0 < value <= 1000:
        raise UserError(f"min_change must be a percentage in (0, 1000], got {value:g}")
    return float(value)


def store_upload(
    ab_file: Any | None,
    aa_file: Any | None = None,
    *,
    host: str | None = None,
    ab_name: str | None = None,
    aa_name: str | None = None,
    min_change_pct: float | None = None,
    user: Any = None,
) -> Stored:
    """Parse, analyse and store an A/B file and/or an A/A file of one host.

    Both files are parsed before anything is written; either failing stores nothing. The
    A/A file's floors become the host's (each flagged ``moved`` when its A/A differences
    differ from the previous A/A run's in spread or centre: ``analysis.floor_moved``) and
    are applied to the A/B run; without one, the host's stored floors are. The same
    upload sent again to the same host returns the stored run (``created`` False).
    """
    if ab_file is None and aa_file is None:
        raise UserError("send an A/B file, an A/A file, or both")
    pct = _check_min_change(min_change_pct)
    ab = parse_ab_file(ab_file, name=ab_name) if ab_file is not None else None
    aa = parse_ab_file(aa_file, name=aa_name) if aa_file is not None else None
    if aa is not None and host is None and ab is None:
        raise UserError("an A/A run alone must name its host: its floor is stored for it")
    user_id = user.pk if getattr(user, "is_authenticated", False) else None
    if user is not None and host:
        # A host's A/A floor decides what its A/B runs call "within floor": its owners
        # (whoever uploaded to it first, and those they add) write to it (issue 23). The
        # CLI (user None) needs shell access and is not checked.
        access.check_write(user, Ownership.AB_HOST, [host.strip()])
    with transaction.atomic():
        h = get_host(host)
        if h is not None and user is not None:
            access.claim(user, Ownership.AB_HOST, [h.name])
        aa_run, moved = (None, []) if aa is None else _store_aa(aa, h, user_id)
        if ab is None:
            return Stored(None, aa_run, aa_run is not None, moved)
        key = f"{ab.sha256}:{aa.sha256 if aa else ''}"
        existing = ABRun.objects.filter(host=h, kind=ABRun.AB, content_key=key).first()
        if existing is not None:
            return Stored(existing, aa_run, False, moved)
        if aa_run is not None:
            floors = {
                m: analysis.Floor(f["floor"], f"A/A run #{aa_run.pk} uploaded with it")
                for m, f in aa_run.result["floors"].items()
            }
        else:
            floors = stored_floors(h)
        data = ab.to_dict()
        run = ABRun.objects.create(
            host=h, kind=ABRun.AB, name=ab.name[:255], content_key=key,
            aa_name=(aa.name[:255] if aa else ""), aa_run=aa_run, baseline=ab.baseline,
            data=data, result=analysis.analyse(data, floors, min_change_pct=pct),
            min_change_pct=pct, uploaded_by_id=user_id,
        )
    return Stored(run, aa_run, True, moved)


def _store_aa(aa: Any, host: ABHost | None, user_id: int | None) -> tuple[ABRun, list[str]]:
    key = f"{aa.sha256}:"
    existing = ABRun.objects.filter(host=host, kind=ABRun.AA, content_key=key).first()
    if existing is not None:
        return existing, []
    data = aa.to_dict()
    floors = analysis.aa_floors(data)
    run = ABRun.objects.create(
        host=host, kind=ABRun.AA, name=aa.name[:255], content_key=key, baseline=aa.baseline,
        data=data, result={"floors": floors}, uploaded_by_id=user_id,
    )
    moved: list[str] = []
    if host is not None:
        previous = _latest_records(host)
        for metric, f in floors.items():
            prev = previous.get(metric)
            change = None
            if prev is not None:
                prev_floor = prev.run.result.get("floors", {}).get(metric, {})
                change = analysis.floor_moved(prev_floor.get("differences"), f["differences"])
            is_moved = bool(change and change["moved"])
            if is_moved:
                moved.append(metric)
            AAFloorRecord.objects.create(
                host=host, metric=metric, run=run, floor=f["floor"], lo=f["lo"], hi=f["hi"],
                estimate=f["estimate"], n=f["n"], confidence=f["confidence"],
                biased=f["biased"], previous=None if prev is None else prev.floor,
                moved=is_moved, change=change,
            )
        run.result = {**run.result, "moved": moved}
        run.save(update_fields=["result"])
    return run, moved


def check_run_write(user: Any, run: ABRun) -> None:
    """Who may change a stored run: the owners of its host, or (no host) whoever uploaded
    it; staff always (``core.access``)."""
    if run.host_id is not None:
        access.check_write(user, Ownership.AB_HOST, [run.host.name])
        return
    if not getattr(user, "is_authenticated", False):
        raise access.ForbiddenError("sign in to change a run")
    if user.is_staff or user.is_superuser or run.uploaded_by_id in (None, user.pk):
        return
    raise access.ForbiddenError("this run was uploaded by another user: only they or an "
                                "administrator may change it")


def set_min_change(run: ABRun, min_change_pct: float, user: Any = None) -> ABRun:
    """Re-analyse a stored A/B run against another smallest change that matters (same
    floors as before). ``user``: checked with :func:`check_run_write` (None: the CLI)."""
    if user is not None:
        check_run_write(user, run)
    if run.kind != ABRun.AB:
        raise UserError("only an A/B run has a smallest change that matters")
    pct = _check_min_change(min_change_pct)
    floors = {
        c["metric"]: analysis.Floor(c["aa_floor"], c["floor_source"])
        for c in run.result.get("comparisons", []) if c["aa_floor"] is not None
    }
    run.result = analysis.analyse(run.data, floors, min_change_pct=pct)
    run.min_change_pct = pct
    run.save(update_fields=["result", "min_change_pct"])
    return run
