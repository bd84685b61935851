"""Moving the live runs of a type from one version to another, at an operator's request.

`preview_migration` is the dry run: for every unfinished run of the source version,
whether it can move and why not (workflows.versions judges, from the two
definitions and where the run is). `migrate_runs` moves the runs that can, each in
its own transaction: it locks the run, judges it again as it is now (it may have
moved on since the preview, or a worker may have claimed a step), and only then
renames its steps by the plan, keeps its input as the target reads it, sets its
version and writes an OPERATOR event. In the same transaction the registry's
migration hooks follow the renames (approvals renames the run's human tasks,
keeping their ids and decisions) and its run-action hooks audit the move with the
operator named. A run that cannot move is left untouched and named with its reasons.

Lock order is the engine's: the run row first. A worker's claim locks the run too,
so no step starts between the verdict "no activity is running" and the commit; a
claim waiting behind the move reads the new version and the renamed step.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone

from workflows import registry
from workflows.dsl import Activity
from workflows.engine.work import UnitOfWork, lock_run
from workflows.models import StepRun, WorkflowRun
from workflows.states import FINAL_RUN_STATES, EventKind, StepKind, StepState
from workflows.versions import MigrationPlan, RunPosition, StepAt, Verdict, plan_migration

# Runs judged per batch of the preview: one query for the runs, one for their steps.
BATCH = 500
# The use case the run-action hooks hear of (they name the audit entry after it).
ACTION = "migrate_runs"


@dataclass(frozen=True)
class RunMove:
    """One run's line in a migration report: where it is, and why it cannot move."""

    run_id: uuid.UUID
    state: str
    at: tuple[str, ...]
    reasons: tuple[str, ...] = ()
    moved: bool = False

    @property
    def can_move(self) -> bool:
        return not self.reasons


@dataclass(frozen=True)
class MigrationReport:
    """Every unfinished run of the source version, and what became of it."""

    workflow_type: str
    from_version: int
    to_version: int
    renames: Mapping[str, str]
    applied: bool
    runs: tuple[RunMove, ...]

    @property
    def movable(self) -> list[RunMove]:
        return [run for run in self.runs if run.can_move]

    @property
    def blocked(self) -> list[RunMove]:
        """The runs that cannot move (or, once applied, did not), with their reasons."""
        return [run for run in self.runs if not run.can_move]

    @property
    def moved(self) -> list[RunMove]:
        return [run for run in self.runs if run.moved]


def preview_migration(
    *,
    workflow_type: str,
    from_version: int,
    to_version: int,
    renames: Mapping[str, str] | None = None,
) -> MigrationReport:
    """Say, for every unfinished run of `workflow_type` at `from_version`, whether it can
    move to `to_version` and why not; change nothing.

    Raise UnknownWorkflow if either version is not registered, InvalidMigration if
    the plan cannot be followed (a rename of a node that does not exist, say).
    """
    plan = _plan(workflow_type, from_version, to_version, renames)
    runs = tuple(_line(verdict) for verdict in _verdicts(plan))
    return _report(plan, applied=False, runs=runs)


def migrate_runs(
    *,
    workflow_type: str,
    from_version: int,
    to_version: int,
    renames: Mapping[str, str] | None = None,
    actor: Any = None,
    channel: str,
    remote_addr: str | None = None,
    comment: str = "",
    now: datetime | None = None,
) -> MigrationReport:
    """Move every unfinished run of `workflow_type` at `from_version` that can move to
    `to_version`, each in its own transaction, audited as `actor`'s; leave the others
    untouched and name them with their reasons. Safe to run again: a moved run is on
    the target version and no longer among the source's runs."""
    plan = _plan(workflow_type, from_version, to_version, renames)
    runs = []
    for verdict in _verdicts(plan):
        if not verdict.can_move:
            runs.append(_line(verdict))
            continue
        try:
            runs.append(
                _move(
                    plan,
                    verdict.run_id,
                    actor=actor,
                    channel=channel,
                    remote_addr=remote_addr,
                    comment=comment,
                    now=now or timezone.now(),
                )
            )
        except IntegrityError as error:
            # Its transaction rolled back: the run is as it was; the others go on.
            reason = f"renaming its steps clashed with a step it already has: {_first_line(error)}"
            runs.append(_line(replace(verdict, reasons=(reason,))))
        except DatabaseError as error:
            reason = f"the database refused the move: {_first_line(error)}"
            runs.append(_line(replace(verdict, reasons=(reason,))))
    return _report(plan, applied=True, runs=tuple(runs))


def _plan(
    workflow_type: str, from_version: int, to_version: int, renames: Mapping[str, str] | None
) -> MigrationPlan:
    return plan_migration(
        source=registry.get(workflow_type, from_version),
        target=registry.get(workflow_type, to_version),
        renames=renames,
    )


