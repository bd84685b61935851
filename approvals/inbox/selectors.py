"""The read side of the inbox: a reviewer's tabs, filtered, sorted and paged by keyset.

Lists and counts read `InboxEntry`, whose indexes hold each person's and each
group's tab in the order it is shown: a page is one short range of an index,
whatever the number of tasks in the system or the depth of the page. The queue
merges the reviewer's own stream with one stream per group of theirs, each cut
at a page. A page costs one short query (its ids, and each one's row read
from one entry of the task); the tab counts and saved filters one more, which
the whole page sends with the page's, in one round trip on PostgreSQL.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db.models import (
    Case,
    Exists,
    F,
    JSONField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    When,
)
from django.db.models.expressions import RawSQL
from django.db.models.fields.tuple_lookups import Tuple, TupleGreaterThan
from django.db.models.lookups import Lookup
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from approvals import duties, run_data_filters
from approvals.escalation import DUE_SOON
from approvals.human_tasks import inbox_entries
from approvals.human_tasks.inbox_entries import FAR_FUTURE, sort_due, sort_priority
from approvals.inbox import compiled_queries
from approvals.models import GroupManager, HumanTask, InboxEntry, SavedFilter, Snooze
from approvals.permissions import Person
from approvals.states import LIVE_TASK_STATES, InboxTab, Priority, Sla
from workflows import registry, replica
from workflows.cleaning import Refused, clean_datetime, clean_text
from workflows.dsl import Approval
from workflows.engine import batch, functions
from workflows.models import WorkflowRun
from workflows.rows import converter

TABS = dict(InboxTab.choices)
SORTS = {"due": gettext_lazy("Due time"), "priority": gettext_lazy("Priority")}
PAGE_SIZE = 25
# Tab counts are exact below this; at it, the inbox shows "99+".
COUNT_CAP = 100
# Longer than any cursor `inbox` gives out (about 100 characters).
MAX_CURSOR = 500
# The order of each sort, as InboxEntry columns (and so as its indexes hold them).
_ENTRY_ORDER = {
    "due": ("sort_due", "task_id"),
    "priority": ("sort_priority", "sort_due", "task_id"),
}


class BadCursor(ValueError):
    """A cursor `inbox` did not give out, or one damaged on its way back."""


@dataclass(frozen=True)
class InboxFilters:
    tab: str = "mine"
    workflow_type: str = ""
    priority: int | None = None
    sla: str = ""
    search: str = ""
    sort: str = "due"
    cursor: str = ""
    # Conditions on the run's searchable data ("amount>1000, vendor_name=Acme"), and
    # the text they were read from, shown again in the filter box.
    where: tuple[run_data_filters.Condition, ...] = ()
    where_text: str = ""
    # Why values of the query were left out: the cleaning layer refused them.
    problems: tuple[str, ...] = ()

    @classmethod
    def from_query(cls, query: Any) -> InboxFilters:
        """Read filters from a QueryDict. A value that is not one of the choices is ignored;
        text that workflows.cleaning refuses is left out, and `problems` says why."""
        problems: list[str] = []

        def text(name: str, label: str, max_length: int) -> str:
            try:
                return clean_text(query.get(name, "").strip(), max_length=max_length)
            except Refused as error:
                problems.append(
                    _("%(label)s %(error)s, so it was left out.") % {"label": label, "error": error}
                )
                return ""

        priority = query.get("priority", "")
        workflow_type = text("type", _("The workflow type"), 100)
        where_text = text("where", _("The run data filter"), 200)
        try:
            # No text, no conditions: parse would say so after reading every definition.
            where = (
                run_data_filters.parse(where_text, workflow_type=workflow_type)
                if where_text
                else ()
            )
        except run_data_filters.BadFilter as error:
            problems.append(_("The run data filter was left out: %(error)s.") % {"error": error})
            where = ()
        return cls(
            tab=query.get("tab") if query.get("tab") in TABS else "mine",
            workflow_type=workflow_type,
            where=where,
            where_text=where_text if where else "",
            priority=int(priority) if priority in {str(p) for p in Priority.values} else None,
            sla=query.get("sla") if query.get("sla") in Sla.values else "",
            search=text("q", _("The search"), 200),
            sort=query.get("sort") if query.get("sort") in SORTS else "due",
            cursor=query.get("cursor", ""),
            problems=tuple(problems),
        )


@dataclass(frozen=True, slots=True)
class PageTask:
    """A task of an inbox page as plain values, read straight from the page's rows query:
    what its row shows (approvals.inbox.rows) and what separation of duties reads
    (approvals.duties.duties_on_page). Building model instances for the page took a
    quarter of its time."""

    id: UUID
    run_id: UUID
    node: str
    kind: str
    workflow_type: str
    title: str
    state: str
    outcome: str
    priority: int
    due_at: datetime | None
    version: int
    # The run's definition (the task's workflow_type is a copy of the run's).
    run_workflow_type: str
    workflow_version: int
    # The run's input, read for a type that names a requester in it (duties.requester_types):
    # only separation of duties reads it, and only there. {} for the others.
    run_input: Any
    # The usernames of the people the task and its run name ("" when nobody).
    assignee: str
    owner: str
    substitute_for: str
    started_by: str
    # The viewer's own decisions in the run (approvals.duties.page_annotations), or None
    # where the page's query did not carry them: off PostgreSQL, and for a run whose
    # type never separates its approvers (duties_on_page reads none for those).
    viewer_decisions: tuple[Any, ...] | None

    @property
    def pk(self) -> UUID:
        return self.id

    @property
    def is_live(self) -> bool:
        return self.state in LIVE_TASK_STATES

    @classmethod
    def of(cls, task: HumanTask) -> PageTask:
        """The plain values of a task loaded with its run and the people it names: what
        its inbox entries carry (`inbox_entries.view_of`), and the rest from the task."""
        run = task.run
        return cls(
            id=task.pk,
            workflow_type=task.workflow_type,
            title=task.title,
            priority=task.priority,
            due_at=task.due_at,
            run_workflow_type=run.workflow_type,
            run_input=run.input,
            **inbox_entries.view_of(task),
            viewer_decisions=None,
        )


@dataclass
class Page:
    tasks: list[PageTask]
    next_cursor: str = ""
    filters: InboxFilters = field(default_factory=InboxFilters)


@dataclass(frozen=True)
class Header:
    """What the inbox shows above the list: each tab's count, and the saved filters."""

    counts: dict[str, int]
    saved_filters: list[SavedFilter]
    # Whether they manage a group, and so may see its SLA dashboard (approvals.permissions).
    manages_a_group: bool = False


