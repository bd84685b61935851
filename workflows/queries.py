"""Queries: a live run answers a question from its stored data, and nothing moves.

A query (`Workflow(queries={"quote": fn})`, Temporal's query) is a function of the
run's data: its input (a copy, so nothing the function does reaches the run) and
its steps' results, read from their rows. It takes no lock, writes nothing and runs
no step: reading a run's state through it is as safe as reading the run.
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

from workflows import registry
from workflows.dsl import RunData
from workflows.models import WorkflowRun

logger = logging.getLogger("baton.queries")


class UnknownQuery(LookupError):
    """The run's definition has no query of that name; the message lists the ones it has."""


class QueryFailed(Exception):
    """The query raised, or answered what is not JSON data; the message says which."""


def query_run(*, run: WorkflowRun, name: str) -> Any:
    """Return the answer of the query `name` about `run`, as JSON would give it back.

    Raise UnknownQuery, or QueryFailed with the function's error (the caller hears
    it: a query that cannot answer for this run's data is the caller's 422).
    """
    definition = registry.get(run.workflow_type, run.workflow_version)
    function = definition.queries.get(name)
    if function is None:
        known = ", ".join(sorted(definition.queries)) or "none"
        raise UnknownQuery(f"{definition} has no query {name!r} (its queries: {known}).")
    data = RunData(input=copy.deepcopy(run.input), results=run.results)
    try:
        answer = function(data)
    except Exception as error:
        logger.warning(
            "query.failed",
            exc_info=True,
            extra={"run_id": str(run.id), "workflow": definition.name, "query": name},
        )
        raise QueryFailed(f"Query {name!r} failed: {type(error).__name__}: {error}") from None
    try:
        return json.loads(json.dumps(answer, allow_nan=False))
    except (TypeError, ValueError):
        raise QueryFailed(
            f"Query {name!r} answered what is not JSON data ({type(answer).__name__})."
        ) from None
