"""Timing, percentiles, and counting the statements and commits a call makes.

Counting is deterministic, read from Django's own connection rather than from
PostgreSQL's statistics (which other sessions on the server would disturb):

- a statement is every SQL statement Django sends through its cursors, seen by
  `connection.execute_wrapper` (SAVEPOINT and RELEASE included; the BEGIN and
  COMMIT psycopg sends are not statements); the engine sends several in one
  query where it can (`workflows.engine.batch`), so each is counted;
- a round trip is every query sent, plus the BEGIN and COMMIT of each
  transaction that commits;
- a commit is a statement run in autocommit mode (its own transaction), or an
  outermost `transaction.atomic` block that commits, seen by wrapping the
  connection's `commit` for the duration of the count; a block in which no
  statement ran sends no BEGIN or COMMIT, and counts for nothing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import connection

from workflows.engine.batch import statements_in


@dataclass
class Counts:
    statements: int = 0
    commits: int = 0
    queries: int = 0
    transactions: int = 0

    @property
    def round_trips(self) -> int:
        return self.queries + 2 * self.transactions


@contextmanager
def counting() -> Iterator[Counts]:
    """Count the statements and commits made on the default connection inside the block."""
    counts = Counts()
    original_commit = connection.commit

    def count_statement(execute: Callable[..., Any], sql: str, params: Any, many: bool, context):
        counts.statements += statements_in(sql)
        counts.queries += 1
        if connection.get_autocommit() and not connection.in_atomic_block:
            counts.commits += 1
        return execute(sql, params, many, context)

    def count_commit() -> None:
        # A transaction in which nothing was sent sends no COMMIT either (psycopg sends
        # BEGIN with the first statement): it is not counted.
        if _sent_anything():
            counts.commits += 1
            counts.transactions += 1
        original_commit()

    connection.commit = count_commit  # type: ignore[method-assign]
    try:
        with connection.execute_wrapper(count_statement):
            yield counts
    finally:
        del connection.commit


def _sent_anything() -> bool:
    if connection.vendor != "postgresql" or connection.connection is None:
        return True
    from psycopg.pq import TransactionStatus

    return connection.connection.info.transaction_status != TransactionStatus.IDLE


def now_ns() -> int:
    return time.perf_counter_ns()


def percentile(values: Sequence[float], fraction: float) -> float:
    """Return the nearest-rank percentile (`fraction` 0.5 is the median, 0.99 the p99)."""
    if not values:
        raise ValueError("no samples")
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return percentile(values, 0.5)
