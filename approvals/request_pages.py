"""The read side of requests: a person's requests, paged by keyset, and one request's page.

"My requests" reads `run_started_by_idx` (started_by, created_at, id) backwards:
a page is one short range of it, whatever the number of runs in the system, and
its cost grows with the person's own runs at most (a state or type filter is
applied to that range). Where each run of a page stands now (which step, waiting
for whom, since when, due when; for an ended one, how it was last decided) comes
in a constant number of queries: the live steps, the tasks, and their candidates.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any
from uuid import UUID

from auditlog.models import LogEntry
from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet
from django.db.models.fields.tuple_lookups import Tuple, TupleLessThan
from django.utils import formats, timezone
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.translation import gettext as _

from approvals import money, permissions, start_forms
from approvals.models import Comment, HumanTask
from approvals.states import LIVE_TASK_STATES, TaskKind, TaskState, outcome_words
from workflows import personal, queues, registry, starting
from workflows.cleaning import clean_datetime
from workflows.diagram import Diagram, draw, limits_note
from workflows.dsl import (
    Activity,
    ChildWorkflow,
    Join,
    Map,
    Sleep,
    WaitForSignal,
    Workflow,
    node_words,
)
from workflows.models import StepEvent, StepRun, WorkflowRun
from workflows.registry import UnknownWorkflow
from workflows.states import FINAL_RUN_STATES, LIVE_RUN_STATES, LIVE_STEP_STATES, RunState, StepKind

PAGE_SIZE = 25
# A cursor holds a time and a run id: well under this once encoded.
CURSOR_MAX_LENGTH = 200
ACTIVE = "active"
STATE_FILTERS = {ACTIVE: "Active", **dict(RunState.choices)}


class RequestNotFound(Exception):
    status = 404

    def __init__(self) -> None:
        super().__init__("No such request (or it is not yours to see).")


# ---------------------------------------------------------------------------
# Where a run stands
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Position:
    """One place a run is at now: a stage, what it waits for, since when, due when."""

    stage: str
    waiting_for: str
    since: datetime | None = None
    due: datetime | None = None
    # How an ended request was last decided: "rejected by Carol Carter".
    outcome: str = ""


def _name(user: Any) -> str:
    return user.get_full_name() or user.get_username()


def _people(task: HumanTask) -> str:
    """Who may act on a live task, in words: its holder, or its candidates."""
    if task.assignee_id:
        return _name(task.assignee)
    names = [_name(user) for user in task.candidate_users.all()]
    names += [
        _("the %(group)s group") % {"group": group.name} for group in task.candidate_groups.all()
    ]
    if not names:
        return _("an operator")
    if len(names) == 1:
        return names[0]
    return _("%(some)s or %(last)s") % {"some": ", ".join(names[:-1]), "last": names[-1]}


def _waiting_for(task: HumanTask) -> str:
    people = _people(task)
    if task.kind == TaskKind.REVISION:
        return _("changes by %(people)s (sent back for changes)") % {"people": people}
    if task.kind == TaskKind.ENTRY:
        return _("%(people)s to fill in its form") % {"people": people}
    if task.owner_id:
        return _("a decision by %(people)s (delegated by %(owner)s)") % {
            "people": people,
            "owner": _name(task.owner),
        }
    return _("a decision by %(people)s") % {"people": people}


def positions(
    run: WorkflowRun, steps: Iterable[StepRun], tasks: Iterable[HumanTask]
) -> list[Position]:
    """Return where `run` is: its live forward steps, each open task of theirs a place
    of its own; or how it ended, with its last decision among `tasks`."""
    if run.state in FINAL_RUN_STATES:
        return [
            Position(stage=_("ended"), waiting_for="", since=run.finished_at, outcome=_last(tasks))
        ]
    if run.state in (RunState.COMPENSATING, RunState.CANCELLING):
        return [
            Position(stage=_("being undone"), waiting_for=_("its completed steps to be undone"))
        ]
    if run.state == RunState.DEAD_LETTERED:
        return [Position(stage=_("stopped"), waiting_for=_("an operator (an undo failed)"))]
    if run.state == RunState.PENDING:
        return [
            Position(stage=_("not started"), waiting_for=_("a free slot"), since=run.created_at)
        ]
    definition = definition_of(run)
    tasks_by_step: dict[int, list[HumanTask]] = {}
    for task in tasks:
        if task.is_live:
            tasks_by_step.setdefault(task.step_id, []).append(task)
    found: list[Position] = []
    for step in steps:
        open_tasks = tasks_by_step.get(step.pk, [])
        if open_tasks:
            found.extend(
                Position(
                    stage=node_words(definition, step.node),
                    waiting_for=_waiting_for(task),
                    since=task.created_at,
                    due=task.due_at,
                )
                for task in open_tasks
            )
            continue
        found.append(_step_position(step, definition))
    if run.state == RunState.PAUSED:
        found.insert(0, Position(stage=_("paused"), waiting_for=_("an operator to resume it")))
    return found


def _last(tasks: Iterable[HumanTask]) -> str:
    decided = [task for task in tasks if task.decided_at is not None]
    if not decided:
        return ""
    last = max(decided, key=lambda task: (task.decided_at, task.created_at))
    who = _name(last.decided_by) if last.decided_by_id else _("the system")
    return _("%(outcome)s by %(person)s") % {"outcome": outcome_words(last.outcome), "person": who}


def _step_position(step: StepRun, definition: Workflow | None) -> Position:
    node = definition.nodes_by_name.get(step.node) if definition else None
    stage = node_words(definition, step.node)
    if step.state == "waiting":
        if isinstance(node, Sleep):
            return Position(stage, _("its timer"), since=step.started_at, due=step.due_at)
        if isinstance(node, Join):
            return Position(stage, _("its other branches"), since=step.started_at)
        if isinstance(node, WaitForSignal):
            return Position(stage, _("a signal"), since=step.started_at, due=step.due_at)
        if isinstance(node, Map) and isinstance(step.result, dict):
            done = {"ended": step.result.get("ended", 0), "count": step.result.get("count", 0)}
            return Position(
                stage, _("its items (%(ended)s of %(count)s done)") % done, since=step.scheduled_at
            )
        if isinstance(node, ChildWorkflow):
            return Position(
                stage,
                _("a %(type)s run") % {"type": starting.kind_named(node.workflow)},
                since=step.started_at,
            )
    if step.state == "retry_wait":
        return Position(
            stage, _("another attempt after an error"), since=step.finished_at, due=step.due_at
        )
    if step.state == "running":
        return Position(stage, _("a worker to finish it"), since=step.started_at)
    if isinstance(node, Activity | Map) and queues.is_limited(node):
        # It may be held back by its limits: say which (the timeline says when it was).
        return Position(
            stage,
            _("a worker to pick it up, within its limits (%(limits)s)")
            % {"limits": limits_note(node)},
            since=step.scheduled_at,
        )
    return Position(stage, _("a worker to pick it up"), since=step.scheduled_at)


def definition_of(run: WorkflowRun) -> Workflow | None:
    """The run's definition, or None if its type or version is no longer registered."""
    try:
        return registry.get(run.workflow_type, run.workflow_version)
    except UnknownWorkflow:
        return None


