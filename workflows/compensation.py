"""Which steps to undo, and in which order: the saga's plan, as a pure function."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from workflows.dsl import Activity, ChildWorkflow, Map, Node, Workflow


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
    # A map's item (its index in the list), undone on its own; None for other steps.
    item: int | None = None

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
    clean failure), and so the items of a map over such an activity; child runs that
    succeeded (a child that failed or was cancelled undid itself). Left alone:
    read-only steps, those that declared NoCompensation, clean failures (every
    attempt reported that nothing happened) and a map's own step (its items are
    undone one by one).
    """
    undoable = [
        step
        for step in finished
        if (node := workflow.nodes_by_name.get(step.node)) is not None and _undoable(node, step)
    ]
    undoable.sort(key=lambda step: (step.finished_at, step.sequence), reverse=True)
    return undoable


def _undoable(node: Node, step: FinishedStep) -> bool:
    if isinstance(node, ChildWorkflow):
        return step.succeeded
    if isinstance(node, Map):
        if step.item is None:
            return False
        if node.runs_children:
            return step.succeeded
        node = node.item_activity
    return (
        isinstance(node, Activity)
        and step.may_have_applied
        and node.mutating
        and node.compensation is not None
    )


def undoes_a_child(node: Node) -> bool:
    """Whether undoing a step of `node` means compensating the child run it started."""
    return isinstance(node, ChildWorkflow) or (isinstance(node, Map) and node.runs_children)
