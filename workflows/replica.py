"""Reads a read replica may serve: the heavy read-only pages, and only those.

With DATABASE_REPLICA_URL set (config.settings adds the `replica` database), a
streaming replica of the primary answers the reads of the functions marked
`reads_replica`: the inbox's lists and counts, the console's lists, the SLA
dashboard and the API's lists. Nothing else opts in, so decisions, claims, the
engine and every other page read the primary, and every write goes there
whatever the context (`ReplicaRouter`). Without a replica, nothing here does
anything: every read and write goes to `default`, as before.

The rules, each in one place here:

- Opting in: `reads_replica` marks a read; its ORM queries reach the replica
  through `ReplicaRouter`, its raw SQL through `read_connection()`.
- Reading your own writes: for BATON_REPLICA_PIN_SECONDS after a person's write
  (a POST, PUT, PATCH or DELETE answered below 400), their pages read the
  primary (`ReadYourWritesMiddleware`, by a cookie). So does a read inside a
  transaction on the primary, which must see that transaction's writes.
- Falling back: when the replica cannot be reached or fails a query, the marked
  read runs again on the primary, with a warning in the log and
  `baton_replica_fallbacks` counted; the rest of that request reads the primary,
  and so does this process for BATON_REPLICA_RETRY_SECONDS, so that a replica
  that is down costs one connection attempt, not one per page.
- Lag: a replica further behind than BATON_REPLICA_MAX_LAG_SECONDS is left alone
  (`replica.lagging`, `baton_replica_lag_skips`) until its next check; each
  process checks at most once every LAG_CHECK_SECONDS.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, Error, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.http import HttpRequest, HttpResponse

from workflows import metrics

REPLICA = "replica"
# Until when (seconds since the epoch) a person's pages read the primary.
PIN_COOKIE = "baton_primary_until"
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})

logger = logging.getLogger("baton.replica")

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class _RequestReads:
    """What one request may read from: the replica, unless its person just wrote or the
    replica already failed it."""

    primary_only: bool


# How often (seconds) a process asks the replica how far behind it is, at most.
LAG_CHECK_SECONDS = 5.0
# The replica's lag: none while it has replayed all it received; otherwise the age of
# the last transaction it replayed (an idle primary sends nothing, which is no lag).
_LAG_SQL = (
    "SELECT CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0"
    " ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0) END"
)


@dataclass
class _Standing:
    """This process's view of the replica: when to use it again, when to check its lag."""

    avoid_until: float = 0.0  # time.monotonic()
    lag_checked_at: float = -math.inf


_standing = _Standing()
_standing_lock = threading.Lock()

# The database the current read goes to: REPLICA inside `reads_replica`, DEFAULT_DB_ALIAS
# when a marked read runs again on the primary, None elsewhere (the primary).
_reading_from: ContextVar[str | None] = ContextVar("baton_reading_from", default=None)
# The current request's state, set by ReadYourWritesMiddleware (None outside a request).
_request: ContextVar[_RequestReads | None] = ContextVar("baton_replica_request", default=None)


def configured() -> bool:
    """Say whether a read replica is configured (the `replica` database exists)."""
    return REPLICA in connections.settings


def read_alias() -> str:
    """Return the database the current read goes to: the replica inside `reads_replica`."""
    return _reading_from.get() or DEFAULT_DB_ALIAS


def read_connection() -> BaseDatabaseWrapper:
    """Return the connection for the current read's raw SQL (see `read_alias`)."""
    return connections[read_alias()]


def reads_replica(read: Callable[P, R]) -> Callable[P, R]:
    """Mark `read` as one the replica may answer; if the replica fails, run it on the primary.

    `read` must only read, and return what it read (not a lazy queryset): running it
    twice is then harmless, and nothing it returns reads the database afterwards
    (what is loaded lazily later goes to the primary).
    """

    @functools.wraps(read)
    def reading(*args: P.args, **kwargs: P.kwargs) -> R:
        if _reading_from.get() is not None or not _may_read_replica():
            return read(*args, **kwargs)
        reading_from = _reading_from.set(REPLICA)
        try:
            return read(*args, **kwargs)
        except Error as error:
            failure = error
        finally:
            _reading_from.reset(reading_from)
        _fall_back(read, failure)
        reading_from = _reading_from.set(DEFAULT_DB_ALIAS)
        try:
            return read(*args, **kwargs)
        finally:
            _reading_from.reset(reading_from)

    return reading