def kind_words(run: WorkflowRun) -> str:
    """The run's type in words, in the reader's language ("Ausgabe" for an expense, in
    German): its definition's title, or its name with spaces."""
    return starting.kind_named(run.workflow_type, run.workflow_version)


def where_now(runs: list[WorkflowRun]) -> dict[UUID, list[Position]]:
    """Where each run stands, in four queries however many runs there are: live steps,
    open and decided tasks, and the open tasks' candidates (people, then groups)."""
    live = [run.pk for run in runs if run.state in LIVE_RUN_STATES]
    steps: dict[UUID, list[StepRun]] = {}
    tasks: dict[UUID, list[HumanTask]] = {}
    if live:
        # A map stands in for its items: a list of a thousand is one place, not a thousand.
        for step in StepRun.objects.filter(
            run_id__in=live, kind=StepKind.FORWARD, state__in=LIVE_STEP_STATES, item__isnull=True
        ).order_by("scheduled_at", "id"):
            steps.setdefault(step.run_id, []).append(step)
    if runs:
        for task in (
            HumanTask.objects.filter(
                run_id__in=[run.pk for run in runs],
                state__in=[*LIVE_TASK_STATES, TaskState.COMPLETED],
            )
            .select_related("assignee", "owner", "decided_by")
            .prefetch_related("candidate_users", "candidate_groups")
            .order_by("created_at", "id")
        ):
            tasks.setdefault(task.run_id, []).append(task)
    return {run.pk: positions(run, steps.get(run.pk, []), tasks.get(run.pk, [])) for run in runs}