# What a row shows and what separation of duties reads (approvals.duties), column by
# column as the page's rows query selects them from the task's inbox entry, which
# carries them (approvals.human_tasks.inbox_entries.view_of): PageTask's fields, the
# due time and priority as their sort keys. The run's input and the viewer's decisions
# are read by subqueries, for the types that need them only.
_ENTRY_COLUMNS = (
    "task_id",
    "run_id",
    "node",
    "kind",
    "workflow_type",
    "title",
    "state",
    "outcome",
    "sort_priority",
    "sort_due",
    "version",
    "workflow_version",
    "assignee",
    "owner",
    "substitute_for",
    "started_by",
)
_ROW_COLUMNS = (*_ENTRY_COLUMNS, "run_input", "viewer_decisions")


@replica.reads_replica
def inbox(*, user: Any, filters: InboxFilters, now: datetime, limit: int = PAGE_SIZE) -> Page:
    """Return one page of a tab, after `filters.cursor`, and the cursor of the next page;
    raise BadCursor if the cursor is not one this function gave out.

    One query reads the page's tasks and their rows: a call of `page_function` on
    PostgreSQL, for a page of a tab with no filter; otherwise one statement."""
    connection = replica.read_connection()
    [page] = _read(connection, _page_query(connection, user, filters, now=now, limit=limit))
    return page


@replica.reads_replica
def inbox_with_header(*, user: Any, filters: InboxFilters, now: datetime) -> tuple[Page, Header]:
    """Return the `inbox` page of `filters` and the `inbox_header` of `user`, as the inbox's
    whole page shows them; raise BadCursor as `inbox` does, before any query.

    On PostgreSQL their two statements go to the server as one query, in one round
    trip: in autocommit that query is one implicit transaction, though each statement
    still reads its own snapshot (READ COMMITTED), as the two queries did before.
    Elsewhere (SQLite, the demo) they run one after the other."""
    connection = replica.read_connection()
    page, header = _read(
        connection,
        _page_query(connection, user, filters, now=now, limit=PAGE_SIZE),
        _header_query(connection, user, now=now),
    )
    return page, header


@replica.reads_replica
def loaded_tasks(page: Page) -> list[HumanTask]:
    """Return the page's tasks as whole model instances, in its order, each with its run
    and the people it names: one query, for readers that show every field (the API)."""
    by_id = (
        HumanTask.objects.using(replica.read_alias())
        .select_related("run", "assignee", "owner", "substitute_for", "decided_by")
        .in_bulk([task.pk for task in page.tasks])
    )
    return [by_id[task.pk] for task in page.tasks if task.pk in by_id]


def decides_in_tab(tab: str) -> bool:
    """Whether the viewer is the one who decides the tasks a tab lists.

    "Mine" holds the tasks assigned to them and the queue the open tasks they are a
    candidate for; "delegated" holds tasks they handed to someone else, who decides
    them now (an operator may still decide those, from the task's page).
    """
    return tab != InboxTab.DELEGATED


