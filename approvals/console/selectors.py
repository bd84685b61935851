"""The read side of the operators' run console: every run, filtered and paged; one run whole.

The list reads runs newest first by keyset (created_at, id) through an index:
`run_created_idx` unfiltered, `run_state_created_idx` by state, `run_correlation_idx`
by correlation id, `run_started_by_idx` by requester, and the GIN index on the input
for a business key (the fields a definition declares `searchable`, matched exactly).
A page costs two queries whatever its size: the runs with their requesters, and
their live steps; a search one more, the ids of the runs it matches first
(`_found_first`). A run's page reuses the request page's read
(`request_pages.request_page`: picture, timeline, tasks, audit trail) and adds
what only operators need: every step with its attempts and errors, and signals.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from uuid import UUID

from django.db.models import Q, QuerySet
from django.db.models.fields.tuple_lookups import Tuple, TupleLessThan
from django.utils.translation import gettext as _

from approvals import request_pages
from approvals.console import services
from approvals.request_pages import RequestPage
from workflows import personal, registry, replica
from workflows.cleaning import Refused, clean_text
from workflows.models import Signal, StepEvent, StepRun, WorkflowRun
from workflows.states import EventKind, RunState

PAGE_SIZE = 25
SEARCH_MAX_LENGTH = 200
_VERSION = re.compile(r"[1-9][0-9]{0,8}")


# ---------------------------------------------------------------------------
# Filters
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RunFilters:
    workflow_type: str = ""
    version: int | None = None
    state: str = ""
    started_from: date | None = None
    started_to: date | None = None
    # Finished between (the SLA dashboard's numbers link here), days inclusive.
    finished_from: date | None = None
    finished_to: date | None = None
    requester: str = ""
    correlation_id: str = ""
    search: str = ""
    cursor: str = ""
    # What was given but could not be read, in words; the filter is left out.
    problems: tuple[str, ...] = ()

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> RunFilters:
        """Read filters from a query string; say what was ignored, and why."""
        problems: list[str] = []
        workflow_type = query.get("type", "").strip()
        if workflow_type and workflow_type not in workflow_types():
            problems.append(
                _("There is no workflow type %(type)s; showing every type.")
                % {"type": repr(workflow_type)}
            )
            workflow_type = ""
        raw_version = query.get("version", "").strip()
        version = int(raw_version) if _VERSION.fullmatch(raw_version) else None
        if raw_version and version is None:
            problems.append(_("A version is a whole number such as 1; showing every version."))
        state = query.get("state", "").strip()
        if state and state not in RunState.values:
            problems.append(
                _("There is no run state %(state)s; showing every state.") % {"state": repr(state)}
            )
            state = ""

        def day(key: str, label: str) -> date | None:
            return query_date(query, key=key, label=label, problems=problems)

        def text(key: str, label: str, max_length: int) -> str:
            return query_text(query, key=key, label=label, max_length=max_length, problems=problems)

        started_from = day("from", _("Started from"))
        started_to = day("to", _("Started until"))
        finished_from = day("finished_from", _("Finished from"))
        finished_to = day("finished_to", _("Finished until"))
        requester = text("requester", _("A requester"), 150)
        correlation_id = text("correlation_id", _("A correlation id"), 200)
        search = text("q", _("A search"), SEARCH_MAX_LENGTH)
        cursor = query.get("cursor", "")
        return cls(
            workflow_type=workflow_type,
            version=version,
            state=state,
            started_from=started_from,
            started_to=started_to,
            finished_from=finished_from,
            finished_to=finished_to,
            requester=requester,
            correlation_id=correlation_id,
            search=search,
            cursor=cursor if len(cursor) <= request_pages.CURSOR_MAX_LENGTH else "",
            problems=tuple(problems),
        )


def query_date(
    query: Mapping[str, str], *, key: str, label: str, problems: list[str]
) -> date | None:
    """Return the date (YYYY-MM-DD) at `key`, or None; if it is not one, say so in
    `problems`, naming it by `label`, and leave it out."""
    raw = query.get(key, "").strip()
    if not raw:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        problems.append(
            _("%(label)s must be a date such as 2026-12-01; left out.") % {"label": label}
        )
        return None


def query_text(
    query: Mapping[str, str], *, key: str, label: str, max_length: int, problems: list[str]
) -> str:
    """Return the text at `key` as workflows.cleaning lets it in; if it refuses it, say
    why in `problems`, naming it by `label`, and leave it out."""
    value = query.get(key, "").strip()
    try:
        return clean_text(value, max_length=max_length)
    except Refused as error:
        problems.append(_("%(label)s %(error)s; left out.") % {"label": label, "error": error})
        return ""


def workflow_types() -> list[str]:
    return request_pages.request_types()


def versioned_types() -> dict[str, list[int]]:
    """Each registered type's versions, oldest first: what a move between versions offers."""
    versions: dict[str, list[int]] = {}
    for definition in registry.all_definitions():
        versions.setdefault(definition.name, []).append(definition.version)
    return {name: sorted(numbers) for name, numbers in sorted(versions.items())}


