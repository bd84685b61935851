"""The long runs (100, 1,000 and 10,000 chained no-op activities), for the in-process driver only.

Registered through BATON_WORKFLOW_MODULES in the process that drives them and
nowhere else: Django's system check walks a definition's graph recursively, so a
chain longer than Python's recursion limit cannot pass `manage.py check` or a
worker's start-up check: `check_definition` raises RecursionError from 1,000 nodes on.
"""

from __future__ import annotations

from bench.definitions import chain
from workflows import registry

LENGTHS = (100, 1000, 10000)


def name_for(steps: int) -> str:
    return f"bench_long_{steps}"


for _steps in LENGTHS:
    registry.register(chain(name_for(_steps), _steps))