@replica.reads_replica
def inbox_header(*, user: Any, now: datetime) -> Header:
    """Count each tab's tasks, up to COUNT_CAP, read the saved filters and whether `user`
    manages a group (who then finds their groups' SLA dashboard here): one query."""
    connection = replica.read_connection()
    [header] = _read(connection, _header_query(connection, user, now=now))
    return header


@dataclass(frozen=True)
class _Query:
    """One statement of the inbox, and what its rows are read as."""

    sql: str
    params: Sequence[Any]
    read: Callable[[list[tuple[Any, ...]]], Any]
    # Whether the statement is a call of one of the inbox's functions (`page_function`,
    # `header_function`), which `_read` may send prepared.
    calls_function: bool = False


def _read(connection: Any, *queries: _Query) -> list[Any]:
    """Run `queries` on `connection` and return what each read, in their order: on
    PostgreSQL in one round trip. Calls of the inbox's functions go prepared, in one
    pipeline, where the connection allows it (`_pipelined`); other statements as the
    engine writes its batches (batch.results)."""
    if all(query.calls_function for query in queries) and _may_prepare(connection):
        return _pipelined(connection, queries)
    with connection.cursor() as cursor:
        sent = [(query.sql, query.params) for query in queries]
        return [
            query.read(result.fetchall())
            for query, result in zip(queries, batch.results(cursor, sent), strict=True)
        ]


def _may_prepare(connection: Any) -> bool:
    """Whether `_pipelined` may read on `connection`: where the engine's own calls go
    prepared (`functions.prepares`), with aware times (a binary time is read in the
    connection's time zone, as Django reads the text of one only when USE_TZ is on)."""
    return settings.USE_TZ and functions.prepares(connection) and _pipelines_supported()


@functools.cache
def _pipelines_supported() -> bool:
    return psycopg.Pipeline.is_supported()


def _pipelined(connection: Any, queries: Sequence[_Query]) -> list[Any]:
    """Run `queries` as prepared statements in one pipeline (one round trip, as
    batch.results sends them) and return what each read.

    Sent as text, with their values written in, each call was parsed, analysed and
    planned again on every page, and its rows' times and ids parsed from text in
    Python: about 0.1 ms of the server's CPU and 0.15 ms of the web process's a page.
    Prepared, the server plans each call once per connection (as the engine's calls,
    workflows.engine.functions.cursor); in binary, psycopg reads ids and times in C.
    The statements run in one implicit transaction, as one query of two statements does.
    """
    raw = connection.connection
    with contextlib.ExitStack() as stack:
        cursors = [
            stack.enter_context(functions.prepared_cursor(connection, binary=True)) for _ in queries
        ]
        with connection.wrap_database_errors, raw.pipeline():
            for cursor, query in zip(cursors, queries, strict=True):
                cursor.execute(query.sql, query.params)
        return [
            query.read(cursor.fetchall()) for cursor, query in zip(cursors, queries, strict=True)
        ]


def _page_query(
    connection: Any, user: Any, filters: InboxFilters, *, now: datetime, limit: int
) -> _Query:
    """The query of `inbox`; raise BadCursor, before any query is sent, for a cursor
    `inbox` did not give out."""
    after = _decode(filters.cursor, filters.sort)
    shape = _Shape(
        vendor=connection.vendor,
        tab=filters.tab,
        sort=filters.sort,
        workflow_type=bool(filters.workflow_type),
        priority=filters.priority is not None,
        sla=filters.sla,
        search=bool(filters.search),
        data=tuple((condition.field, condition.op) for condition in filters.where),
        after=after is not None,
        limit=limit + 1,
    )
    values = _values(filters, user_id=user.pk, now=now, after=after)
    convert = converter(InboxEntry, _ENTRY_COLUMNS)
    calls_function = False
    if shape.vendor in _COMPILED_ON:
        functions_used = functions.used(connection)
        calls_function = functions_used and _served_by_function(shape)
        sql, params = _page(shape, values, functions_used=functions_used)

        def tasks_of(rows: list[tuple[Any, ...]]) -> list[PageTask]:
            # Each row leads with its place on the page, which orders them.
            return [_task_of(row[1:], convert) for row in rows]

    else:
        sql, params = _elsewhere_sql(shape, values)

        def tasks_of(rows: list[tuple[Any, ...]]) -> list[PageTask]:
            return _in_page_order(rows, shape, convert)

    def page_of(rows: list[tuple[Any, ...]]) -> Page:
        tasks = tasks_of(rows)
        next_cursor = ""
        # The page's tasks and their rows are read together, from one snapshot: a task
        # whose id is read has its row.
        if len(tasks) > limit:
            tasks = tasks[:limit]
            next_cursor = _encode(_cursor_of(tasks[-1], filters.sort))
        return Page(tasks=tasks, next_cursor=next_cursor, filters=filters)

    return _Query(sql, params, page_of, calls_function=calls_function)


