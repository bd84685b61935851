"""The use cases of a request seen from the person who asked: withdraw it, comment on it,
and the audit entry of a request started on someone else's behalf.

Starting one is `workflows.starting.start_for`, shared with the API. Like the task
services, each use case is one transaction that writes its audit entry (chained,
see approvals.audit) beside its effect, and a refusal changes nothing and says why.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from approvals import audit
from workflows.models import WorkflowRun


def record_on_behalf(
    *,
    run: WorkflowRun,
    actor: Any,
    requester: str,
    channel: str,
    remote_addr: str | None,
    now: datetime,
) -> None:
    """Audit that `actor`, an operator, started `run` on `requester`'s behalf."""
    audit.record(
        task=run,
        event="started_on_behalf",
        actor=actor,
        channel=channel,
        now=now,
        comment=f"for {requester}",
        remote_addr=remote_addr,
        changes={"requester": [actor.get_username(), requester]},
    )
