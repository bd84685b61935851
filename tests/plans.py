"""Reading PostgreSQL's plans in the plan tests: EXPLAIN a query as sent, walk its nodes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db import connection


def explain(sql: str) -> dict[str, Any]:
    """Run the query under EXPLAIN ANALYZE; return its plan as PostgreSQL's JSON."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
        return cursor.fetchone()[0][0]


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The plan node and every node under it."""
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def rows_out(node: dict[str, Any]) -> float:
    """The rows a node gave over all of its loops."""
    return node["Actual Rows"] * node["Actual Loops"]