def _header_query(connection: Any, user: Any, *, now: datetime) -> _Query:
    """The query of `inbox_header`."""
    values = {"user_id": user.pk, "now": now}
    calls_function = functions.used(connection)
    if calls_function:
        sql, params = header_function().call_sql, (user.pk, now)
    elif connection.vendor in _COMPILED_ON:
        sql, params = _header(connection.vendor).bind(values)
    else:
        sql, params = _header_sql(connection.vendor, values)

    def header_of(rows: list[tuple[Any, ...]]) -> Header:
        return Header(
            counts=dict(zip(TABS, rows[0][: len(TABS)], strict=True)),
            manages_a_group=bool(rows[0][len(TABS)]),
            saved_filters=[
                SavedFilter(id=saved_id, user=user, name=name, query=query)
                for *_, saved_id, name, query in rows
                if saved_id is not None
            ],
        )

    return _Query(sql, params, header_of, calls_function=calls_function)


# Where the SQL of the inbox is compiled once (approvals.inbox.compiled_queries): PostgreSQL's
# backend passes values to the driver as they are. Others turn them into text (SQLite's
# times and UUIDs), where no stand-in could be told apart, and build it per call.
_COMPILED_ON = {"postgresql"}
# The values the SQL of a page takes as parameters: its text is compiled once per _Shape.
_SLOTS = {
    "user_id": int,
    "now": datetime,
    "due_soon": datetime,
    "workflow_type": str,
    "sort_priority": int,
    "search": str,
    "after_priority": int,
    "after_due": datetime,
    "after_id": UUID,
    # Lists, bound as arrays.
    "separating": str,
    "requesting": str,
}


@dataclass(frozen=True)
class _Shape:
    """What the text of the SQL selecting a page's ids depends on; the rest are _SLOTS."""

    vendor: str
    tab: str
    sort: str = "due"
    workflow_type: bool = False
    priority: bool = False
    sla: str = ""
    search: bool = False
    # The run-data conditions' fields and operators (their values are not slots: a page
    # with them is built per request, not compiled once).
    data: tuple[tuple[str, str], ...] = ()
    after: bool = False
    limit: int = PAGE_SIZE + 1


def _values(
    filters: InboxFilters, *, user_id: int, now: datetime, after: tuple[Any, ...] | None
) -> dict[str, Any]:
    """Each slot's value for `filters` (what the shape leaves out of the SQL goes unused).
    Without a cursor, the keyset's values are ones before any task (`page_function`
    always reads after them)."""
    *after_priority, after_due, after_id = after or (
        _BEFORE_ANY_PRIORITY,
        _BEFORE_ANY_DUE,
        UUID(int=0),
    )
    return {
        "user_id": user_id,
        "now": now,
        "due_soon": now + DUE_SOON,
        "workflow_type": filters.workflow_type,
        "sort_priority": sort_priority(filters.priority or 0),
        "search": filters.search,
        "where": filters.where,
        "after_priority": after_priority[0] if after_priority else _BEFORE_ANY_PRIORITY,
        "after_due": after_due,
        "after_id": after_id,
        # The workflow types whose rows carry the viewer's decisions, and their run's input.
        "separating": list(duties.separating_types()),
        "requesting": list(duties.requester_types()),
    }


# Keyset values before any task's: a sort_priority below every priority's (a smallint's
# least but one: "-32768::smallint" reads as -(32768::smallint), which is out of range),
# and a time before any due time (tasks without one sort at FAR_FUTURE).
_BEFORE_ANY_PRIORITY = -(2**15) + 1
_BEFORE_ANY_DUE = datetime(1, 1, 1, tzinfo=UTC)


def _page(
    shape: _Shape, values: Mapping[str, Any], *, functions_used: bool
) -> tuple[str, tuple[Any, ...]]:
    """Return SQL and params reading a page of `shape` on PostgreSQL: a call of
    `page_function` where it serves the shape, else the statement, compiled once per
    shape unless it filters on run data."""
    if functions_used and _served_by_function(shape):
        function = page_function()
        arguments = (
            values["user_id"],
            shape.tab,
            shape.sort,
            values["now"],
            values["after_priority"],
            values["after_due"],
            values["after_id"],
            values["separating"],
            values["requesting"],
        )
        # The function returns each row's place on the page: its rows' order is this
        # ORDER BY's, not whatever order a caller reads a function's rows in.
        return f"{function.call_sql} ORDER BY o_n", arguments
    if shape.data:
        return _page_sql(shape, values)
    return _compiled_page(shape).bind(values)