# ---------------------------------------------------------------------------
# My requests
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestFilters:
    state: str = ""
    workflow_type: str = ""
    cursor: str = ""

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> RequestFilters:
        """Read filters from a query: a value that is not one of the choices is ignored,
        and so is a cursor longer than any `my_requests` gives out."""
        state = query.get("state", "")
        workflow_type = query.get("type", "")
        cursor = query.get("cursor", "")
        return cls(
            state=state if state in STATE_FILTERS else "",
            workflow_type=workflow_type if workflow_type in request_types() else "",
            cursor=cursor if len(cursor) <= CURSOR_MAX_LENGTH else "",
        )


@dataclass(frozen=True)
class RequestRow:
    run: WorkflowRun
    kind: str
    where: list[Position]

    @property
    def state(self) -> str:
        return state_words(self.run.state)

    @property
    def headline(self) -> str:
        return headline(self.run)


def headline(run: WorkflowRun) -> str:
    """A few words that tell a request from others of its type: the first text of its
    input, in its schema's order, that is not its requester (an expense's title, an
    order's id)."""
    definition = definition_of(run)
    # Neither its requester nor a personal value heads it in lists.
    skip = {definition.requester_field, *definition.personal_input} if definition else set()
    for name, value in in_schema_order(run.input, definition):
        if name not in skip and isinstance(value, str) and value.strip():
            return value
    return ""


def in_schema_order(data: Mapping[str, Any], definition: Workflow | None) -> list[tuple[str, Any]]:
    """The input's fields in the order its schema declares them (PostgreSQL keeps JSON
    keys in an order of its own), then any the schema does not know."""
    return _in_order(data, definition.input_schema if definition else None)


def _in_order(data: Mapping[str, Any], schema: Any) -> list[tuple[str, Any]]:
    declared = list(schema.model_fields) if schema else []
    order = {name: index for index, name in enumerate(declared)}
    return sorted(data.items(), key=lambda item: (order.get(item[0], len(order)), item[0]))


def state_words(state: str) -> str:
    """A run's state in a word or two: "waiting", "dead lettered"."""
    words = {
        RunState.PENDING: _("pending"),
        RunState.RUNNING: _("running"),
        RunState.WAITING: _("waiting"),
        RunState.PAUSED: _("paused"),
        RunState.SUCCEEDED: _("succeeded"),
        RunState.FAILED: _("failed"),
        RunState.COMPENSATING: _("compensating"),
        RunState.COMPENSATED: _("compensated"),
        RunState.CANCELLING: _("cancelling"),
        RunState.CANCELLED: _("cancelled"),
        RunState.DEAD_LETTERED: _("dead lettered"),
    }
    return words.get(state, state.replace("_", " "))


@dataclass
class Page:
    rows: list[RequestRow] = field(default_factory=list)
    next_cursor: str = ""


def my_requests(*, user: Any, filters: RequestFilters, limit: int = PAGE_SIZE) -> Page:
    """Return one page of the runs `user` started, newest first, after `filters.cursor`."""
    runs = _mine(user, filters)
    after = decode_cursor(filters.cursor)
    if after is not None:
        runs = runs.filter(TupleLessThan(Tuple("created_at", "id"), after))
    page = list(runs.order_by("-created_at", "-id")[: limit + 1])
    next_cursor = ""
    if len(page) > limit:
        page = page[:limit]
        next_cursor = encode_cursor(page[-1])
    where = where_now(page)
    return Page(
        rows=[RequestRow(run=run, kind=kind_words(run), where=where[run.pk]) for run in page],
        next_cursor=next_cursor,
    )


