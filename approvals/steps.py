"""Plugs approvals into the engine: approval nodes open and close human tasks, the sweep
fires their escalations, the runs API shows a run's open tasks to their reviewers, a
run started on someone's behalf, or acted on by hand through the API or the admin, is
audited, a run's requester hears how it ended, and a run moved to another version keeps
its human tasks."""

from __future__ import annotations

from workflows import registry
from workflows.dsl import Approval


def register() -> None:
    from approvals import (
        api,
        console_services,
        notifications,
        request_services,
        run_versions,
        services,
    )

    registry.register_node_hooks(
        Approval, enter=services.open_tasks_for_step, leave=services.close_tasks_for_step
    )
    registry.sweeper(services.fire_due_human_tasks)
    registry.register_on_behalf_hook(request_services.record_on_behalf)
    registry.register_run_action_hook(console_services.record_run_action)
    registry.register_run_end_hook(notifications.runs_ended)
    registry.register_run_migration_hook(run_versions.rename_task_nodes)
    api.register()