def searchable_fields() -> dict[str, tuple[str, ...]]:
    """The business keys each workflow type declares, for the search box's hint."""
    fields: dict[str, set[str]] = {}
    for definition in registry.all_definitions():
        fields.setdefault(definition.name, set()).update(definition.searchable)
    return {name: tuple(sorted(keys)) for name, keys in sorted(fields.items()) if keys}


# ---------------------------------------------------------------------------
# The list
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRow:
    run: WorkflowRun
    keys: list[tuple[str, str]]
    # Where it stands, in people's words: "security review: waiting for a decision by
    # the security group", as the requester's pages say it.
    where: list[request_pages.Position]

    @property
    def state(self) -> str:
        return request_pages.state_words(self.run.state)

    @property
    def failed_node(self) -> str:
        error = self.run.error or {}
        return str(error.get("node", ""))


@dataclass
class RunsPage:
    rows: list[RunRow] = field(default_factory=list)
    next_cursor: str = ""


@replica.reads_replica
def runs_page(*, filters: RunFilters, limit: int = PAGE_SIZE) -> RunsPage:
    """Return one page of runs matching `filters`, newest first, after `filters.cursor`."""
    runs = filtered_runs(filters)
    if filters.search:
        runs = _found_first(runs)
    after = request_pages.decode_cursor(filters.cursor)
    if after is not None:
        runs = runs.filter(TupleLessThan(Tuple("created_at", "id"), after))
    page = list(runs.select_related("started_by").order_by("-created_at", "-id")[: limit + 1])
    next_cursor = ""
    if len(page) > limit:
        page = page[:limit]
        next_cursor = request_pages.encode_cursor(page[-1])
    where = request_pages.where_now(page)
    return RunsPage(
        rows=[RunRow(run=run, keys=business_keys(run), where=where[run.pk]) for run in page],
        next_cursor=next_cursor,
    )


def filtered_runs(filters: RunFilters) -> QuerySet[WorkflowRun]:
    runs = WorkflowRun.objects.all()
    if filters.workflow_type:
        runs = runs.filter(workflow_type=filters.workflow_type)
    if filters.version is not None:
        runs = runs.filter(workflow_version=filters.version)
    if filters.state:
        runs = runs.filter(state=filters.state)
    if filters.started_from:
        runs = runs.filter(created_at__gte=start_of(filters.started_from))
    if filters.started_to:
        runs = runs.filter(created_at__lt=start_of(filters.started_to + timedelta(days=1)))
    if filters.finished_from:
        runs = runs.filter(finished_at__gte=start_of(filters.finished_from))
    if filters.finished_to:
        runs = runs.filter(finished_at__lt=start_of(filters.finished_to + timedelta(days=1)))
    if filters.requester:
        runs = runs.filter(started_by__username=filters.requester)
    if filters.correlation_id:
        runs = runs.filter(correlation_id=filters.correlation_id)
    if filters.search:
        runs = runs.filter(_search(filters.search, filters.workflow_type))
    return runs


# A search reads the ids of at most this many runs it matches, before their page.
SEARCH_FEW = 500


def _found_first(runs: QuerySet[WorkflowRun]) -> QuerySet[WorkflowRun]:
    """The runs a search matches, read by their ids when they are few.

    A business key names one run or a handful, but the planner cannot know it: it
    prices a key it has no statistics for at its floor (one run in 10,000 a field),
    so on millions of runs it expects a match every few hundred runs and rather walks
    the time index backwards until a page is full. For an order of three years ago
    that walk reads the whole history. Asked for the matches' ids alone (no order,
    so no walk to prefer), it reads the GIN index on the input; the page then reads
    those runs by their primary key. A value that many runs share (a currency) has
    more than SEARCH_FEW matches, and newest first through the time index then finds a
    page soon: that query is left to the planner, as before.
    """
    ids = list(runs.order_by().values_list("pk", flat=True)[: SEARCH_FEW + 1])
    if len(ids) > SEARCH_FEW:
        return runs
    return WorkflowRun.objects.filter(pk__in=ids)


