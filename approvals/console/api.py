"""REST API v1 for the operators' actions the console added: retry a failed run, skip a
stuck step, retry dead letters in bulk.

Each endpoint calls the console's use case with channel "api", so the rules, the
audit entry naming the operator and the refusals are the console's: 403 for a
caller who is not an operator, 409 naming the run's state, 422 for a result that
is not storable JSON. (`/retry`, `/pause`, `/resume` and `/cancel` are
workflows.api's.)
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from django.http import HttpRequest
from django.utils.translation import gettext as _
from ninja import Field, Router, Schema, Status

from approvals.act import Act
from approvals.console import services
from approvals.models import COMMENT_MAX_LENGTH
from approvals.states import Channel
from workflows.api import ERRORS, ApiIn, ApiProblem
from workflows.client_address import client_address

router = Router(tags=["operators"])


class ReasonIn(ApiIn):
    reason: str = Field("", max_length=COMMENT_MAX_LENGTH, description="kept in the audit trail")


class SkipIn(ReasonIn):
    result: Any = Field(description="the step's result, any JSON value (null for none)")


class MoveIn(ReasonIn):
    to: str = Field(min_length=1, max_length=100, description="the node to move the run to")


class BulkRetryIn(ReasonIn):
    runs: list[UUID] = Field(max_length=services.BULK_MAX, min_length=1)


class RunStateOut(Schema):
    id: UUID
    state: str


class BulkOutcomeOut(Schema):
    id: UUID
    state: str | None
    refused: str | None


def _act(request: HttpRequest, reason: str) -> Act:
    """Who acts through the API, from where, and why (for the audit entry)."""
    return Act(
        user=request.user, channel=Channel.API, remote_addr=client_address(request), reason=reason
    )


def _problem(error: services.ConsoleError) -> ApiProblem:
    titles = {
        403: _("Forbidden"),
        404: _("Not found"),
        409: _("Not possible now"),
        422: _("Invalid result"),
    }
    return ApiProblem(error.status, titles.get(error.status, _("Refused")), str(error))


@router.post(
    "/{run_id}/retry-failed",
    response={202: RunStateOut, **ERRORS},
    summary="Retry a failed run from its failed step",
)
def retry_failed(request: HttpRequest, run_id: UUID, body: ReasonIn | None = None) -> Status:
    """Run a failed run's failed step again with a fresh attempt budget (operators only);
    409 once its completed steps were undone."""
    try:
        done = services.retry_failed_run(
            run_id=run_id,
            act=_act(request, body.reason if body else ""),
        )
    except services.ConsoleError as error:
        raise _problem(error) from None
    return Status(202, {"id": done.run.pk, "state": done.run.state})


@router.post(
    "/{run_id}/steps/{node}/skip",
    response={202: RunStateOut, **ERRORS},
    summary="Skip a stuck step with a given result",
)
def skip(request: HttpRequest, run_id: UUID, node: str, body: SkipIn) -> Status:
    """Give a scheduled, running, retrying or failed activity step `result` and go on from
    it (operators only). The step ends skipped and is never compensated."""
    try:
        done = services.skip_step(
            run_id=run_id,
            node=node,
            result=json.dumps(body.result),
            act=_act(request, body.reason),
        )
    except services.ConsoleError as error:
        raise _problem(error) from None
    return Status(202, {"id": done.run.pk, "state": done.run.state})


@router.post(
    "/{run_id}/move",
    response={202: RunStateOut, **ERRORS},
    summary="Move a live run to a node",
)
def move(request: HttpRequest, run_id: UUID, body: MoveIn) -> Status:
    """Cancel what the run has in flight and enter `to` in a new round, so a step it
    already completed runs again under a new idempotency key (operators only, with a
    `reason`, audited). 409 for a paused, undoing or finished run, or a node it could
    never reach (naming those it may move to)."""
    try:
        done = services.move_run(
            run_id=run_id,
            node=body.to,
            act=_act(request, body.reason),
        )
    except services.ConsoleError as error:
        raise _problem(error) from None
    return Status(202, {"id": done.run.pk, "state": done.run.state})


@router.post(
    "/retry-dead-letters",
    response={200: list[BulkOutcomeOut], **ERRORS},
    summary="Retry several dead-lettered runs",
)
def retry_dead_letters(request: HttpRequest, body: BulkRetryIn) -> Status:
    """Retry each run's failed compensation in its own transaction (operators only); each
    outcome says the run's new state, or why it was refused."""
    try:
        outcomes = services.retry_dead_letters(
            run_ids=body.runs,
            act=_act(request, body.reason),
        )
    except services.ConsoleError as error:
        raise _problem(error) from None
    return Status(
        200,
        [
            {"id": run_id, "state": outcome.run.state, "refused": None}
            if isinstance(outcome, services.Done)
            else {"id": run_id, "state": None, "refused": str(outcome)}
            for run_id, outcome in outcomes.items()
        ],
    )
