"""REST API v1 for workflow runs: start, query, list, signal, update, cancel, retry.

Endpoints translate HTTP into one engine call each. Errors are raised as
`ApiProblem` and rendered as application/problem+json (RFC 9457) by the handlers
in config/api.py; the schemas below are the contract other systems build on.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from django.db.models import Q, QuerySet
from django.http import HttpRequest
from ninja import Field, Header, Query, Router, Schema, Status
from pydantic import BeforeValidator, ConfigDict, field_validator, model_validator
from pydantic_core import PydanticCustomError

from workflows import (
    business_keys,
    engine,
    openapi,
    personal,
    queries,
    registry,
    replica,
    starting,
)
from workflows.business_keys import (
    CORRELATION_ID,
    AmbiguousKey,
    BusinessKey,
    InvalidKey,
    NoLiveRun,
)
from workflows.cleaning import Refused, clean_datetime, clean_text, refuse_unstorable
from workflows.client_address import client_address
from workflows.dsl import InvalidInput
from workflows.models import StepRun, WorkflowRun
from workflows.operating import act_on_run
from workflows.registry import UnknownWorkflow
from workflows.states import LIVE_RUN_STATES, RunState, StepKind, StepState
from workflows.versions import InvalidMigration

router = Router(tags=["workflows"])
# POST /signals: a signal to the run a business key names (see workflows.business_keys).
signals_router = Router(tags=["signals"])


# ---------------------------------------------------------------------------
# Problems (RFC 9457)
# ---------------------------------------------------------------------------


class FieldProblem(Schema):
    field: str
    message: str


class Problem(Schema):
    type: str = "about:blank"
    title: str
    status: int
    detail: str
    errors: list[FieldProblem] | None = None
    state: str | None = None


class ApiProblem(Exception):
    def __init__(self, status: int, title: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.body = {"title": title, "status": status, "detail": detail, **extra}


def not_found(what: str) -> ApiProblem:
    return ApiProblem(404, "Not found", f"No {what} (or it is not yours to see).")


ERRORS = {
    400: Problem,
    401: Problem,
    403: Problem,
    404: Problem,
    409: Problem,
    413: Problem,
    414: Problem,
    422: Problem,
    429: Problem,
}


# ---------------------------------------------------------------------------
# Schemas
# ---------------------------------------------------------------------------


def refused(error: Refused) -> PydanticCustomError:
    """Carry a cleaning refusal into pydantic, its reason as the field's message."""
    return PydanticCustomError("refused", str(error))


class ApiIn(Schema):
    """What callers send, every field through workflows.cleaning: text without control
    characters (line breaks allowed), JSON data without what PostgreSQL cannot store.

    A body field the schema does not know is refused (422 naming it), not ignored: a
    client that put, say, its idempotency key in the body instead of the header would
    otherwise start a second run on every retry. (Query strings pass only their known
    parameters to these schemas, so extra ones there are still ignored.)
    """

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="after")
    @classmethod
    def cleaned(cls, value: Any) -> Any:
        try:
            if isinstance(value, str):
                return clean_text(value, max_length=None, multiline=True)
            refuse_unstorable(value)
        except Refused as error:
            raise refused(error) from None
        return value


class StartWorkflowIn(ApiIn):
    type: str = Field(min_length=1, max_length=100, description="a workflow type, e.g. order")
    input: dict[str, Any] = Field(description="validated against the type's input schema")
    correlation_id: str = Field("", max_length=200)


class StepOut(Schema):
    node: str
    round: int = Field(
        0, description="0 on the node's first run; one more each time a loop went back to it"
    )
    item: int | None = Field(None, description="a map's item: its index in the list")
    kind: str
    state: str
    attempts: int
    last_error: dict[str, Any] | None
    started_at: datetime | None
    finished_at: datetime | None


class ChildRunOut(Schema):
    id: UUID
    type: str
    state: str
    node: str = Field(description="the parent's node that started it")
    item: int | None = Field(None, description="the map item it runs, if any")


class OpenTaskOut(Schema):
    id: UUID
    node: str
    title: str
    state: str
    assignee: str | None
    due_at: datetime | None


