"""Someone acting on a run by hand through the API or the admin: one engine use case, and
the hooks that record who did it, in one transaction.

The engine does not know people's audit trail; the approvals app listens through
`registry.register_run_action_hook` and writes the entry (the run console calls
the same recording itself). The run is locked first, the engine's lock order, so
the state it had before the action holds until the hooks have seen it; an action
that changed nothing (a second pause) tells no one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from workflows import registry
from workflows.engine import RunNotFound
from workflows.models import WorkflowRun


def act_on_run(
    *,
    use_case: Callable[..., WorkflowRun],
    run_id: uuid.UUID | str,
    actor: Any,
    channel: str,
    remote_addr: str | None = None,
    now: datetime | None = None,
) -> WorkflowRun:
    """Call `use_case(run_id=, now=)` for `actor` and tell the run-action hooks, in one
    transaction; the use case's refusal (an EngineError) passes through unchanged."""
    now = now or timezone.now()
    with transaction.atomic():
        before = (
            WorkflowRun.objects.select_for_update()
            .filter(pk=run_id)
            .values_list("state", flat=True)
            .first()
        )
        if before is None:
            raise RunNotFound(f"No workflow run {run_id}.")
        run = use_case(run_id=run_id, now=now)
        if run.state != before:
            for hook in registry.run_action_hooks():
                hook(
                    run=run,
                    actor=actor,
                    action=use_case.__name__,
                    state_before=before,
                    channel=channel,
                    remote_addr=remote_addr,
                    now=now,
                )
    return run
