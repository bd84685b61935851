"""The use cases of a human task, and its one writer: decide, hand over, open and close, fire
its timers, comment.

Every page (the inbox, the requests, the console, the API), the admin, email links and
the engine's hooks change a task only through here: one transaction per use case, which
locks, transitions, saves, audits and notifies on commit. It may import the domain
(`approvals.models`, `states`, `permissions`, `duties`, ...), `approvals.notify` and
`approvals.audit`; never a page.
"""

from approvals.human_tasks.acting import (
    Act,
    barred_on_page,
    facts_for,
    person_for,
    reviewer_for,
    visible_task,
    why_barred,
)
from approvals.human_tasks.comments import comment_on_human_task
from approvals.human_tasks.decide import (
    BulkResult,
    approve_human_task,
    bulk_approve,
    claim_human_task,
    decide_by_link,
    reject_human_task,
    release_human_task,
    request_changes,
)
from approvals.human_tasks.entries import complete_user_task, save_draft
from approvals.human_tasks.errors import (
    AlreadyDecided,
    ConflictOfDuty,
    InvalidForm,
    InvalidRequest,
    NotAllowed,
    StaleTask,
    TaskClosed,
    TaskConflict,
    TaskError,
    TaskNotFound,
)
from approvals.human_tasks.handover import delegate_human_task, reassign_human_task
from approvals.human_tasks.lifecycle import close_tasks_for_step, open_tasks_for_step
from approvals.human_tasks.personal import (
    Handover,
    delete_filter,
    hand_over_held_tasks,
    held_tasks,
    save_filter,
    set_substitution,
    snooze_human_task,
    substitute_for,
)
from approvals.human_tasks.timers import (
    escalate_human_task,
    fire_due_human_tasks,
    handle_deadline,
    remind_human_task,
)

__all__ = [
    "Act",
    "AlreadyDecided",
    "BulkResult",
    "ConflictOfDuty",
    "Handover",
    "InvalidForm",
    "InvalidRequest",
    "NotAllowed",
    "StaleTask",
    "TaskClosed",
    "TaskConflict",
    "TaskError",
    "TaskNotFound",
    "approve_human_task",
    "barred_on_page",
    "bulk_approve",
    "claim_human_task",
    "close_tasks_for_step",
    "comment_on_human_task",
    "complete_user_task",
    "decide_by_link",
    "delegate_human_task",
    "delete_filter",
    "escalate_human_task",
    "facts_for",
    "fire_due_human_tasks",
    "hand_over_held_tasks",
    "handle_deadline",
    "held_tasks",
    "open_tasks_for_step",
    "person_for",
    "reassign_human_task",
    "reject_human_task",
    "release_human_task",
    "remind_human_task",
    "request_changes",
    "reviewer_for",
    "save_draft",
    "save_filter",
    "set_substitution",
    "snooze_human_task",
    "substitute_for",
    "visible_task",
    "why_barred",
]
