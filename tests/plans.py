"""The plan tests' tools: tables as compact as their live rows before a seed, and
PostgreSQL's plans of a query as sent, walked node by node.

A plan test seeds thousands of rows, ANALYZEs them, and asserts the plan PostgreSQL
chooses. That choice weighs the tables' and indexes' sizes on disk beside their rows,
and the suite's PostgreSQL runs without autovacuum (CI's does too): every row an
earlier test wrote and rolled back stays on disk, dead, until a VACUUM, and so do the
index entries. A plan test reads tables as bloated as whatever ran before it left
them, in whatever order pytest-randomly chose, and where two plans cost nearly the
same, the bloat chooses. So a plan module compacts the tables it reads before its
seed and after (`compacted_around_module`), and seeds them once (a fixture of the
class or the module, rolled back after its last test), never once a test, so that
each test finds the very tables, statistics and plans the first one found.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection

# The tables the plan tests seed and read: runs, their steps and events, human tasks
# and what hangs off them, and the people and groups they name.
PLAN_TABLES = (
    "workflows_workflowrun",
    "workflows_steprun",
    "workflows_stepevent",
    "approvals_humantask",
    "approvals_humantask_candidate_groups",
    "approvals_humantask_candidate_users",
    "approvals_inboxentry",
    "auth_user",
    "auth_group",
    "auth_user_groups",
)


def compact(django_db_blocker: Any, tables: tuple[str, ...] = PLAN_TABLES) -> None:
    """VACUUM ANALYZE and REINDEX `tables`, as autovacuum and a DBA would: what earlier
    tests left dead goes, and the tables and indexes are as small as their live rows."""
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {', '.join(tables)}")
        for table in tables:
            cursor.execute(f"REINDEX TABLE {table}")


def compacted_around_module(*tables: str) -> Callable[..., Iterator[None]]:
    """A module fixture (autouse) that compacts `tables` (the plan tables unless given)
    before the module's first test and after its last: its seed lands in compact
    tables whatever ran before, and leaves none of its dead rows to what runs after."""
    chosen = tables or PLAN_TABLES

    @pytest.fixture(scope="module", autouse=True)
    def compacted(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
        if connection.vendor != "postgresql":
            yield
            return
        compact(django_db_blocker, chosen)
        yield
        compact(django_db_blocker, chosen)

    return compacted


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