def _mine(user: Any, filters: RequestFilters) -> QuerySet[WorkflowRun]:
    runs = WorkflowRun.objects.filter(started_by=user)
    if filters.state == ACTIVE:
        runs = runs.filter(state__in=LIVE_RUN_STATES)
    elif filters.state:
        runs = runs.filter(state=filters.state)
    if filters.workflow_type:
        runs = runs.filter(workflow_type=filters.workflow_type)
    return runs


def encode_cursor(row: WorkflowRun | HumanTask) -> str:
    """Say where a page of runs (or human tasks) newest first ends, at `row`: shared with
    the operators' console's lists."""
    raw = json.dumps([row.created_at.isoformat(), str(row.pk)])
    return base64.urlsafe_b64encode(raw.encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, UUID] | None:
    """Read a cursor made by `encode_cursor`; a damaged one reads as None (the first page)."""
    if not cursor:
        return None
    try:
        created_at, run_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return clean_datetime(created_at), UUID(run_id)
    except (ValueError, TypeError, AttributeError):  # Refused is a ValueError
        return None


def request_types() -> list[str]:
    """The types the filter offers: every registered one."""
    return sorted({workflow.name for workflow in registry.all_definitions()})


# ---------------------------------------------------------------------------
# One request
# ---------------------------------------------------------------------------


def requesters_of(run: WorkflowRun) -> frozenset[str]:
    """The usernames who asked for `run` (see approvals.permissions.run_requesters)."""
    definition = definition_of(run)
    started_by = run.started_by.get_username() if run.started_by_id else None
    if definition is None:
        return frozenset({started_by} if started_by else ())
    return permissions.run_requesters(
        workflow=definition, run_input=run.input, started_by=started_by
    )


def is_request_operator(user: Any) -> bool:
    """Operators see every request and withdraw any; so do those who may view all runs."""
    return starting.is_operator(user) or user.has_perm("workflows.view_workflowrun")


def visible_request(*, run_id: UUID, user: Any) -> WorkflowRun:
    """Return the run if `user` may see its request page; raise RequestNotFound otherwise."""
    run = WorkflowRun.objects.select_related("started_by").filter(pk=run_id).first()
    if run is None:
        raise RequestNotFound()
    requesters = requesters_of(run)
    username = user.get_username()
    operator = is_request_operator(user)
    has_task = (
        not operator
        and username not in requesters
        and WorkflowRun.objects.filter(pk=run.pk).filter(runs_with_my_tasks(user)).exists()
    )
    if not permissions.can_see_request(
        username=username, requesters=requesters, has_task=has_task, is_operator=operator
    ):
        raise RequestNotFound()
    return run


@dataclass(frozen=True)
class InputRow:
    """One field of a run's input, as shown: text, a table (a list of rows) or pairs."""

    label: str
    text: str = ""
    columns: list[str] = field(default_factory=list)
    table: list[list[str]] = field(default_factory=list)
    pairs: list[tuple[str, str]] = field(default_factory=list)


def input_rows(run: WorkflowRun, definition: Workflow | None) -> list[InputRow]:
    """The run's input under the labels its start form uses."""
    return data_rows(personal.shown(run.input), definition.input_schema if definition else None)


def data_rows(data: Mapping[str, Any], schema: Any) -> list[InputRow]:
    """`data` under the labels the form of `schema` (a pydantic model, or None) uses, in
    its order: a run's input, or the values a decider entered in a task form."""
    specs = {item.name: item for item in start_forms.spec_for(schema).fields}
    # An amount beside a currency ("amount" and "currency", as the shipped types have
    # them) is shown as money: "1.500,00 €" in German, "€1,500.00" in English.
    currency = _currency_of(data)
    rows = []
    for name, value in _in_order(data, schema):
        spec = specs.get(name)
        label = spec.label if spec else name.replace("_", " ").capitalize()
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            keys = list(dict.fromkeys(key for item in value for key in item))
            columns = [
                column
                for column in getattr(spec, "columns", ())
                if isinstance(column, start_forms.FieldSpec)
            ]
            labels = {column.name: column.label for column in columns}
            widgets = {column.name: column.widget for column in columns}
            rows.append(
                InputRow(
                    label=label,
                    columns=[labels.get(key, key) for key in keys],
                    table=[
                        [_text(item.get(key, ""), widget=widgets.get(key, "")) for key in keys]
                        for item in value
                    ],
                )
            )
        elif isinstance(value, dict):
            rows.append(InputRow(label=label, pairs=[(k, _text(v)) for k, v in value.items()]))
        else:
            rows.append(InputRow(label=label, text=_field_text(value, spec, currency)))
    return rows