def _may_read_replica() -> bool:
    if not configured() or connections[DEFAULT_DB_ALIAS].in_atomic_block:
        return False
    request = _request.get()
    if request is not None and request.primary_only:
        return False
    return _replica_in_standing()


def _replica_in_standing() -> bool:
    """Say whether this process may use the replica now: it has not failed lately, and was
    not too far behind at its last check (which this may make)."""
    now = time.monotonic()
    max_lag = settings.BATON_REPLICA_MAX_LAG_SECONDS
    with _standing_lock:
        if now < _standing.avoid_until:
            return False
        if not max_lag or now - _standing.lag_checked_at < LAG_CHECK_SECONDS:
            return True
        _standing.lag_checked_at = now
    try:
        with connections[REPLICA].cursor() as cursor:
            cursor.execute(_LAG_SQL)
            lag = float(cursor.fetchone()[0])
    except Error as error:
        _fall_back("replica lag check", error)
        return False
    if lag <= max_lag:
        return True
    logger.warning(
        "replica.lagging", extra={"lag_seconds": round(lag, 3), "max_lag_seconds": max_lag}
    )
    metrics.REPLICA_LAG_SKIPS.inc()
    with _standing_lock:
        _standing.avoid_until = max(_standing.avoid_until, now + LAG_CHECK_SECONDS)
    return False


def _fall_back(read: Callable[..., Any] | str, error: Error) -> None:
    """Log and count a failed read of the replica; keep the rest of the request, and this
    process for BATON_REPLICA_RETRY_SECONDS, off it."""
    logger.warning(
        "replica.fallback",
        extra={
            "read": read if isinstance(read, str) else f"{read.__module__}.{read.__qualname__}",
            "error": (str(error).strip().splitlines() or [""])[0],
        },
    )
    metrics.REPLICA_FALLBACKS.inc()
    request = _request.get()
    if request is not None:
        request.primary_only = True
    with _standing_lock:
        _standing.avoid_until = time.monotonic() + settings.BATON_REPLICA_RETRY_SECONDS
    # A connection that failed may be broken: the next read opens a new one.
    with contextlib.suppress(Error):
        connections[REPLICA].close()


class ReplicaRouter:
    """Send marked reads to the replica, and every write and every other read to the primary.

    The answer is the primary even for a row loaded from the replica: Django would
    otherwise read its related rows, or save it, where it came from.
    """

    def db_for_read(self, model: type, **hints: Any) -> str | None:
        if not configured():
            return None
        return read_alias()

    def db_for_write(self, model: type, **hints: Any) -> str | None:
        return DEFAULT_DB_ALIAS if configured() else None

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        """Allow relations between rows of the primary and of its replica: the same rows."""
        if configured() and {obj1._state.db, obj2._state.db} <= {DEFAULT_DB_ALIAS, REPLICA}:
            return True
        return None

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        """Never migrate the replica: it replays the primary's schema."""
        return False if db == REPLICA else None


class ReadYourWritesMiddleware:
    """Let a person who just wrote read the primary for BATON_REPLICA_PIN_SECONDS.

    A time pin rather than a WAL position: it costs no query, neither after a write
    (`pg_current_wal_lsn()`) nor before a read (`pg_last_wal_replay_lsn()`), works the
    same behind PgBouncer, and the few seconds it keeps a person on the primary are
    far longer than a healthy replica's lag. Held in a cookie, so any web process sees
    it and nothing is written to the session. A person who forges it only reads the
    primary, which is always right.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not configured():
            return self.get_response(request)
        now = time.time()
        state = _request.set(_RequestReads(primary_only=_pinned(request, now)))
        try:
            response = self.get_response(request)
        finally:
            _request.reset(state)
        seconds = settings.BATON_REPLICA_PIN_SECONDS
        if seconds and request.method in _WRITES and response.status_code < 400:
            response.set_cookie(
                PIN_COOKIE,
                f"{now + seconds:.3f}",
                max_age=math.ceil(seconds),
                secure=settings.SESSION_COOKIE_SECURE,
                httponly=True,
                samesite="Lax",
            )
        return response


def _pinned(request: HttpRequest, now: float) -> bool:
    try:
        return float(request.COOKIES.get(PIN_COOKIE, "0")) > now
    except ValueError:
        return False
