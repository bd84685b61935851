"""Plugs approvals into the engine: approval and revise nodes open and close human tasks, the
sweep fires their escalations, the runs API shows a run's open tasks to their reviewers, a
run started on someone's behalf, or acted on by hand through the API or the admin, is
audited, a run's requester hears how it ended, subscribed endpoints hear of runs and tasks
(webhooks), and a run moved to another version keeps its human tasks, and pruning counts a
run's human tasks with it."""

from __future__ import annotations

from workflows import registry
from workflows.dsl import Approval, Revise


def register() -> None:
    from approvals import human_tasks, request_pages
    from approvals.console import services as console_services
    from approvals.human_tasks import attachments, revisions
    from approvals.human_tasks import versions as run_versions
    from approvals.notify import notifications, webhook_delivery, webhooks
    from approvals.requests import services as request_services

    registry.register_node_hooks(
        Approval, enter=human_tasks.open_tasks_for_step, leave=human_tasks.close_tasks_for_step
    )
    registry.register_node_hooks(
        Revise, enter=revisions.open_revision_task, leave=human_tasks.close_tasks_for_step
    )
    registry.sweeper(human_tasks.fire_due_human_tasks)
    registry.register_on_behalf_hook(request_services.record_on_behalf)
    registry.register_run_action_hook(console_services.record_run_action)
    registry.register_run_end_hook(notifications.runs_ended)
    registry.register_run_start_hook(webhooks.runs_started)
    registry.register_run_end_hook(webhooks.runs_ended)
    registry.register(webhook_delivery.delivery_workflow())
    registry.register_run_migration_hook(run_versions.rename_task_nodes)
    registry.register_run_rows("human tasks", "approvals.HumanTask")
    registry.register_prune_hook(attachments.forget_files_of)
    registry.register_run_view(
        registry.RunView(
            visible=request_pages.runs_with_my_tasks, open_tasks=request_pages.open_tasks_of
        )
    )
