"""Workflow definitions by name and version, and the hooks other apps plug into the engine."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from workflows.dsl import Node, Workflow

if TYPE_CHECKING:
    from workflows.models import StepRun, WorkflowRun


class UnknownWorkflow(LookupError):
    """No definition is registered under this name (and version)."""


NodeHook = Callable[["WorkflowRun", "StepRun", Node], None]


@dataclass(frozen=True)
class NodeHooks:
    """What a node kind does beside waiting, inside the engine's transaction.

    `enter` runs when a step of the kind starts waiting (e.g. create a human task);
    `leave` when it stops waiting for any reason (e.g. close its open human tasks).
    """

    enter: NodeHook | None = None
    leave: NodeHook | None = None


_definitions: dict[str, dict[int, Workflow]] = {}
_node_hooks: dict[type[Node], NodeHooks] = {}
_run_views: list[RunView] = []
# Extra work for the periodic sweep (e.g. human-task escalations); each returns a count.
_sweepers: list[Callable[..., int]] = []
# Told when someone starts a run on another person's behalf (see workflows.starting).
_on_behalf_hooks: list[Callable[..., None]] = []
# Told when someone acts on a run by hand (see workflows.operating).
_run_action_hooks: list[Callable[..., None]] = []
# Told when runs start (see register_run_start_hook).
_run_start_hooks: list[Callable[..., None]] = []
# Told when runs end (see register_run_end_hook).
_run_end_hooks: list[Callable[..., None]] = []
# Told when a run moves to another version of its type (see register_run_migration_hook).
_run_migration_hooks: list[Callable[..., None]] = []
# Other apps' rows that go with a run when it is pruned, counted by a dry run: name -> model.
_run_rows: dict[str, str] = {}
_prune_hooks: list[Callable[[list[Any]], None]] = []
# Counts changes to the definitions, so that what is built from all of them (the API's
# OpenAPI document) knows when to build it again.
_changes = 0


def register(workflow: Workflow) -> Workflow:
    """Add a definition; registering the same name and version twice is refused."""
    versions = _definitions.setdefault(workflow.name, {})
    if workflow.version in versions and versions[workflow.version] is not workflow:
        raise ValueError(f"{workflow} is already registered")
    versions[workflow.version] = workflow
    _changed()
    return workflow


def unregister(workflow: Workflow) -> None:
    _definitions.get(workflow.name, {}).pop(workflow.version, None)
    _changed()


@contextmanager
def substituted(workflow: Workflow) -> Iterator[Workflow]:
    """Stand `workflow` in for the registered definition of its name and version until
    the block ends (the test kit replaces activities this way)."""
    versions = _definitions.get(workflow.name, {})
    if workflow.version not in versions:
        raise UnknownWorkflow(f"{workflow} is not registered, so nothing can stand in for it.")
    original = versions[workflow.version]
    versions[workflow.version] = workflow
    _changed()
    try:
        yield workflow
    finally:
        versions[workflow.version] = original
        _changed()


def get(name: str, version: int | None = None) -> Workflow:
    """Return the definition `name` at `version`, or its latest version."""
    versions = _definitions.get(name)
    if not versions:
        known = ", ".join(sorted(_definitions)) or "none"
        raise UnknownWorkflow(f"Unknown workflow type {name!r} (known types: {known}).")
    if version is None:
        return versions[max(versions)]
    try:
        return versions[version]
    except KeyError:
        raise UnknownWorkflow(f"Workflow type {name!r} has no version {version}.") from None


def changes() -> int:
    """How many times the registered definitions have changed: a key for what is built
    from all of them."""
    return _changes


def _changed() -> None:
    global _changes
    _changes += 1


def all_definitions() -> list[Workflow]:
    return [workflow for versions in _definitions.values() for workflow in versions.values()]


def register_node_hooks(
    node_type: type[Node], *, enter: NodeHook | None = None, leave: NodeHook | None = None
) -> None:
    """Plug another app's behaviour into a node kind (approvals registers `Approval`)."""
    _node_hooks[node_type] = NodeHooks(enter=enter, leave=leave)


def node_hooks(node: Node) -> NodeHooks:
    for node_type in type(node).__mro__:
        if node_type in _node_hooks:
            return _node_hooks[node_type]
    return NodeHooks()