def _served_by_function(shape: _Shape) -> bool:
    """Whether `page_function` reads pages of `shape`: a whole tab in either sort, a page
    of the usual size (the filtered pages are planned for their values, as the index
    that serves one depends on them)."""
    return not (
        shape.workflow_type or shape.priority or shape.sla or shape.search or shape.data
    ) and (shape.limit == PAGE_SIZE + 1)


@functools.lru_cache(maxsize=512)
def _compiled_page(shape: _Shape) -> compiled_queries.Compiled:
    return compiled_queries.compile_once(functools.partial(_page_sql, shape), slots=_SLOTS)


def _page_sql(shape: _Shape, values: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """The SQL of a page of `shape` on PostgreSQL: its tasks' ids through the tab's index
    (`_page_ids_sql`), then one entry of each through the entries' task index (a
    LATERAL subquery per task: all a task's entries would be one per candidate),
    selecting its place on the page and _ROW_COLUMNS, in the page's order. The nested
    loop keeps the ids' order, so neither the order nor the places sort anything."""
    ids_sql, ids_params = _page_ids_sql(shape, values, keyed=True)
    entry_sql, entry_params = _entry_sql(values)
    # Only SQL Django compiled (its parameters passed apart) and fixed column names
    # from _ENTRY_ORDER go into the text.
    order = ", ".join(f"page.{column}" for column in _ENTRY_ORDER[shape.sort])
    sql = (
        f"SELECT row_number() OVER (ORDER BY {order}) AS n, entry.*"  # nosec B608 # see above
        f" FROM ({ids_sql}) AS page CROSS JOIN LATERAL ({entry_sql}) AS entry ORDER BY {order}"
    )
    return sql, (*ids_params, *entry_params)


def _page_ids_sql(
    shape: _Shape, values: Mapping[str, Any], *, keyed: bool = False
) -> tuple[str, tuple[Any, ...]]:
    """The SQL selecting the ids of a page of `shape`, in the order shown (`keyed`: with
    the columns of that order before each id)."""
    order = _ENTRY_ORDER[shape.sort]
    entries = _entries(shape, values)
    if shape.after:
        first = (values["after_priority"],) if shape.sort == "priority" else ()
        after = (*first, values["after_due"], values["after_id"])
        entries = entries.filter(TupleGreaterThan(Tuple(*order), after))
    return _first_task_ids(
        entries, shape=shape, user_id=values["user_id"], order=order, keyed=keyed
    )


@functools.cache
def page_function() -> functions.Function:
    """`inbox`'s statement as a PL/pgSQL function (workflows.engine.functions), which the
    migrations install: PostgreSQL keeps its plans per server connection. Sent as
    statements, a page's ids and its rows were planned again on every page, the rows
    alone about 0.2 ms of the server's time, twice what they took to run.

    One case per tab and sort, each the statement of the tab's pages after a cursor
    (the first page's is one before any task, _values): any page of the usual size
    and without filters, for any set of registered definitions (the workflow types
    that carry the viewer's decisions and the run's input are two arrays)."""
    slots = {
        "user_id": int,
        "now": datetime,
        "after_priority": int,
        "after_due": datetime,
        "after_id": UUID,
        "separating": str,
        "requesting": str,
    }
    arguments = {
        "user_id": "$1",
        "now": "$4",
        "after_priority": "$5",
        "after_due": "$6",
        "after_id": "$7",
        "separating": "$8",
        "requesting": "$9",
    }
    cases = []
    for tab, sort in itertools.product(TABS, SORTS):
        shape = _Shape(vendor="postgresql", tab=tab, sort=sort, after=True)
        compiled = compiled_queries.compile_once(functools.partial(_page_sql, shape), slots=slots)
        condition = f"$2 = {functions.literal(tab)} AND $3 = {functions.literal(sort)}"
        cases.append((condition, compiled.function_body(arguments)))
    # The last tab and sort take what the others leave: `inbox` passes one of each.
    *cases, (_, last) = cases
    return functions.Function(
        prefix="baton_inbox_page",
        arguments=(
            functions.column_type(get_user_model(), "id"),
            functions.column_type(InboxEntry, "tab"),
            "text",
            functions.column_type(Snooze, "until"),
            functions.column_type(InboxEntry, "sort_priority"),
            functions.column_type(InboxEntry, "sort_due"),
            functions.column_type(InboxEntry, "task_id"),
            f"{functions.column_type(InboxEntry, 'workflow_type')}[]",
            f"{functions.column_type(InboxEntry, 'workflow_type')}[]",
        ),
        returns=", ".join(
            [
                "o_n bigint",
                *(f"o_{name} {functions.column_type(InboxEntry, name)}" for name in _ENTRY_COLUMNS),
                f"o_run_input {functions.column_type(WorkflowRun, 'input')}",
                "o_viewer_decisions jsonb[]",
            ]
        ),
        cases=tuple(cases),
        body=last,
        # Planned for any user and cursor, a tab's range looks short, and reading it
        # whole and sorting it cheap: for a person with thousands of tasks it is not.
        # In the index's order, each range stops at the page, whoever it belongs to.
        # That plan is the one kept for every call, as for the counts (header_function).
        planner=(
            *(
                (f"enable_{method}", "off")
                for method in ("seqscan", "bitmapscan", "sort", "hashjoin")
            ),
            ("plan_cache_mode", "force_generic_plan"),
        ),
    )


@functools.lru_cache(maxsize=4)
def _header(vendor: str) -> compiled_queries.Compiled:
    return compiled_queries.compile_once(
        functools.partial(_header_sql, vendor), slots={"user_id": int, "now": datetime}
    )


@functools.cache
def header_function() -> functions.Function:
    """`inbox_header`'s statement as a PL/pgSQL function (workflows.engine.functions), which
    the migrations install: PostgreSQL keeps its plan per server connection. Sent as a
    statement, it was planned again on every page: about 1 ms of the server's time, more
    than it took to run."""
    return functions.Function(
        prefix="baton_inbox_header",
        arguments=(
            functions.column_type(get_user_model(), "id"),
            functions.column_type(Snooze, "until"),
        ),
        returns=", ".join(
            [
                *(f"o_{tab} bigint" for tab in TABS),
                "o_manages boolean",
                *(
                    f"o_saved_{name} {functions.column_type(SavedFilter, name)}"
                    for name in ("id", "name", "query")
                ),
            ]
        ),
        body=_header("postgresql").function_body({"user_id": "$1", "now": "$2"}),
        # Planned for any user, a tab's range looks short, and reading it whole and
        # sorting it cheap: for a person with thousands of tasks it is not. In the
        # index's order, each range stops at the cap, whoever it belongs to. That plan
        # is the one kept for every call: left to choose, PostgreSQL planned each call
        # afresh, which is what the function is for avoiding.
        planner=(
            *(
                (f"enable_{method}", "off")
                for method in ("seqscan", "bitmapscan", "sort", "hashjoin")
            ),
            ("plan_cache_mode", "force_generic_plan"),
        ),
    )


def _header_sql(vendor: str, values: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """The SQL of `inbox_header` (a user's id and the time are its values)."""
    counts, params = [], []
    for tab in TABS:
        shape = _Shape(vendor=vendor, tab=tab, limit=COUNT_CAP)
        # In an index's order, so that PostgreSQL reads a range of it and stops at the
        # cap, rather than trusting a sequential scan to come across the cap soon.
        sql, tab_params = _first_task_ids(
            _entries(shape, values),
            shape=shape,
            user_id=values["user_id"],
            order=_ENTRY_ORDER["due"],
        )
        counts.append(f"(SELECT COUNT(*) FROM ({sql}) AS capped) AS {tab}")  # nosec B608 # see below
        params.extend(tab_params)
    # Text from SQL Django compiled (its parameters passed apart), the fixed tab names
    # and a table name: nothing a user sent is ever part of the statement's text.
    sql = (
        f"SELECT counts.*, saved.id, saved.name, saved.query"  # nosec B608 # see above
        f" FROM (SELECT {', '.join(counts)},"
        f" EXISTS (SELECT 1 FROM {GroupManager._meta.db_table} WHERE manager_id = %s)"
        f" AS manages) AS counts"
        f" LEFT JOIN {SavedFilter._meta.db_table} AS saved ON saved.user_id = %s"
        f" ORDER BY saved.name"
    )
    return sql, (*params, values["user_id"], values["user_id"])


def _entry_sql(values: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """The SQL reading the row of the task `page.task_id` from one of its inbox entries
    (every entry of a task carries the same), selecting _ROW_COLUMNS, with the run's
    input where its type is among `values["requesting"]` and `viewer_decisions`
    (approvals.duties.page_annotations) where it is among `values["separating"]`,
    each list an array: no join of the task, its run or its people."""

    def among(types: str) -> _AnyOf:
        return _AnyOf(F("workflow_type"), types)

    run_input = Case(
        When(
            among(values["requesting"]),
            then=Subquery(WorkflowRun.objects.filter(pk=OuterRef("run_id")).values("input")),
        ),
        default=None,
        output_field=JSONField(),
    )
    decisions = duties.page_annotations(values["user_id"])["viewer_decisions"]
    decisions = Case(
        When(among(values["separating"]), then=decisions),
        default=None,
        output_field=decisions.output_field,
    )
    return (
        InboxEntry.objects.annotate(run_input=run_input, viewer_decisions=decisions)
        .filter(task_id=RawSQL("page.task_id", ()))
        .order_by()
        .values_list(*_ROW_COLUMNS)[:1]
        .query.sql_with_params()
    )


def _elsewhere_sql(shape: _Shape, values: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """The SQL of a page off PostgreSQL (SQLite, for the demo), built per call: every
    entry of the tasks whose ids `_page_ids_sql` selects, selecting _ROW_COLUMNS, in
    no order (`_in_page_order` keeps one per task and orders them). No viewer's
    decisions: duties_on_page reads them."""
    run_input = Case(
        When(
            workflow_type__in=values["requesting"],
            then=Subquery(WorkflowRun.objects.filter(pk=OuterRef("run_id")).values("input")),
        ),
        default=None,
        output_field=JSONField(),
    )
    none = RawSQL("NULL", (), output_field=JSONField())
    ids_sql, ids_params = _page_ids_sql(shape, values)
    return (
        InboxEntry.objects.annotate(run_input=run_input, viewer_decisions=none)
        # The page's ids: SQL Django compiled, its parameters passed apart.
        .filter(task_id__in=RawSQL(ids_sql, ids_params))  # nosec B611
        .values_list(*_ROW_COLUMNS)
        .query.sql_with_params()
    )


def _in_page_order(
    rows: list[tuple[Any, ...]],
    shape: _Shape,
    convert: Callable[[Sequence[Any]], list[Any]],
) -> list[PageTask]:
    """A page's tasks from the rows `_elsewhere_sql` selects: one per task, in the page's
    order."""
    by_id = {row[0]: row for row in rows}
    tasks = [_task_of(row, convert) for row in by_id.values()]

    def key(task: PageTask) -> tuple[Any, ...]:
        due = (sort_due(task.due_at), task.pk)
        return (sort_priority(task.priority), *due) if shape.sort == "priority" else due

    return sorted(tasks, key=key)


class _AnyOf(Lookup):
    """`column = ANY(array)`: the column equals one of an array parameter's values (a
    plain Exact with ANY on its right would wrap it in parentheses, which SQL refuses)."""

    lookup_name = "any_of"
    prepare_rhs = False

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        return f"{lhs} = ANY(%s)", [*lhs_params, self.rhs]


def _task_of(row: tuple[Any, ...], convert: Callable[[Sequence[Any]], list[Any]]) -> PageTask:
    """A page's task from one row of _ROW_COLUMNS, its values converted as the ORM's
    compiler would (`convert`, workflows.rows.converter of _ENTRY_COLUMNS: JSON decoded;
    on SQLite, times and UUIDs parsed from text)."""
    (
        task_id,
        run_id,
        node,
        kind,
        workflow_type,
        title,
        state,
        outcome,
        priority,
        due,
        version,
        workflow_version,
        assignee,
        owner,
        substitute_for,
        started_by,
    ) = convert(row)
    run_input, decisions = row[len(_ENTRY_COLUMNS) :]
    return PageTask(
        id=task_id,
        run_id=run_id,
        node=node,
        kind=kind,
        workflow_type=workflow_type,
        title=title,
        state=state,
        outcome=outcome,
        priority=-priority,
        due_at=None if due == FAR_FUTURE else due,
        version=version,
        run_workflow_type=workflow_type,
        workflow_version=workflow_version,
        run_input={} if run_input is None else _json(run_input),
        assignee=assignee,
        owner=owner,
        substitute_for=substitute_for,
        started_by=started_by,
        # PostgreSQL's array of JSON objects, as text.
        viewer_decisions=None if decisions is None else tuple(_json(d) for d in decisions),
    )


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _entries(shape: _Shape, values: Mapping[str, Any]) -> QuerySet[InboxEntry]:
    """Entries of any person or group, as filtered, less those the user snoozed."""
    entries = InboxEntry.objects.all()
    if shape.workflow_type:
        entries = entries.filter(workflow_type=values["workflow_type"])
    if shape.priority:
        entries = entries.filter(sort_priority=values["sort_priority"])
    if shape.sla == Sla.OVERDUE:
        entries = entries.filter(sort_due__lte=values["now"])
    elif shape.sla == Sla.DUE_SOON:
        entries = entries.filter(sort_due__gt=values["now"], sort_due__lte=values["due_soon"])
    elif shape.sla == Sla.ON_TIME:
        entries = entries.filter(sort_due__gt=values["due_soon"])  # no due time sorts far ahead
    if shape.search:
        if shape.vendor == "postgresql":
            entries = entries.annotate(search=SearchVector("title", config="simple")).filter(
                search=SearchQuery(values["search"], config="simple", search_type="websearch")
            )
        else:
            entries = entries.filter(title__icontains=values["search"])
    if shape.data:
        entries = entries.filter(run_data_filters.as_q(values["where"]))
    snoozed = Snooze.objects.filter(
        task_id=OuterRef("task_id"), user_id=values["user_id"], until__gt=values["now"]
    )
    return entries.filter(~Exists(snoozed))


def _first_task_ids(
    entries: QuerySet[InboxEntry],
    *,
    shape: _Shape,
    user_id: int,
    order: tuple[str, ...],
    keyed: bool = False,
) -> tuple[str, tuple[Any, ...]]:
    """Return SQL and params selecting the ids of the first `shape.limit` tasks among
    `entries` in `shape.tab` of user `user_id`, in `order` (InboxEntry columns ending with
    task_id), for the database `shape.vendor`; `keyed` (PostgreSQL's only), the columns
    of `order` rather than the ids alone.

    "Mine" and "delegated" are one range of the user's index. The queue is the
    user's range and one range per group of theirs; on PostgreSQL each range is
    cut at `limit` before they are merged, which cannot lose a task of the merged
    first `limit`: whatever comes before it in its own range comes before it in
    the merge too. Elsewhere (SQLite, for the demo) one plain query does.
    """
    tab, limit = shape.tab, shape.limit
    entries = entries.order_by(*order)
    own = entries.filter(user_id=user_id, tab=tab)
    if tab != InboxTab.QUEUE:
        selected = order if keyed else ("task_id",)
        return own.values(*selected)[:limit].query.sql_with_params()
    memberships = get_user_model().groups.through
    if shape.vendor != "postgresql":
        groups = memberships.objects.filter(user_id=user_id).values("group_id")
        queue = entries.filter(Q(user_id=user_id, tab=tab) | Q(group__in=groups))
        sql, params = queue.values_list(*order).distinct()[:limit].query.sql_with_params()
        return f"SELECT task_id FROM ({sql}) AS page", params  # nosec B608 # compiled SQL
    own_sql, own_params = own.values_list(*order)[:limit].query.sql_with_params()
    group_sql, group_params = (
        entries.filter(group_id=RawSQL("membership.group_id", ()))
        .values_list(*order)[:limit]
        .query.sql_with_params()
    )
    # Only SQL Django compiled (its parameters passed apart), fixed column names from
    # _ENTRY_ORDER and a table name go into the text: nothing a user sent.
    columns = ", ".join(order)
    merged = (
        f"SELECT DISTINCT {columns} FROM (({own_sql}) UNION ALL"  # nosec B608 # see above
        f" (SELECT streams.* FROM {memberships._meta.db_table} AS membership"
        f" CROSS JOIN LATERAL ({group_sql}) AS streams WHERE membership.user_id = %s)"
        f") AS candidates ORDER BY {columns} LIMIT %s"
    )
    page = merged if keyed else f"SELECT task_id FROM ({merged}) AS page"  # nosec B608 # see above
    return page, (*own_params, *group_params, user_id, limit)


def _cursor_of(task: PageTask, sort: str) -> list[Any]:
    due = sort_due(task.due_at).isoformat()
    return [task.priority, due, str(task.pk)] if sort == "priority" else [due, str(task.pk)]


def _encode(value: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


def _decode(cursor: str, sort: str) -> tuple[Any, ...] | None:
    """Read a cursor made by `inbox` as InboxEntry sort keys (None for the first page);
    raise BadCursor for any other text. Its time goes through workflows.cleaning."""
    if not cursor:
        return None
    if len(cursor) > MAX_CURSOR:  # also keeps json from recursing past Python's limit
        raise BadCursor(cursor[:MAX_CURSOR])
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if sort == "priority":
            priority, due, last_id = value
            if priority not in Priority.values or isinstance(priority, bool):
                raise BadCursor(cursor)
            return sort_priority(priority), clean_datetime(due), UUID(last_id)
        due, last_id = value
        return clean_datetime(due), UUID(last_id)
    except (ValueError, TypeError, AttributeError):  # Refused and BadCursor are ValueErrors
        raise BadCursor(cursor) from None


def people_to_hand_to(*, giver: Person) -> QuerySet[Any]:
    """Active people `giver` may delegate or reassign a task to: permissions.may_hand_to
    as a query (a test holds the two equal), for the user picker."""
    people = get_user_model().objects.filter(is_active=True).exclude(pk=giver.user_id)
    if giver.is_operator:
        return people
    return people.filter(
        Q(groups__in=giver.group_ids | giver.managed_group_ids)
        | Q(pk=giver.manager_id)
        | Q(reporting_line__manager_id=giver.user_id)
    ).distinct()


def workflow_types() -> list[str]:
    """The workflow types the filter offers: those with an approval node."""
    return sorted(
        {
            workflow.name
            for workflow in registry.all_definitions()
            if any(isinstance(node, Approval) for node in workflow.nodes)
        }
    )


def snooze_choices(now: datetime) -> dict[str, datetime]:
    tomorrow = (now + timedelta(days=1)).replace(hour=9, minute=0, second=0, microsecond=0)
    return {
        "1 hour": now + timedelta(hours=1),
        "Tomorrow 09:00": tomorrow,
        "Next week": now + timedelta(days=7),
    }
