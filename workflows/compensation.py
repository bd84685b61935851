"""Which steps to undo, and in which order: the saga's plan, as a pure function."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from workflows.dsl import Activity, Workflow


@dataclass(frozen=True)
class FinishedStep:
    node: str
    finished_at: datetime
    sequence: int
    succeeded: bool
    # Some attempt timed out or was cancelled mid-flight (see StepRun.may_have_applied).
    uncertain: bool = False
    # The loop round the step ran in: each round's effect is undone on its own.
    round: int = 0

    @property
    def may_have_applied(self) -> bool:
        return self.succeeded or self.uncertain


def plan_compensation(*, workflow: Workflow, finished: Iterable[FinishedStep]) -> list[str]:
    """Return the nodes to compensate, most recently finished first (see `steps_to_undo`)."""
    return [step.node for step in steps_to_undo(workflow=workflow, finished=finished)]


def steps_to_undo(*, workflow: Workflow, finished: Iterable[FinishedStep]) -> list[FinishedStep]:
    """Return the steps to compensate, most recently finished first, whatever their round.

    Undone: mutating activities with a compensation function that succeeded, or
    any of whose attempts timed out or was cancelled mid-flight (a timeout is not a
    clean failure). Left alone: read-only steps, those that declared
    NoCompensation, and clean failures (every attempt reported that nothing
    happened).
    """
    undoable = [
        step
        for step in finished
        if step.may_have_applied
        and isinstance(node := workflow.nodes_by_name.get(step.node), Activity)
        and node.mutating
        and node.compensation is not None
    ]
    undoable.sort(key=lambda step: (step.finished_at, step.sequence), reverse=True)
    return undoable