def _report(plan: MigrationPlan, *, applied: bool, runs: tuple[RunMove, ...]) -> MigrationReport:
    return MigrationReport(
        workflow_type=plan.source.name,
        from_version=plan.source.version,
        to_version=plan.target.version,
        renames=dict(plan.renames),
        applied=applied,
        runs=runs,
    )


def _line(verdict: Verdict) -> RunMove:
    return RunMove(
        run_id=verdict.run_id, state=verdict.state, at=verdict.at, reasons=verdict.reasons
    )


def _verdicts(plan: MigrationPlan) -> Iterator[Verdict]:
    """Judge the source version's unfinished runs by batches, oldest id first."""
    runs = (
        WorkflowRun.objects.filter(
            workflow_type=plan.source.name, workflow_version=plan.source.version
        )
        .exclude(state__in=FINAL_RUN_STATES)
        .order_by("id")
    )
    after: uuid.UUID | None = None
    while True:
        page = runs.filter(id__gt=after) if after is not None else runs
        batch = list(page.values_list("id", "state", "input")[:BATCH])
        if not batch:
            return
        steps: dict[uuid.UUID, list[StepAt]] = {run_id: [] for run_id, _, _ in batch}
        rows = StepRun.objects.filter(run_id__in=list(steps)).order_by("id")
        for run_id, node, state, kind, attempt, may_have_applied in rows.values_list(
            "run_id", "node", "state", "kind", "attempt", "may_have_applied"
        ):
            steps[run_id].append(StepAt(node, state, kind, attempt, may_have_applied))
        for run_id, state, input in batch:
            yield plan.judge(RunPosition(run_id, state, input, tuple(steps[run_id])))
        after = batch[-1][0]


def _position(run: WorkflowRun, steps: list[StepRun]) -> RunPosition:
    return RunPosition(
        run_id=run.pk,
        state=run.state,
        input=run.input,
        steps=tuple(
            StepAt(step.node, step.state, step.kind, step.attempt, step.may_have_applied)
            for step in steps
        ),
    )


def _move(
    plan: MigrationPlan,
    run_id: uuid.UUID,
    *,
    actor: Any,
    channel: str,
    remote_addr: str | None,
    comment: str,
    now: datetime,
) -> RunMove:
    """Move one run in its own transaction, if it still can once locked."""
    work = UnitOfWork()
    with transaction.atomic():
        run = lock_run(run_id)
        if (run.workflow_type, run.workflow_version) != (plan.source.name, plan.source.version):
            reason = f"it is on version {run.workflow_version} now"
            return RunMove(run_id=run.pk, state=run.state, at=(), reasons=(reason,))
        steps = list(run.steps.order_by("id"))
        verdict = plan.judge(_position(run, steps))
        if not verdict.can_move:
            return _line(verdict)
        renames = plan.step_renames()
        applied: dict[str, str] = {}
        for step in steps:
            if step.node in renames:
                applied[step.node] = step.node = renames[step.node]
            target = plan.target.nodes_by_name[step.node] if _is_pending(step) else None
            if isinstance(target, Activity):
                # The lease its next attempt holds comes from the target's timeouts.
                step.lease = target.timeouts.first_lease
            if step.changed_fields():
                work.save(step)
        state_before = run.state
        input_changed = verdict.input != run.input
        if input_changed:
            run.input = verdict.input
        run.workflow_version = plan.target.version
        work.event(
            run,
            None,
            EventKind.OPERATOR,
            now,
            detail={
                "action": "migrated",
                "from_version": plan.source.version,
                "to_version": plan.target.version,
                "renames": applied,
                "input_changed": input_changed,
                "by": actor.get_username() if actor is not None else "",
                "channel": channel,
                "comment": comment,
            },
        )
        work.save(run)
        work.flush()  # the hooks read the renamed steps
        for hook in registry.run_migration_hooks():
            hook(run=run, from_version=plan.source.version, renames=applied, now=now)
        for hook in registry.run_action_hooks():
            hook(
                run=run,
                actor=actor,
                action=ACTION,
                state_before=state_before,
                channel=channel,
                remote_addr=remote_addr,
                now=now,
                comment=comment,
                changes={
                    "version": [plan.source.version, plan.target.version],
                    "renames": applied,
                },
            )
        work.finish(run)
    at = tuple(sorted(plan.target_name(node) for node in verdict.at))
    return RunMove(run_id=run.pk, state=run.state, at=at, moved=True)


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _is_pending(step: StepRun) -> bool:
    """A forward step a worker has yet to claim (its lease is taken at the claim)."""
    return step.kind == StepKind.FORWARD and step.state in (
        StepState.SCHEDULED,
        StepState.RETRY_WAIT,
    )
