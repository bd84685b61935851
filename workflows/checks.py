"""The start-up checks: every version with unfinished runs is still registered, and the
database has every PostgreSQL function the engine calls.

A deploy that drops a definition (say `expense` v1) while runs of it still wait
would fail each of those runs later, when a worker or a person next moves it. So
the web and the worker refuse to start instead, naming the type, the version and
how many runs are left, and saying how to go on.

It reads the database, so it never runs at import time or in a plain `manage.py
check`: Django calls it only when told which databases to check (`manage.py check
--database default`, and `migrate`, the web container's first command), the
Celery worker calls it from its `worker_init` signal, and the WSGI application
calls it when it is built. A database without Baton's tables yet (before the first
`migrate`) has no runs to check; one that cannot be reached gets a warning, not a
refusal, so a worker started during a database restart still comes up.

The functions (workflows.engine.functions) are compiled from the models and named by a
hash of their text: code deployed without the migration that installs its functions
(a state machine changed, or a Django upgrade that compiles a statement differently)
would fail every step. It is checked only once the database's migrations are all
applied: `migrate` runs these checks before it installs them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connections
from django.db.models import Count, Q

from workflows import registry
from workflows.states import FINAL_RUN_STATES

UNREGISTERED_VERSION = "workflows.E002"
UNCHECKED_VERSIONS = "workflows.W002"
MISSING_FUNCTION = "workflows.E003"
UNCHECKED_FUNCTIONS = "workflows.W003"


def check_live_versions(
    app_configs: Any = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Report each workflow version that still has unfinished runs but is not registered."""
    if not databases:
        return []  # a check that may not touch the database (Django's convention)
    messages: list[checks.CheckMessage] = []
    for alias in databases:
        try:
            orphans = unregistered_versions(using=alias)
        except DatabaseError as error:
            what = "every workflow version with unfinished runs is registered"
            messages.append(_unanswered(what, alias, error, UNCHECKED_VERSIONS))
            continue
        messages.extend(_error(*orphan) for orphan in orphans)
    return messages


def unregistered_versions(*, using: str = "default") -> list[tuple[str, int, dict[str, int]]]:
    """Return (type, version, runs by state) for each version with unfinished runs that is
    not registered; nothing if the database has no runs table yet."""
    from workflows.models import WorkflowRun

    connection = connections[using]
    if WorkflowRun._meta.db_table not in connection.introspection.table_names():
        return []
    registered = Q()
    for workflow in registry.all_definitions():
        registered |= Q(workflow_type=workflow.name, workflow_version=workflow.version)
    runs = WorkflowRun.objects.using(using).exclude(state__in=FINAL_RUN_STATES)
    if registered:
        runs = runs.exclude(registered)
    counts: dict[tuple[str, int], dict[str, int]] = defaultdict(dict)
    for workflow_type, version, state, count in (
        runs.values_list("workflow_type", "workflow_version", "state")
        .annotate(count=Count("id"))
        .order_by()
    ):
        counts[(workflow_type, version)][state] = count
    return [(name, version, by_state) for (name, version), by_state in sorted(counts.items())]


def check_functions(
    app_configs: Any = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Report each PostgreSQL function the code calls that a migrated database lacks."""
    if not databases:
        return []  # a check that may not touch the database (Django's convention)
    from workflows.engine import functions

    messages: list[checks.CheckMessage] = []
    for alias in databases:
        if not functions.used(connections[alias]):
            continue
        try:
            if _migrations_pending(alias):
                continue
            absent = functions.missing(functions.registered(), using=alias)
        except DatabaseError as error:
            what = "the database has every PostgreSQL function Baton calls"
            messages.append(_unanswered(what, alias, error, UNCHECKED_FUNCTIONS))
            continue
        messages.extend(
            checks.Error(
                f"The database {alias!r} lacks the PostgreSQL function {function.signature}, "
                "which this code calls.",
                hint=(
                    "Its migrations are all applied, so this code compiles the function from "
                    "models or a Django that no migration was made for. Deploy the code the "
                    "migrations were made with, or make the migration (tests/workflows/"
                    "test_functions.py names what it must hold); BATON_DB_FUNCTIONS=false "
                    "sends the statements instead, more slowly."
                ),
                id=MISSING_FUNCTION,
            )
            for function in absent
        )
    return messages


def _unanswered(what: str, alias: str, error: DatabaseError, id: str) -> checks.Warning:
    """A check that could not read the database warns, and lets the process start."""
    return checks.Warning(
        f"Could not check that {what}: the database {alias!r} did not answer "
        f"({type(error).__name__}).",
        hint="The check runs again at the next start.",
        id=id,
    )


def _migrations_pending(alias: str) -> bool:
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[alias])
    return bool(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def refuse_to_start(*, using: str = "default") -> None:
    """Raise ImproperlyConfigured naming every version with unfinished runs that is not
    registered and every function the database lacks (the worker's and the web
    application's start-up call this)."""
    problems = [
        message
        for check in (check_live_versions, check_functions)
        for message in check(databases=[using])
        if message.is_serious()
    ]
    if problems:
        raise ImproperlyConfigured(
            "\n".join(f"{message.msg} {message.hint}" for message in problems)
        )


def _error(workflow_type: str, version: int, by_state: dict[str, int]) -> checks.Error:
    total = sum(by_state.values())
    states = ", ".join(f"{count} {state}" for state, count in sorted(by_state.items()))
    others = sorted(
        workflow.version
        for workflow in registry.all_definitions()
        if workflow.name == workflow_type
    )
    hint = (
        f"Deploy {workflow_type} v{version} again (its definition registered by a module "
        "in BATON_WORKFLOW_MODULES) and keep it until those runs have finished"
    )
    if others:
        hint += (
            f", or, with it deployed beside v{others[-1]}, move them: manage.py migrate_runs "
            f"{workflow_type} --from {version} --to {others[-1]} (a dry run; --apply moves them)"
        )
    return checks.Error(
        f"Workflow type {workflow_type!r} version {version} is not registered, but "
        f"{total} unfinished run(s) of it remain ({states}).",
        hint=hint + ".",
        id=UNREGISTERED_VERSION,
    )