class CompensationOut(Schema):
    state: str = Field(description="none, in_progress, completed or dead_lettered")
    undone: list[str]
    in_progress: list[str]
    failed: list[str]


class RunSummaryOut(Schema):
    id: UUID
    type: str
    version: int
    state: str
    correlation_id: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class RunOut(RunSummaryOut):
    input: dict[str, Any]
    result: Any = None
    error: dict[str, Any] | None = None
    idempotency_key: str
    parent_run_id: UUID | None = Field(None, description="the run that started this one")
    children: list[ChildRunOut] = Field(description="the child runs this run started")
    steps: list[StepOut]
    open_human_tasks: list[OpenTaskOut]
    compensation: CompensationOut


class RunPageOut(Schema):
    items: list[RunSummaryOut]
    next_cursor: str | None


class SignalIn(ApiIn):
    id: str | None = Field(None, min_length=1, max_length=200, description="de-duplicates")
    payload: dict[str, Any] = Field(default_factory=dict)


class SignalOut(Schema):
    signal_id: str
    duplicate: bool


class QueryOut(Schema):
    query: str
    result: Any = Field(description="the query's answer, as its function returned it")


class UpdateIn(ApiIn):
    id: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="de-duplicates: a repeat gets the first answer",
    )
    payload: dict[str, Any] = Field(
        default_factory=dict, description="validated against the update's schema"
    )


class UpdateOut(Schema):
    update_id: str
    result: Any = Field(description="the update handler's answer")
    duplicate: bool = Field(description="true: this id was handled before; nothing changed now")


# Business keys are text or whole numbers (a float is no key, and NaN no JSON PostgreSQL takes).
KeyValue = str | int | bool


class StartIfMissingIn(ApiIn):
    input: dict[str, Any] = Field(
        description="the new run's input (validated by the type's schema); a key field is "
        "filled in from the key"
    )


class KeyedSignalIn(ApiIn):
    type: str = Field(min_length=1, max_length=100, description="a workflow type, e.g. order")
    correlation_id: str | None = Field(
        None, min_length=1, max_length=200, description="find the run by its correlation id"
    )
    key: dict[str, KeyValue] | None = Field(
        None,
        min_length=1,
        max_length=1,
        description="or by one searchable input field of the type: {field: value}",
    )
    name: str = Field(min_length=1, max_length=150, description="the signal's name")
    id: str | None = Field(
        None,
        min_length=1,
        max_length=180,
        description="de-duplicates; required with start_if_missing",
    )
    payload: dict[str, Any] = Field(default_factory=dict)
    start_if_missing: StartIfMissingIn | None = Field(
        None, description="start a run with this input when no live run has the key"
    )

    @model_validator(mode="after")
    def one_key(self) -> KeyedSignalIn:
        if (self.correlation_id is None) == (self.key is None):
            raise PydanticCustomError(
                "one_key", "give either correlation_id or key (one searchable field), not both"
            )
        return self

    def business_key(self) -> BusinessKey:
        if self.correlation_id is not None:
            return BusinessKey(self.type, CORRELATION_ID, self.correlation_id)
        [(field, value)] = (self.key or {}).items()
        return BusinessKey(self.type, field, value)


class KeyedSignalOut(Schema):
    run_id: UUID = Field(description="the run signalled")
    signal_id: str
    duplicate: bool = Field(description="true: this id was delivered before; nothing changed now")
    started: bool = Field(description="true: no live run had the key, so this one was started")


class RunStateOut(Schema):
    id: UUID
    state: str


class MigrationIn(ApiIn):
    type: str = Field(min_length=1, max_length=100, description="a workflow type, e.g. expense")
    from_version: int = Field(ge=1, le=2147483647, description="the version the runs are on")
    to_version: int = Field(ge=1, le=2147483647, description="the version to move them to")
    renames: dict[str, str] = Field(
        default_factory=dict,
        description="nodes the target calls otherwise: {source node: target node}; "
        "every other node keeps its name",
    )
    apply: bool = Field(False, description="false (the default): a dry run that changes nothing")