def _currency_of(data: Mapping[str, Any]) -> str:
    """The ISO 4217 code the decimal fields of `data` are amounts of ("" if none)."""
    code = data.get(CURRENCY_FIELD)
    return code if money.is_currency(code) else ""


def _field_text(value: Any, spec: Any, currency: str) -> str:
    """One field's value as the request page shows it: an amount as money in `currency`
    ("1.500,00 €" in German), a choice under its option's label, a number, date or yes
    or no as the reader's language writes it."""
    widget = spec.widget if isinstance(spec, start_forms.FieldSpec) else ""
    shown = money.money(value, currency) if widget == "decimal" and currency else None
    if widget == "select" and isinstance(spec, start_forms.FieldSpec):
        # A choice under the label its option reads (a type may translate it).
        shown = next((label for key, label in spec.choices if key == str(value)), None)
    return shown or _text(value, widget=widget)


_NUMBER_WIDGETS = frozenset({"decimal", "number", "integer"})
_DATE_WIDGETS = frozenset({"date", "datetime"})
# The field whose ISO 4217 code the decimal fields beside it are amounts of.
CURRENCY_FIELD = "currency"


def _text(value: Any, *, widget: str = "") -> str:
    """A value as the reader's language writes it: numbers of number fields with its
    decimal mark ("1500,00" in German, as stored "1500.00" in English), dates and times
    of date fields in its format ("24.12.2026"), yes or no."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return _("yes") if value else _("no")
    if isinstance(value, dict | list):
        return json.dumps(value)
    if widget in _DATE_WIDGETS and isinstance(value, str):
        return _date_text(value, widget=widget)
    if widget in _NUMBER_WIDGETS and isinstance(value, str | int | float):
        try:
            number = Decimal(str(value))
        except InvalidOperation:
            return str(value)
        if number.is_finite():
            places = max(0, -number.as_tuple().exponent) if isinstance(value, str) else None
            return formats.number_format(number, decimal_pos=places, use_l10n=True)
    return str(value)


def _date_text(value: str, *, widget: str) -> str:
    """A stored ISO 8601 date ("2026-12-24") or date and time in the reader's format, a
    time with an offset in the reader's zone; text that is neither is shown as it is."""
    try:
        if widget == "date":
            day = parse_date(value)
            return formats.date_format(day, _("Y-m-d")) if day else value
        moment = parse_datetime(value)
    except ValueError:
        return value
    if moment is None:
        return value
    if timezone.is_aware(moment):
        return formats.date_format(timezone.localtime(moment), _("Y-m-d H:i T"))
    return formats.date_format(moment, _("Y-m-d H:i"))


@dataclass(frozen=True)
class Change:
    """One field a resubmission changed, under its start form's label."""

    label: str
    old: str
    new: str


@dataclass(frozen=True)
class Decision:
    """A task of the request, with what its decider entered in its form, labelled, and
    for a revision, what the resubmission changed."""

    task: HumanTask
    values: list[InputRow]
    changes: list[Change] = field(default_factory=list)


def changes_of(task: HumanTask, definition: Workflow | None, *, currency: str = "") -> list[Change]:
    """What `task`'s resubmission changed in the request, field by field, old → new,
    under the start form's labels and written as the request page writes its input;
    `currency` is the request's currency once resubmitted (an amount's old value is in
    the old currency when the resubmission changed that too)."""
    if not task.changes:
        return []
    schema = definition.input_schema if definition else None
    specs = {item.name: item for item in start_forms.spec_for(schema).fields}
    changes = personal.shown(task.changes)
    old_currency = currency
    if CURRENCY_FIELD in changes:
        old_currency = _currency_of({CURRENCY_FIELD: changes[CURRENCY_FIELD][0]})
    rows = []
    for name, (old, new) in _in_order(changes, schema):
        spec = specs.get(name)
        rows.append(
            Change(
                label=spec.label if spec else name.replace("_", " ").capitalize(),
                old=_field_text(old, spec, old_currency) or "—",
                new=_field_text(new, spec, currency) or "—",
            )
        )
    return rows


