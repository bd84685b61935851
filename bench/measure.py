"""Timing, percentiles, and counting the statements and commits a call makes.

Counting is deterministic, read from Django's own connection rather than from
PostgreSQL's statistics (which other sessions on the server would disturb):

- a statement is every SQL text Django sends through its cursors, seen by
  `connection.execute_wrapper` (SAVEPOINT and RELEASE included, since each is a
  round trip; the BEGIN and COMMIT psycopg sends are not statements);
- a commit is a statement run in autocommit mode (its own transaction), or an
  outermost `transaction.atomic` block that commits, seen by wrapping the
  connection's `commit` for the duration of the count.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import connection


@dataclass
class Counts:
    statements: int = 0
    commits: int = 0


@contextmanager
def counting() -> Iterator[Counts]:
    """Count the statements and commits made on the default connection inside the block."""
    counts = Counts()
    original_commit = connection.commit

    def count_statement(execute: Callable[..., Any], sql: str, params: Any, many: bool, context):
        counts.statements += 1
        if connection.get_autocommit() and not connection.in_atomic_block:
            counts.commits += 1
        return execute(sql, params, many, context)

    def count_commit() -> None:
        counts.commits += 1
        original_commit()

    connection.commit = count_commit  # type: ignore[method-assign]
    try:
        with connection.execute_wrapper(count_statement):
            yield counts
    finally:
        del connection.commit


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