class RunMoveOut(Schema):
    id: UUID
    state: str
    at: list[str] = Field(description="the nodes it is at (none: not started)")
    can_move: bool
    moved: bool
    reasons: list[str] = Field(description="why it cannot move, or did not")


class MigrationOut(Schema):
    type: str
    from_version: int
    to_version: int
    renames: dict[str, str]
    applied: bool
    movable: int = Field(description="runs that can move (once applied: that moved)")
    blocked: int = Field(description="runs that cannot move, named in runs with their reasons")
    runs: list[RunMoveOut]


def document_updates(schema: dict[str, Any]) -> dict[str, Any]:
    """Document, in the OpenAPI document `schema`, every registered type's update payloads
    (one component each, the update's `payload` as any one of them) and query names."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    payload = components.get("UpdateIn", {}).get("properties", {}).get("payload")
    choices: list[dict[str, Any]] = []
    updates: dict[str, dict[str, dict[str, str]]] = {}
    queries: dict[str, list[str]] = {}
    for workflow in sorted(registry.all_definitions(), key=lambda w: (w.name, w.version)):
        if workflow.queries:
            queries[workflow.name] = sorted({*queries.get(workflow.name, ()), *workflow.queries})
        for name, update in sorted(workflow.updates.items()):
            reference = openapi.add_model(
                components,
                f"Update_{workflow.name}_v{workflow.version}_{name}",
                update.schema,
                title=f"{workflow.name} v{workflow.version}: {name}",
                about=f"The payload of update {name!r} of workflow type {workflow.name!r} "
                f"(version {workflow.version}).",
            )
            choices.append(reference)
            updates.setdefault(workflow.name, {})[name] = reference
    if payload is not None:
        payload["anyOf"] = [*choices, {"type": "object", "additionalProperties": True}]
        payload.pop("type", None)
        payload["x-baton-updates"] = updates
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            if operation.get("operationId", "").endswith("query_workflow"):
                operation["x-baton-queries"] = queries
    return schema


# ---------------------------------------------------------------------------
# Who may see and act on a run
# ---------------------------------------------------------------------------


def visible_runs(user: Any) -> QuerySet[WorkflowRun]:
    """Runs the user started, runs other apps let them see, or all for operators."""
    runs = WorkflowRun.objects.all()
    if user.has_perm("workflows.view_workflowrun"):
        return runs
    visible = Q(started_by=user)
    for view in registry.run_views():
        visible |= view.visible(user)
    return runs.filter(visible)


def _run(request: HttpRequest, run_id: UUID) -> WorkflowRun:
    """The run, if the user may see it, or its parent (a child run is part of its parent)."""
    visible = visible_runs(request.user)
    run = visible.filter(pk=run_id).first()
    if run is None:
        run = WorkflowRun.objects.filter(pk=run_id, parent_run__isnull=False).first()
        ancestor = run.parent_run_id if run is not None else None
        while ancestor is not None and not visible.filter(pk=ancestor).exists():
            ancestor = (
                WorkflowRun.objects.filter(pk=ancestor)
                .values_list("parent_run_id", flat=True)
                .first()
            )
        if ancestor is None:
            raise not_found("such workflow run")
    return run


def _may_act(request: HttpRequest, run: WorkflowRun) -> None:
    if run.started_by_id != request.user.pk and not _operates(request.user):
        raise ApiProblem(
            403, "Forbidden", "Only whoever started this run, or an operator, can do that."
        )


def _operates(user: Any) -> bool:
    return bool(user.has_perm("workflows.operate_workflowrun"))


def runs_they_may_signal(user: Any) -> QuerySet[WorkflowRun]:
    """The runs `user` may signal, cancel or update: those they started, or all for operators."""
    runs = WorkflowRun.objects.all()
    return runs if _operates(user) else runs.filter(started_by=user)


# ---------------------------------------------------------------------------
# Representations
# ---------------------------------------------------------------------------


def summary(run: WorkflowRun) -> dict[str, Any]:
    return {
        "id": run.id,
        "type": run.workflow_type,
        "version": run.workflow_version,
        "state": run.state,
        "correlation_id": run.correlation_id,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
    }


def details(run: WorkflowRun) -> dict[str, Any]:
    steps = list(run.steps.order_by("id"))
    return {
        **summary(run),
        # Personal values opened for whoever may see the run (erased: the tombstone).
        "input": personal.shown(run.input),
        "result": personal.shown(run.result),
        "error": run.error,
        "idempotency_key": run.idempotency_key,
        "parent_run_id": run.parent_run_id,
        "children": [
            {
                "id": child.id,
                "type": child.workflow_type,
                "state": child.state,
                "node": child.parent_step.node,
                "item": child.parent_step.item,
            }
            for child in run.children.select_related("parent_step").order_by("created_at")
        ],
        "steps": [
            {
                "node": step.node,
                "round": step.round,
                "item": step.item,
                "kind": step.kind,
                "state": step.state,
                "attempts": step.attempt,
                "last_error": step.last_error,
                "started_at": step.started_at,
                "finished_at": step.finished_at,
            }
            for step in steps
        ],
        "open_human_tasks": [
            task for view in registry.run_views() for task in view.open_tasks(run)
        ],
        "compensation": _compensation(run, steps),
    }


def _compensation(run: WorkflowRun, steps: list[StepRun]) -> dict[str, Any]:
    undos = [step for step in steps if step.kind == StepKind.COMPENSATION]

    def nodes(*states: str) -> list[str]:
        return [step.node for step in undos if step.state in states]

    if run.state == RunState.DEAD_LETTERED:
        state = "dead_lettered"
    elif run.state in (RunState.COMPENSATING, RunState.CANCELLING):
        state = "in_progress"
    elif undos:
        state = "completed"
    else:
        state = "none"
    return {
        "state": state,
        "undone": nodes(StepState.SUCCEEDED, StepState.SKIPPED),
        "in_progress": nodes(StepState.SCHEDULED, StepState.RUNNING, StepState.RETRY_WAIT),
        "failed": nodes(StepState.FAILED),
    }


# ---------------------------------------------------------------------------
# Endpoints
# ---------------------------------------------------------------------------


@router.post("", response={200: RunOut, 201: RunOut, **ERRORS}, summary="Start a workflow run")
def start_workflow(
    request: HttpRequest,
    body: StartWorkflowIn,
    idempotency_key: str | None = Header(None, alias="Idempotency-Key", max_length=200),
) -> Status:
    """Start a run as its requester; the same Idempotency-Key again returns the first run
    (200) and starts nothing. 403 if the type is not yours to start, or the input names
    someone else as its requester and you are no operator."""
    try:
        key = clean_text(idempotency_key or "", max_length=200)
    except Refused as error:
        raise ApiProblem(
            422,
            "Invalid request",
            f"The Idempotency-Key header {error}.",
            errors=[{"field": "Idempotency-Key", "message": str(error)}],
        ) from None
    try:
        run, created = starting.start_for(
            user=request.user,
            workflow_type=body.type,
            input=body.input,
            idempotency_key=key,
            correlation_id=body.correlation_id,
            channel="api",
            remote_addr=client_address(request),
        )
    except UnknownWorkflow as error:
        raise ApiProblem(404, "Unknown workflow type", str(error)) from None
    except starting.StartRefused as error:
        raise ApiProblem(403, "Forbidden", str(error)) from None
    except starting.KeyTaken as error:
        raise ApiProblem(409, "Idempotency key taken", str(error)) from None
    except InvalidInput as error:
        raise ApiProblem(
            422,
            "Invalid workflow input",
            "The input does not fit the type's schema.",
            errors=error.errors,
        ) from None
    return Status(201 if created else 200, details(run))


def _iso_8601(value: Any) -> datetime:
    """Read ISO 8601 text into UTC, through workflows.cleaning (pydantic alone would read
    "0.5" as a Unix time, and keep offsets and years PostgreSQL or Python cannot take)."""
    if not isinstance(value, str):
        raise refused(Refused("must be an ISO 8601 date-time, e.g. 2026-11-30T12:00:00Z"))
    try:
        return clean_datetime(value)
    except Refused as error:
        raise refused(error) from None


IsoDateTime = Annotated[datetime, BeforeValidator(_iso_8601)]


class RunQuery(ApiIn):
    state: RunState | None = Field(None, description="default: the active states")
    type: str | None = Field(None, max_length=100)
    correlation_id: str | None = Field(None, max_length=200)
    started_after: IsoDateTime | None = Field(None, description="ISO 8601; UTC if no offset")
    cursor: str | None = Field(None, max_length=200)
    limit: int = Field(50, ge=1, le=200)


@router.get("", response={200: RunPageOut, **ERRORS}, summary="List workflow runs")
def list_workflows(request: HttpRequest, query: Query[RunQuery]) -> dict[str, Any]:
    """List runs newest first, the active ones unless `state` says otherwise; page by cursor."""
    runs = visible_runs(request.user)
    states = [query.state] if query.state else LIVE_RUN_STATES
    runs = runs.filter(state__in=states)
    if query.type:
        runs = runs.filter(workflow_type=query.type)
    if query.correlation_id:
        runs = runs.filter(correlation_id=query.correlation_id)
    if query.started_after:
        runs = runs.filter(created_at__gt=query.started_after)
    limit = query.limit
    after = _decode_cursor(query.cursor)
    if after is not None:
        created_at, last_id = after
        runs = runs.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=last_id))
    return _runs_page(runs, limit=limit)


@replica.reads_replica
def _runs_page(runs: QuerySet[WorkflowRun], *, limit: int) -> dict[str, Any]:
    """Read the first `limit` of `runs`, newest first, and the cursor of the next page."""
    page = list(runs.order_by("-created_at", "-id")[: limit + 1])
    next_cursor = None
    if len(page) > limit:
        page = page[:limit]
        next_cursor = _encode_cursor(page[-1])
    return {"items": [summary(run) for run in page], "next_cursor": next_cursor}


def _encode_cursor(run: WorkflowRun) -> str:
    raw = json.dumps([run.created_at.isoformat(), str(run.id)])
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _decode_cursor(cursor: str | None) -> tuple[datetime, UUID] | None:
    if not cursor:
        return None
    try:
        created_at, run_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return clean_datetime(created_at), UUID(run_id)
    except (ValueError, TypeError, AttributeError):  # Refused is a ValueError
        raise ApiProblem(400, "Bad cursor", "The cursor is not one this API gave out.") from None


@router.post(
    "/migrations",
    response={200: MigrationOut, **ERRORS},
    summary="Move live runs to another version",
)
def migrate_workflows(request: HttpRequest, body: MigrationIn) -> dict[str, Any]:
    """Say for every unfinished run of `type` at `from_version` whether it can move to
    `to_version`, and why not; with `apply`, move the ones that can, each in its own
    transaction, audited (operators only). Runs that cannot move are left as they are.

    Declared before `/{run_id}`, whose pattern would otherwise take the path."""
    if not request.user.has_perm("workflows.operate_workflowrun"):
        raise ApiProblem(403, "Forbidden", "Only operators can move runs to another version.")
    plan = {
        "workflow_type": body.type,
        "from_version": body.from_version,
        "to_version": body.to_version,
        "renames": body.renames,
    }
    try:
        if body.apply:
            report = engine.migrate_runs(
                **plan,
                actor=request.user,
                channel="api",
                remote_addr=client_address(request),
            )
        else:
            report = engine.preview_migration(**plan)
    except UnknownWorkflow as error:
        raise ApiProblem(404, "Unknown workflow version", str(error)) from None
    except InvalidMigration as error:
        raise ApiProblem(
            422,
            "Invalid migration plan",
            "The plan cannot be followed.",
            errors=[{"field": "renames", "message": problem} for problem in error.problems],
        ) from None
    return {
        "type": report.workflow_type,
        "from_version": report.from_version,
        "to_version": report.to_version,
        "renames": dict(report.renames),
        "applied": report.applied,
        "movable": len(report.moved if report.applied else report.movable),
        "blocked": len(report.blocked),
        "runs": [
            {
                "id": run.run_id,
                "state": run.state,
                "at": list(run.at),
                "can_move": run.can_move,
                "moved": run.moved,
                "reasons": list(run.reasons),
            }
            for run in report.runs
        ],
    }


@router.get("/{run_id}", response={200: RunOut, **ERRORS}, summary="Get a workflow run")
def get_workflow(request: HttpRequest, run_id: UUID) -> dict[str, Any]:
    return details(_run(request, run_id))


@router.post(
    "/{run_id}/signals/{name}", response={202: SignalOut, **ERRORS}, summary="Signal a run"
)
def signal_workflow(request: HttpRequest, run_id: UUID, name: str, body: SignalIn) -> Status:
    """Deliver a durable signal; the same signal id twice is accepted once."""
    run = _run(request, run_id)
    _may_act(request, run)
    try:
        clean_text(name, max_length=150)
    except Refused as error:
        raise ApiProblem(422, "Invalid signal", f"A signal name {error}.") from None
    try:
        signal, created = engine.signal_run(
            run_id=run.pk, name=name, payload=body.payload, signal_id=body.id
        )
    except engine.RunAlreadyEnded as error:
        raise ApiProblem(409, "Run has ended", str(error), state=error.state) from None
    except engine.IllegalRunOperation as error:
        raise ApiProblem(403, "Reserved signal", str(error)) from None
    return Status(202, {"signal_id": signal.signal_id, "duplicate": not created})


@router.get(
    "/{run_id}/queries/{name}",
    response={200: QueryOut, **ERRORS},
    summary="Ask a run a query",
)
def query_workflow(request: HttpRequest, run_id: UUID, name: str) -> dict[str, Any]:
    """Answer the run's query `name` from its stored data: nothing is written, no step runs.
    404 for a query the run's type does not have (naming those it has); 422 when the
    query fails for this run, with its error."""
    run = _run(request, run_id)
    try:
        result = queries.query_run(run=run, name=name)
    except queries.UnknownQuery as error:
        raise ApiProblem(404, "Unknown query", str(error)) from None
    except queries.QueryFailed as error:
        raise ApiProblem(422, "Query failed", str(error), state=run.state) from None
    return {"query": name, "result": result}


@router.post(
    "/{run_id}/updates/{name}",
    response={200: UpdateOut, **ERRORS},
    summary="Update a run",
)
def update_workflow(request: HttpRequest, run_id: UUID, name: str, body: UpdateIn) -> Status:
    """Validate the payload against the update's schema, let its handler answer and record
    it, durably, with its effect on the run; answer 200 with the handler's result. The same
    id again answers the first result and changes nothing. 404 for an update the type does
    not have; 409 when the run is not where it accepts the update (ended, paused, not
    waiting where it must); 422 for a payload the schema or the handler refuses."""
    run = _run(request, run_id)
    _may_act(request, run)
    try:
        answer = engine.update_run(
            run_id=run.pk, name=name, payload=body.payload, update_id=body.id
        )
    except engine.UnknownUpdate as error:
        raise ApiProblem(404, "Unknown update", str(error)) from None
    except engine.RunAlreadyEnded as error:
        raise ApiProblem(409, "Run has ended", str(error), state=error.state) from None
    except engine.UpdateNotAccepted as error:
        raise ApiProblem(409, "Update not accepted now", str(error), state=error.state) from None
    except engine.IllegalRunOperation as error:
        raise ApiProblem(409, "Update id taken", str(error)) from None
    except engine.InvalidUpdate as error:
        raise ApiProblem(422, "Update refused", str(error), errors=error.errors) from None
    return Status(
        200,
        {"update_id": answer.update_id, "result": answer.result, "duplicate": answer.duplicate},
    )


@signals_router.post("", response={202: KeyedSignalOut, **ERRORS}, summary="Signal a run by key")
def signal_by_key(request: HttpRequest, body: KeyedSignalIn) -> Status:
    """Find the one live run (pending, running, waiting or paused) of `type` that has the
    correlation id or searchable field value, among the runs you may signal, and signal it
    in one transaction. 404 if none has it; 409 naming how many do if several. With
    `start_if_missing` (and an `id`), start the run when none has the key and signal it in
    the same transaction (Temporal's signal-with-start); a retry with the same id starts
    nothing and answers `duplicate`."""
    start = body.start_if_missing
    try:
        keyed = business_keys.signal_by_key(
            key=body.business_key(),
            name=body.name,
            payload=body.payload,
            signal_id=body.id,
            among=runs_they_may_signal(request.user),
            start_input=start.input if start is not None else None,
            started_by=request.user,
            remote_addr=client_address(request),
        )
    except UnknownWorkflow as error:
        raise ApiProblem(404, "Unknown workflow type", str(error)) from None
    except InvalidKey as error:
        raise ApiProblem(422, "Invalid business key", str(error)) from None
    except NoLiveRun as error:
        raise ApiProblem(404, "No live run", str(error)) from None
    except AmbiguousKey as error:
        raise ApiProblem(409, "Several runs have this key", str(error)) from None
    except starting.StartRefused as error:
        raise ApiProblem(403, "Forbidden", str(error)) from None
    except starting.KeyTaken as error:
        raise ApiProblem(409, "Signal id taken", str(error)) from None
    except InvalidInput as error:
        raise ApiProblem(
            422,
            "Invalid workflow input",
            "The start input does not fit the type's schema.",
            errors=[
                {**problem, "field": f"start_if_missing.input.{problem['field']}"}
                for problem in error.errors
            ],
        ) from None
    except engine.RunAlreadyEnded as error:
        raise ApiProblem(409, "Run has ended", str(error), state=error.state) from None
    except engine.IllegalRunOperation as error:
        raise ApiProblem(403, "Reserved signal", str(error)) from None
    return Status(
        202,
        {
            "run_id": keyed.run_id,
            "signal_id": keyed.signal_id,
            "duplicate": keyed.duplicate,
            "started": keyed.started,
        },
    )


@router.post("/{run_id}/cancel", response={202: RunStateOut, **ERRORS}, summary="Cancel a run")
def cancel_workflow(request: HttpRequest, run_id: UUID) -> Status:
    run = _run(request, run_id)
    _may_act(request, run)
    try:
        run = act_on_run(
            use_case=engine.cancel_run,
            run_id=run.pk,
            actor=request.user,
            channel="api",
            remote_addr=client_address(request),
        )
    except engine.RunAlreadyEnded as error:
        raise ApiProblem(409, "Run has ended", str(error), state=error.state) from None
    return Status(202, {"id": run.pk, "state": run.state})


@router.post(
    "/{run_id}/retry", response={202: RunStateOut, **ERRORS}, summary="Retry a dead-lettered run"
)
def retry_workflow(request: HttpRequest, run_id: UUID) -> Status:
    """Try a dead-lettered run's failed step again (operators only)."""
    return _operate(request, run_id, engine.retry_dead_letter, "retry a dead-lettered run")


@router.post("/{run_id}/pause", response={202: RunStateOut, **ERRORS}, summary="Pause a run")
def pause_workflow(request: HttpRequest, run_id: UUID) -> Status:
    """Start no new step of a running or waiting run until it is resumed (operators only).

    Steps already running finish and are recorded; pausing a paused run is accepted.
    """
    return _operate(request, run_id, engine.pause_run, "pause a run")


@router.post("/{run_id}/resume", response={202: RunStateOut, **ERRORS}, summary="Resume a run")
def resume_workflow(request: HttpRequest, run_id: UUID) -> Status:
    """Let a paused run go on, re-sending the steps it held back (operators only)."""
    return _operate(request, run_id, engine.resume_run, "resume a run")


def _operate(
    request: HttpRequest, run_id: UUID, action: Callable[..., WorkflowRun], what: str
) -> Status:
    """Apply an operator's action to a run: 403 for others, 409 saying why it cannot apply."""
    run = _run(request, run_id)
    if not request.user.has_perm("workflows.operate_workflowrun"):
        raise ApiProblem(403, "Forbidden", f"Only operators can {what}.")
    try:
        run = act_on_run(
            use_case=action,
            run_id=run.pk,
            actor=request.user,
            channel="api",
            remote_addr=client_address(request),
        )
    except engine.IllegalRunOperation as error:
        raise ApiProblem(409, "Not possible now", str(error), state=run.state) from None
    return Status(202, {"id": run.pk, "state": run.state})