def _currencies_after(run: WorkflowRun, tasks: list[HumanTask]) -> dict[UUID, str]:
    """The request's currency just after each of `tasks` (oldest first) was answered: the
    input's now, taken back through each later resubmission that changed it."""
    currency = _currency_of(personal.shown(run.input))
    after: dict[UUID, str] = {}
    for task in reversed(tasks):
        after[task.pk] = currency
        changed = personal.shown(task.changes or {}).get(CURRENCY_FIELD)
        if changed:
            currency = _currency_of({CURRENCY_FIELD: changed[0]})
    return after


def decision_values(task: HumanTask, definition: Workflow | None) -> list[InputRow]:
    """The values `task`'s decider entered in its approval's form, under the form's labels."""
    if not task.form_values:
        return []
    node = definition.nodes_by_name.get(task.node) if definition else None
    return data_rows(personal.shown(task.form_values), getattr(node, "form", None))


@dataclass(frozen=True)
class RequestPage:
    run: WorkflowRun
    kind: str
    requesters: frozenset[str]
    where: list[Position]
    input_rows: list[InputRow]
    # What names its nodes in words (the timeline's `node_words` filter); None if gone.
    definition: Workflow | None
    diagram: Diagram | None
    events: list[StepEvent]
    tasks: list[HumanTask]
    trail: list[LogEntry]
    decisions: list[Decision] = field(default_factory=list)


def request_page(run: WorkflowRun) -> RequestPage:
    """Everything a request's page shows, read in a fixed number of queries."""
    definition = definition_of(run)
    steps = list(run.steps.all())
    tasks = list(
        run.human_tasks.select_related("assignee", "owner", "decided_by")
        .prefetch_related(
            "candidate_users",
            "candidate_groups",
            Prefetch("comments", queryset=Comment.objects.select_related("author")),
        )
        .order_by("created_at", "id")
    )
    currencies = _currencies_after(run, tasks)
    live_steps = [
        step
        for step in steps
        if step.kind == StepKind.FORWARD and step.state in LIVE_STEP_STATES and step.item is None
    ]
    return RequestPage(
        run=run,
        kind=kind_words(run),
        requesters=requesters_of(run),
        where=positions(run, sorted(live_steps, key=lambda s: (s.scheduled_at, s.pk)), tasks),
        input_rows=input_rows(run, definition),
        definition=definition,
        diagram=draw(definition, steps) if definition else None,
        events=list(run.events.select_related("step").order_by("at", "id")),
        tasks=tasks,
        decisions=[
            Decision(
                task=task,
                values=decision_values(task, definition),
                changes=changes_of(task, definition, currency=currencies[task.pk]),
            )
            for task in tasks
        ],
        trail=list(
            LogEntry.objects.get_for_object(run).select_related("actor").order_by("timestamp", "id")
        ),
    )


def has_tasks(run: WorkflowRun) -> bool:
    return HumanTask.objects.filter(run=run).exists()


def runs_with_my_tasks(user: Any) -> Q:
    """Runs in which the user has a task they may see (so they may see the run too)."""
    tasks = HumanTask.objects.filter(run_id=OuterRef("pk")).filter(
        Q(assignee=user)
        | Q(owner=user)
        | Q(decided_by=user)
        | Q(candidate_users=user)
        | Q(candidate_groups__in=user.groups.all())
    )
    return Q(Exists(tasks))


def open_tasks_of(run: Any) -> list[dict[str, Any]]:
    """The run's live tasks as the workflows API shows them to whoever may see the run."""
    tasks = HumanTask.objects.filter(run=run, state__in=LIVE_TASK_STATES).select_related("assignee")
    return [
        {
            "id": task.pk,
            "node": task.node,
            "title": task.title,
            "state": task.state,
            "assignee": task.assignee.get_username() if task.assignee else None,
            "due_at": task.due_at,
        }
        for task in tasks.order_by("created_at", "id")
    ]
