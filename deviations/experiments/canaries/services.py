"""Writes of canaries: create one, receive a batch (atomic, idempotent by its id), continue
one after its decision, subscribe. The state update is ``state.apply_pending`` (a task).

The same functions serve the page, the API and the CLI.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import connection, transaction
from django.utils import timezone

from deviations.alerts.services import speaks_for
from deviations.core import access
from deviations.core.access import ForbiddenError
from deviations.core.errors import UserError
from deviations.core.models import Ownership
from deviations.core.packing import pack
from deviations.core.queue import enqueue
from deviations.core.text import has_control
from deviations.experiments.canaries import tasks
from deviations.experiments.canaries.models import Canary, CanaryBatch, CanaryState
from deviations.stats.resolution import MAX_RESOLUTION, MIN_RESOLUTION
from deviations.stats.sequential import inter_arrival_times
from ingest.services import Observations

#: A batch holds at most this many values: a larger one is refused whole (send several).
MAX_BATCH = 100_000
_NAME_CHARS = 200
#: What a JSON number decodes to (a bool is an int subclass, but not a number here).
_NUMBER_TYPES = {float, int}


class ConflictError(UserError):
    """The request contradicts what is stored (HTTP 409)."""

    status = 409
    code = "conflict"


class DecidedError(ConflictError):
    """The canary has decided and takes no more observations (HTTP 409)."""

    code = "decided"


@dataclass(frozen=True)
class Receipt:
    seq: int
    n: int
    duplicate: bool


def _email_list(emails: Any, field: str) -> list[str]:
    if emails is None:
        return []
    if isinstance(emails, str):
        emails = [e for e in emails.replace(";", ",").split(",")]
    out = []
    for raw in emails:
        email = str(raw).strip().lower()
        if not email:
            continue
        try:
            validate_email(email)
        except ValidationError as exc:
            raise UserError(f"{field}: {raw!r} is not an email address") from exc
        if email not in out:
            out.append(email)
    return out


def create_canary(
    name: str, *, bad: str, alpha: float = 0.05, tau: float | None = None,
    count: bool = False, metric: str = "", unit: str = "", quantile: float = 0.95,
    method: str | None = None, quantiles: Any = None,
    min_effect: float | None = None, owners: Any = None, user: Any = None,
    resolution: float = Canary.DEFAULT_RESOLUTION,
) -> Canary:
    """Check every field, then store the canary and its empty state.

    ``method`` None: the DKW test when a tolerance ``tau`` or ``quantiles`` ask for it (only
    it accepts, and the quantiles ride on its data), otherwise ``Canary.DEFAULT_METHOD``."""
    name = (name or "").strip()
    if not name or len(name) > _NAME_CHARS:
        raise UserError(f"name: 1 to {_NAME_CHARS} characters")
    if bad not in (Canary.HIGHER, Canary.LOWER, Canary.ANY):
        raise UserError("bad: 'higher', 'lower' or 'any' (which direction is bad)")
    if not (isinstance(alpha, int | float) and 0.0 < alpha < 0.5):
        raise UserError("alpha: a probability in (0, 0.5), e.g. 0.05")
    if tau is not None and not (isinstance(tau, int | float) and 0.0 < tau < 1.0):
        raise UserError("tau: a difference of distribution functions in (0, 1), e.g. 0.1")
    if method is None or method == "":
        method = Canary.DKW if tau is not None or quantiles else Canary.DEFAULT_METHOD
    if method not in (Canary.RANKS, Canary.DKW, Canary.SIGNS):
        raise UserError("method: 'ranks' (rank betting test), 'dkw' (distribution "
                        "functions) or 'signs' (sign test)")
    if method in (Canary.SIGNS, Canary.RANKS) and tau is not None:
        raise UserError(f"tau: the {'sign' if method == Canary.SIGNS else 'rank betting'} "
                        "test only rejects; a tolerance needs method 'dkw'")
    if not (isinstance(quantile, int | float) and 0.0 < quantile < 1.0):
        raise UserError("quantile: a probability in (0, 1), e.g. 0.95")
    judged_on = _quantile_list(quantiles)
    if judged_on and (method != Canary.DKW or tau is not None):
        raise UserError("quantiles: they decide the canary themselves; leave method 'dkw' "
                        "and tau empty")
    if not (isinstance(resolution, int | float) and (
            resolution == 0 or MIN_RESOLUTION <= resolution <= MAX_RESOLUTION)):
        raise UserError(f"resolution: 0 (exact) or a relative step in [{MIN_RESOLUTION:g}, "
                        f"{MAX_RESOLUTION:g}], e.g. 0.0001")
    if min_effect is not None and not (
        isinstance(min_effect, int | float) and math.isfinite(min_effect) and min_effect > 0
    ):
        raise UserError("min_effect: a positive change in the metric's unit")
    for field, value, limit in (("metric", metric, 200), ("unit", unit, 40)):
        if len(value or "") > limit:
            raise UserError(f"{field}: at most {limit} characters")
    for field, value in (("name", name), ("metric", metric), ("unit", unit)):
        if has_control(value or ""):
            # PostgreSQL's text cannot hold NUL (a 500 there); no control character
            # belongs in a name shown on pages and in emails either.
            raise UserError(f"{field}: no control characters (tab, line break, NUL)")
    with transaction.atomic():
        canary = Canary.objects.create(
            name=name, bad=bad, alpha=float(alpha), tau=None if tau is None else float(tau),
            count=bool(count), metric=(metric or "").strip(), unit=(unit or "").strip(),
            quantile=float(quantile), method=method, quantiles=judged_on,
            resolution=float(resolution),
            min_effect=None if min_effect is None else float(min_effect),
            owners=_email_list(owners, "owners"),
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        CanaryState.objects.create(canary=canary)
        # Its creator owns it: only owners (and staff) send batches, continue it, triage
        # its alert (core.access.check_canary; issue 23).
        access.claim(user, Ownership.CANARY, [str(canary.pk)])
    return canary


#: Quantiles a canary can be judged on at most (each is tested at alpha / K).
MAX_QUANTILES = 10


def _quantile_list(quantiles: Any) -> list[float]:
    """Distinct probabilities in (0, 1), sorted; ``None`` or empty: none."""
    if quantiles is None:
        return []
    if not isinstance(quantiles, list | tuple) or len(quantiles) > MAX_QUANTILES or any(
        isinstance(q, bool) or not isinstance(q, int | float) or not 0.0 < q < 1.0
        for q in quantiles
    ):
        raise UserError(f"quantiles: at most {MAX_QUANTILES} probabilities in (0, 1), e.g. "
                        "[0.5, 0.9, 0.99]")
    judged_on = sorted({round(float(q), 6) for q in quantiles})
    if len(judged_on) != len(quantiles):
        raise UserError("quantiles: each at most once")
    return judged_on


def _finite_array(values: Any, field: str) -> np.ndarray:
    """The values as float64, or a ``UserError`` naming the first bad one. Checked whole
    (numpy), element by element only to name what is wrong."""
    if not isinstance(values, list | tuple | np.ndarray):
        raise UserError(f"{field}: a list of numbers")
    if len(values) > MAX_BATCH:
        raise UserError(f"{field}: at most {MAX_BATCH:,} per batch (send several batches)")
    if isinstance(values, np.ndarray):
        if values.dtype.kind not in "fiu":
            raise UserError(f"{field}: an array of numbers, not {values.dtype}")
        array = values.astype(np.float64, copy=False)
    elif set(map(type, values)) <= _NUMBER_TYPES:
        array = np.asarray(values, dtype=np.float64)
    else:
        for i, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise UserError(f"{field}[{i}]: {v!r} is not a number")
        array = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(array)
    if not finite.all():
        raise UserError(f"{field}[{int(np.argmin(finite))}]: not a finite number")
    return array


def _digest(arm: str, values: np.ndarray | None, timestamps: np.ndarray | None) -> str:
    h = hashlib.sha256(arm.encode())
    for part in (values, timestamps):
        h.update(b"|" if part is None else b"|" + pack(part))
    return h.hexdigest()


def _seen(canary_id: int, batch_id: str, digest: str) -> Receipt | None:
    """The receipt of a batch id already stored with the same data; ``ConflictError`` if
    stored with other data; None if new."""
    seen = (
        CanaryBatch.objects.filter(canary_id=canary_id, batch_id=batch_id)
        .values_list("seq", "n", "digest").first()
    )
    if seen is None:
        return None
    if seen[2] != digest:
        raise ConflictError(
            f"batch {batch_id!r} was already received with other data: use a new batch id "
            "for new observations"
        )
    return Receipt(seq=seen[0], n=seen[1], duplicate=True)


@dataclass(frozen=True)
class _Locked:
    """The canary row as a batch needs it, read under its lock."""

    count: bool
    continued: bool
    batches_received: int
    last_time_a: float | None
    last_time_b: float | None
    update_queued: bool
    decision: str
    taken: bool  # the batch id is already stored


def _lock(canary_id: int, batch_id: str) -> _Locked | None:
    """Lock the canary's row and read what a batch needs, the state's decision and whether
    the batch id is taken, in one round trip.

    Written in SQL: the ORM's compilation of this query (a join, a subquery, the lock
    clause) cost ~1.2 ms of CPU per batch, ten times its execution. NO KEY UPDATE: rows the
    task inserts that refer to the canary (points, checkpoints) take KEY SHARE locks, which
    this must not wait for; the state is read, not locked (the task holds it while it
    updates). SQLite has no row locks: its transactions are serialised whole.
    """
    q = connection.ops.quote_name
    canary, state, batch = (q(m._meta.db_table) for m in (Canary, CanaryState, CanaryBatch))
    c = {f: q(Canary._meta.get_field(f).column) for f in (
        "id", "count", "continued", "batches_received", "last_time_a", "last_time_b",
        "update_queued")}
    s_canary, s_decision = (q(CanaryState._meta.get_field(f).column)
                            for f in ("canary", "decision"))
    b_canary, b_id = (q(CanaryBatch._meta.get_field(f).column) for f in ("canary", "batch_id"))
    lock = " FOR NO KEY UPDATE OF c" if connection.vendor == "postgresql" else ""
    # Only the models' own quoted table and column names are formatted in; values are
    # parameters.
    sql = (
        f"SELECT c.{c['count']}, c.{c['continued']}, c.{c['batches_received']}, "  # noqa: S608
        f"c.{c['last_time_a']}, c.{c['last_time_b']}, c.{c['update_queued']}, "
        f"s.{s_decision}, EXISTS (SELECT 1 FROM {batch} b "
        f"WHERE b.{b_canary} = c.{c['id']} AND b.{b_id} = %s) "
        f"FROM {canary} c JOIN {state} s ON s.{s_canary} = c.{c['id']} "
        f"WHERE c.{c['id']} = %s{lock}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [batch_id, canary_id])
        row = cursor.fetchone()
    if row is None:
        return None
    return _Locked(bool(row[0]), bool(row[1]), int(row[2]), row[3], row[4], bool(row[5]),
                   str(row[6]), bool(row[7]))


def receive_batch(
    canary_id: int, batch_id: str, arm: str, values: Any = None, timestamps: Any = None,
) -> Receipt:
    """Store one batch whole, or refuse it whole with a ``UserError`` naming the field.

    Idempotent by ``batch_id``: the same batch sent again is a duplicate and changes
    nothing; another batch under a used id is a 409. A canary that has decided takes no
    more observations (409) unless it was continued. Queues the state update on commit,
    unless a message already queued will see this batch (``Canary.update_queued``).
    """
    batch_id = (batch_id or "").strip() if isinstance(batch_id, str) else ""
    if not batch_id or len(batch_id) > 200:
        raise UserError("batch: a client id of 1 to 200 characters")
    if has_control(batch_id):  # NUL: PostgreSQL's text cannot hold it
        raise UserError("batch: no control characters (tab, line break, NUL)")
    if arm not in ("A", "B"):
        raise UserError("arm: 'A' (control) or 'B' (candidate)")
    vals = None if values is None else _finite_array(values, "values")
    times = None if timestamps is None else _finite_array(timestamps, "timestamps")
    digest = _digest(arm, vals, times)
    with transaction.atomic():
        canary = _lock(canary_id, batch_id)
        if canary is None:
            raise UserError(f"no canary {canary_id}", status=404, code="not_found")
        if canary.taken:
            seen = _seen(canary_id, batch_id, digest)
            assert seen is not None  # the row lock keeps the batch from going away
            return seen
        if canary.decision != "continue" and not canary.continued:
            raise DecidedError(
                f"canary {canary_id} has decided ({canary.decision}) and takes no more "
                "observations; continue it first (the page's Continue button or POST "
                ".../continue)"
            )
        last_field = "last_time_a" if arm == "A" else "last_time_b"
        update: dict[str, Any] = {}
        if canary.count:
            if times is None or values is not None:
                raise UserError("a count canary takes 'timestamps' (event times) only, no "
                                "'values'")
            previous = getattr(canary, last_field)
            if times.size and previous is not None and float(times.min()) < previous:
                raise UserError(
                    f"timestamps: {float(times.min())!r} precedes the last event already "
                    f"received for arm {arm} ({previous!r}); send events in time order"
                )
            data = inter_arrival_times(times, previous=previous)
            if times.size:
                update[last_field] = float(times.max())
        else:
            if vals is None:
                raise UserError("values: required (a list of numbers)")
            if times is not None and times.size != vals.size:
                raise UserError(f"timestamps: {times.size} given for {vals.size} values")
            data = vals
        seq = canary.batches_received + 1
        update["batches_received"] = seq
        if not canary.update_queued:
            update["update_queued"] = True
            transaction.on_commit(lambda: enqueue(tasks.update_canary, canary_id))
        _store(canary_id, seq, batch_id, arm, data, digest, update)
    return Receipt(seq=seq, n=int(data.size), duplicate=False)


def _store(canary_id: int, seq: int, batch_id: str, arm: str, data: np.ndarray, digest: str,
           update: dict[str, Any]) -> None:
    """Insert the batch's row and write ``update`` to the canary's row (under its lock).

    Two statements written in SQL, for the reason ``_lock`` gives (the ORM's insert and
    update cost 0.4 ms of CPU per batch together, mostly building them)."""
    q = connection.ops.quote_name
    batch = CanaryBatch._meta
    columns = ["canary", "seq", "batch_id", "arm", "n", "values", "digest", "received"]
    row = [canary_id, seq, batch_id, arm, int(data.size), pack(data), digest,
           connection.ops.adapt_datetimefield_value(timezone.now())]
    sets = ", ".join(f"{q(Canary._meta.get_field(f).column)} = %s" for f in update)
    # Only the models' own quoted table and column names are formatted in; values are
    # parameters.
    insert = (
        f"INSERT INTO {q(batch.db_table)} "  # noqa: S608
        f"({', '.join(q(batch.get_field(c).column) for c in columns)}) "
        f"VALUES ({', '.join(['%s'] * len(columns))})"
    )
    with connection.cursor() as cursor:
        cursor.execute(insert, row)
        cursor.execute(
            f"UPDATE {q(Canary._meta.db_table)} SET {sets} "  # noqa: S608
            f"WHERE {q(Canary._meta.pk.column)} = %s",
            [*update.values(), canary_id],
        )


def continue_canary(canary: Canary) -> None:
    """Take observations again after the decision (the decision itself stays: it was the
    stopping time; the bands keep narrowing and stay valid, being time-uniform)."""
    Canary.objects.filter(pk=canary.pk).update(continued=True)
    canary.continued = True


def subscribe(canary: Canary, email: str, user: Any) -> None:
    """Add an address to those told of the canary's rejection: the user's own, or any
    address for staff (``alerts.services.speaks_for``)."""
    (address,) = _email_list([email], "email") or [""]
    if not address:
        raise UserError("email: required (your account has no email address)")
    if not speaks_for(user, address):
        raise ForbiddenError(f"you may subscribe only your own address, not {address!r}")
    with transaction.atomic():
        locked = Canary.objects.select_for_update().get(pk=canary.pk)
        if address not in locked.subscribers:
            locked.subscribers = [*locked.subscribers, address]
            locked.save(update_fields=["subscribers"])
        canary.subscribers = locked.subscribers


@dataclass(frozen=True)
class Fed:
    batches: int  # new batches stored
    duplicates: int  # batches already received (the same file fed again)
    rows_left: int  # rows not sent because the canary decided meanwhile
    decided: str | None  # the decision that stopped the feed, if one did


def feed(canary: Canary, observations: Observations, source: str, batch_size: int = 1000) -> Fed:
    """Send recorded observations through ``receive_batch``, ``batch_size`` rows at a time
    (each chunk as one batch per arm), as a client of the API would. Batch ids are
    ``<source>:<chunk>:<arm>``, so feeding the same file again sends nothing new."""
    if batch_size < 1:
        raise UserError("batch size: at least 1")
    total = observations.is_b.size
    new = duplicates = 0
    for chunk, start in enumerate(range(0, total, batch_size)):
        part = slice(start, min(total, start + batch_size))
        is_b = observations.is_b[part]
        for arm, mask in (("A", ~is_b), ("B", is_b)):
            if not mask.any():
                continue
            values = timestamps = None
            if canary.count:
                if observations.timestamps is None:
                    raise UserError("a count canary needs a 'timestamp' column")
                timestamps = observations.timestamps[part][mask]
            else:
                if observations.values is None:
                    raise UserError("this canary needs a 'value' column")
                values = observations.values[part][mask]
            try:
                receipt = receive_batch(canary.pk, f"{source}:{chunk}:{arm}", arm, values,
                                        timestamps)
            except DecidedError:
                decision = CanaryState.objects.get(canary=canary).decision
                return Fed(new, duplicates, total - start, decision)
            duplicates += receipt.duplicate
            new += not receipt.duplicate
    return Fed(new, duplicates, 0, None)
