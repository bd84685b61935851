"""Which completed steps to undo, and in which order: the saga's plan, as a pure function."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from workflows.dsl import Activity, Workflow


@dataclass(frozen=True)
class CompletedStep:
    node: str
    finished_at: datetime
    sequence: int


def plan_compensation(*, workflow: Workflow, completed: Iterable[CompletedStep]) -> list[str]:
    """Return the nodes to compensate, most recently completed first.

    Only mutating activities with a compensation function are undone; read-only
    steps and those that declared NoCompensation are left as they are.
    """
    undoable = [
        step
        for step in completed
        if isinstance(node := workflow.nodes_by_name.get(step.node), Activity)
        and node.mutating
        and node.compensation is not None
    ]
    undoable.sort(key=lambda step: (step.finished_at, step.sequence), reverse=True)
    return [step.node for step in undoable]