@dataclass(frozen=True)
class RunView:
    """How another app widens who may see a run, and what it adds to a run's details.

    `visible` returns a Q over WorkflowRun for the runs a user may also see (the
    approvals app: runs with a task of theirs); `open_tasks` lists a run's open
    human tasks as plain dicts for the API.
    """

    visible: Callable[[Any], Any]
    open_tasks: Callable[[WorkflowRun], list[dict[str, Any]]]


def register_run_view(view: RunView) -> None:
    if view not in _run_views:
        _run_views.append(view)


def run_views() -> list[RunView]:
    return list(_run_views)


def sweeper(function: Callable[..., int]) -> Callable[..., int]:
    """Register extra periodic work; it is called as `function(now=...)`."""
    if function not in _sweepers:
        _sweepers.append(function)
    return function


def sweepers() -> list[Callable[..., Any]]:
    return list(_sweepers)


def register_on_behalf_hook(hook: Callable[..., None]) -> None:
    """Be told, inside the start's transaction, when someone starts a run on another
    person's behalf (an operator filing an expense for alice): the approvals app
    writes it to the audit trail. Called as `hook(run=, actor=, requester=,
    channel=, remote_addr=, now=)`."""
    if hook not in _on_behalf_hooks:
        _on_behalf_hooks.append(hook)


def on_behalf_hooks() -> list[Callable[..., None]]:
    return list(_on_behalf_hooks)


def register_run_action_hook(hook: Callable[..., None]) -> None:
    """Be told, inside the action's transaction, when someone retries, resumes, pauses or
    cancels a run by hand through the API or the admin, or moves it to another version
    (workflows.engine.migrate): the approvals app writes it to the audit trail. Called
    as `hook(run=, actor=, action=, state_before=, channel=, remote_addr=, now=)`,
    `action` naming the engine use case ("pause_run"); a move adds `comment=` and
    `changes=` (the versions and the renames)."""
    if hook not in _run_action_hooks:
        _run_action_hooks.append(hook)


def run_action_hooks() -> list[Callable[..., None]]:
    return list(_run_action_hooks)


def register_run_start_hook(hook: Callable[..., None]) -> None:
    """Be told, inside the engine's transaction, which runs a use case started (the
    approvals app sends the `run.started` webhook). Called as `hook(started=[run, ...],
    now=...)`, once per unit of work."""
    if hook not in _run_start_hooks:
        _run_start_hooks.append(hook)


def run_start_hooks() -> list[Callable[..., None]]:
    return list(_run_start_hooks)


def register_run_end_hook(hook: Callable[..., None]) -> None:
    """Be told, inside the engine's transaction, which runs a use case ended: succeeded,
    failed, compensated, cancelled or dead-lettered (the approvals app tells each
    run's requester). Called as `hook(ended=[(run, event_kind), ...], now=...)`, once
    per unit of work, so a sweep that ends a thousand runs calls it once. A run ended by
    the compiled last step (engine.execute) is a partial row: its pk, state,
    workflow_type, workflow_version, input, result, correlation_id, started_by_id,
    parent_step_id and finished_at are set, nothing else."""
    if hook not in _run_end_hooks:
        _run_end_hooks.append(hook)


def run_end_hooks() -> list[Callable[..., None]]:
    return list(_run_end_hooks)


def register_run_migration_hook(hook: Callable[..., None]) -> None:
    """Be told, inside the move's transaction, when an operator moves a live run to another
    version of its type (see workflows.engine.migrate), after its steps were renamed: the
    approvals app renames the run's human tasks' nodes, keeping their ids and decisions.
    Called as `hook(run=, from_version=, renames={old: new}, now=)`."""
    if hook not in _run_migration_hooks:
        _run_migration_hooks.append(hook)


def run_migration_hooks() -> list[Callable[..., None]]:
    return list(_run_migration_hooks)


def register_run_rows(name: str, model: str) -> None:
    """Count `model`'s rows (an "app_label.Model" with a cascading `run` key) as `name` when
    runs are pruned: the human tasks, for example, which the engine does not know by name."""
    _run_rows[name] = model


def run_rows() -> dict[str, str]:
    return dict(_run_rows)


def register_prune_hook(hook: Callable[[list[Any]], None]) -> None:
    """Call `hook(run_ids)` inside each prune batch's transaction, before its rows go: for
    what the database does not hold itself (approvals' attachment files), which the hook
    removes once the batch commits."""
    _prune_hooks.append(hook)


def prune_hooks() -> list[Callable[[list[Any]], None]]:
    return list(_prune_hooks)