def start_of(day: date) -> datetime:
    """Return the first moment of `day` in UTC: the console's dates are UTC days."""
    return datetime.combine(day, time.min, tzinfo=UTC)


def _search(term: str, workflow_type: str) -> Q:
    """Match a run id, or any declared business key equal to `term` (as text, or as the
    whole number it spells), all through the GIN index on the input: one containment
    test per key name, whichever types declare it (the type filter narrows apart)."""
    found = Q(pk__in=[])
    with contextlib.suppress(ValueError):
        found |= Q(pk=UUID(term))
    values: list[Any] = [term]
    if re.fullmatch(r"-?[0-9]{1,15}", term):
        values.append(int(term))
    names = sorted(
        {
            name
            for definition in registry.all_definitions()
            if workflow_type in ("", definition.name)
            for name in definition.searchable
        }
    )
    for name in names:
        for value in values:
            found |= Q(input__contains={name: value})
    return found


def business_keys(run: WorkflowRun) -> list[tuple[str, str]]:
    """The run's declared business keys and their values; else its request headline."""
    definition = request_pages.definition_of(run)
    shown = {
        row.label: row.text
        for row in request_pages.data_rows(
            {
                name: run.input[name]
                for name in (definition.searchable if definition else ())
                if isinstance(run.input, dict) and run.input.get(name) not in (None, "")
            },
            definition.input_schema if definition else None,
        )
    }
    keys = list(shown.items())
    if not keys:
        headline = request_pages.headline(run)
        keys = [("", headline)] if headline else []
    return keys


# ---------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class StepView:
    step: StepRun
    # Its ERRORED events, oldest first: each attempt's error type and message.
    errors: list[StepEvent]
    skippable: bool

    @property
    def holds_lease(self) -> bool:
        return self.step.lease_token is not None

    @property
    def result_json(self) -> str:
        return as_json(personal.shown(self.step.result))

    @property
    def error_json(self) -> str:
        return as_json(self.step.last_error) if self.step.last_error else ""


@dataclass(frozen=True)
class ConsoleRunPage:
    run: WorkflowRun
    request: RequestPage
    steps: list[StepView]
    signals: list[Signal]
    keys: list[tuple[str, str]]
    actions: list[services.Action]
    requested_by: str
    # The nodes an operator may move the run to now (none unless running or waiting).
    movable: list[str]

    @property
    def skippable(self) -> list[StepRun]:
        return [view.step for view in self.steps if view.skippable]

    @property
    def input_json(self) -> str:
        return as_json(personal.shown(self.run.input))  # sealed values opened, as on every page

    @property
    def result_json(self) -> str:
        return as_json(personal.shown(self.run.result))

    @property
    def error_json(self) -> str:
        return as_json(self.run.error) if self.run.error else ""


def as_json(value: Any) -> str:
    """A JSON value as an operator reads it: indented, keys in order."""
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def run_state(*, run_id: UUID) -> str | None:
    """The run's state now, or None if there is no such run."""
    return WorkflowRun.objects.filter(pk=run_id).values_list("state", flat=True).first()


def run_page(*, run_id: UUID) -> ConsoleRunPage | None:
    """Everything the console's run page shows, in a fixed number of queries; None if
    there is no such run."""
    run = WorkflowRun.objects.select_related("started_by").filter(pk=run_id).first()
    if run is None:
        return None
    request = request_pages.request_page(run)
    steps = list(run.steps.order_by("scheduled_at", "id"))
    errors: dict[int, list[StepEvent]] = {}
    for event in request.events:
        if event.kind == EventKind.ERRORED and event.step_id is not None:
            errors.setdefault(event.step_id, []).append(event)
    skippable = {step.pk for step in services.skippable_steps(run, steps)}
    return ConsoleRunPage(
        run=run,
        request=request,
        steps=[
            StepView(step=step, errors=errors.get(step.pk, []), skippable=step.pk in skippable)
            for step in steps
        ],
        signals=list(run.signals.select_related("consumed_by").order_by("received_at", "id")),
        keys=business_keys(run),
        actions=services.actions_for(run),
        requested_by=" and ".join(sorted(request.requesters)),
        movable=services.movable_nodes(run),
    )
