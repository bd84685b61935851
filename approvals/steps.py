"""Plugs the approval node into the engine: entering it opens human tasks, leaving closes them."""

from __future__ import annotations

from workflows import registry
from workflows.dsl import Approval


def register() -> None:
    from approvals import services

    registry.register_node_hooks(
        Approval, enter=services.open_tasks_for_step, leave=services.close_tasks_for_step
    )
    registry.sweeper(services.fire_due_human_tasks)
