"""Seed a company's worth of history in the database, in the shape the engine writes it.

Two finished orders are made through the real code (a 3-step run of no-op
activities, and a one-approval run that a reviewer approved: its step, events,
signal, human task with its candidates, and its audit entries; both types
declare the input's `order_id` searchable, as a company's types declare their
business key), and their rows are kept aside as the engine wrote them. `runs`
copies of them, alternately, are then made by the server itself, one
`INSERT ... SELECT ... generate_series` per table and chunk (no row crosses the
wire): every copy gets a run id, step ids and a task id of its own (the
template's ids are replaced wherever they appear, in keys and in text), a
business key `order-<n>` (its `correlation_id`, and its order id wherever the
engine wrote the template's: the run's input, the task's search data, the audit
entries), and every timestamp moved by the same amount, so the copies start
evenly over three years, oldest first. Rows whose primary key is an identity
column (events, signals, candidates, audit entries) get theirs from the
database.

Beside the history, live work is cloned by `bench.seed`'s INSERT ... SELECT from
templates the real code made: the benchmark reviewer's 2,000 open tasks (1,600
claimed by them, 400 in their group's queue), `runs // 10` open tasks of other
reviewers (half claimed by one of `REVIEWERS`, half in the queue of one of
`GROUPS`, in turns: 10M runs give 1M open tasks over 5,000 reviewers and 300
groups; each group task notifies its group's members, 25M notifications), and
`runs // 10` runs asleep on a far-off timer (the sweep must not find them due).
`MANAGER` manages the first of those groups, for the group manager's SLA
dashboard.

While the tables fill (the history's, and those filled beside a live task), their
secondary indexes are dropped and made once at the end, and, where the role may,
the foreign-key checks of the inserts are skipped (`session_replication_role`):
the copies point only at their own rows and the templates'. The chunks, batches,
index builds and the vacuum run `WORKERS` at a time, each on a connection of its
own. See README, "Scaling", for what 10,000,000 runs take here.

Month partitions are made for the three years first, so the history lands in
its months (as the migration does for an existing table's oldest rows). Seeded
audit entries copy the template's chain fields, so they are not a valid chain:
no benchmark verifies it.

Timestamps are computed in whole microseconds from the copy's number, so no
size overflows a `timedelta`.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, TypeVar

from auditlog.models import LogEntry
from django.contrib.auth.models import Group, User
from django.db import DatabaseError, connection, models, transaction
from django.utils import timezone

from approvals import human_tasks
from approvals.models import GroupManager, HumanTask
from approvals.states import Channel
from bench import definitions, seed
from workflows import engine, partitions
from workflows.models import Signal, StepEvent, StepRun, WorkflowRun

YEARS = 3
SPAN_US = YEARS * 365 * 86_400 * 1_000_000
REVIEWER_CLAIMED = 1_600
REVIEWER_QUEUE = 400
REVIEWERS = 5_000
GROUPS = 300
CHUNK = 250_000


def business_key(number: int) -> str:
    """Copy `number`'s business key: its correlation id, and its input's `order_id`."""
    return f"order-{number}"


# The same, in the database, for copy g.
BUSINESS_KEY = "'order-' || g"


def run_id(number: int) -> uuid.UUID:
    """Copy `number`'s run id (`RUN_ID` below)."""
    return uuid.UUID(int=(1 << 120) | number)


def started_at(number: int, *, runs: int, end: datetime) -> datetime:
    """When copy `number` (1..runs) started: evenly over YEARS before `end`, oldest first."""
    offset_us = (number - 1) * SPAN_US // max(runs, 1)  # integers: exact at any size
    return end - timedelta(microseconds=SPAN_US - offset_us)


# ---------------------------------------------------------------------------
# Templates: finished runs the real code made
# ---------------------------------------------------------------------------


def template_key(number: int) -> str:
    """The order id template `number`'s run is started with: text found nowhere else in
    its rows, so each copy's rows get their own key wherever the engine wrote it."""
    return f"bench-order-template-{number}"


def finished_templates(people: dict[str, Any]) -> list[WorkflowRun]:
    """Make the two finished runs that every copy is one of: orders, keyed as each copy is."""
    chain, _ = engine.start_workflow(
        workflow_type=definitions.ORDER, input={"order_id": template_key(0)}
    )
    for _ in range(10):
        step = chain.steps.filter(state="scheduled").first()
        if step is None:
            break
        engine.execute_step(step_id=step.pk)
    reviewer = User.objects.get(pk=people["others"][0])
    approval, _ = engine.start_workflow(
        workflow_type=definitions.ORDER_REVIEW,
        input={
            "order_id": template_key(1),
            "title": "Bench finished review",
            "assignee": reviewer.username,
        },
    )
    task = approval.human_tasks.get()
    human_tasks.approve_human_task(task_id=task.pk, user=reviewer, channel=Channel.INBOX)
    runs = [WorkflowRun.objects.get(pk=chain.pk), WorkflowRun.objects.get(pk=approval.pk)]
    for run in runs:
        if run.finished_at is None:
            raise RuntimeError(f"template run {run.pk} did not finish: {run.state}")
    return runs


class Template:
    """A finished run's rows, as the engine wrote them, ready to be copied.

    The rows are kept in tables of their own (`seed_template_<n>_<table>`), so each
    copy reads a handful of rows, never the growing table they came from (whose
    indexes are dropped while it is filled). They are ordinary tables, not temporary
    ones, so that every connection of the seed reads them; `drop` removes them.
    """

    def __init__(self, run: WorkflowRun, *, number: int) -> None:
        self.run_id = str(run.pk)
        self.key = run.input["order_id"]
        self.created_at = run.created_at
        self.number = number
        self.step_ids = list(
            StepRun.objects.filter(run=run).order_by("id").values_list("pk", flat=True)
        )
        tasks = HumanTask.objects.filter(run=run).values_list("pk", flat=True)
        self.task_ids = [str(pk) for pk in tasks]
        # (model, columns copied, temporary table, the template's rows as text)
        self.tables: list[tuple[type[models.Model], list[str], str, list[list[str | None]]]] = []
        self._read(WorkflowRun, "id", self.run_id)
        self._read(StepRun, "run_id", self.run_id)
        self._read(StepEvent, "run_id", self.run_id)
        self._read(Signal, "run_id", self.run_id)
        if self.task_ids:
            self._read(HumanTask, "run_id", self.run_id)
            for field in HumanTask._meta.many_to_many:
                through = field.remote_field.through
                self._read(through, field.m2m_column_name(), self.task_ids)
            self._read(LogEntry, "object_pk", self.task_ids)

    def drop(self) -> None:
        with connection.cursor() as cursor:
            for _, _, copy, _ in self.tables:
                cursor.execute(f'DROP TABLE "{copy}"')  # nosec B608

    def _read(self, model: type[models.Model], column: str, value: Any) -> None:
        table = model._meta.db_table
        identity = model is not StepRun and model is not WorkflowRun and model is not HumanTask
        copy = f"seed_template_{self.number}_{len(self.tables)}"
        values = value if isinstance(value, list) else [value]
        with connection.cursor() as cursor:
            cursor.execute(
                f'CREATE TABLE "{copy}" AS SELECT * FROM "{table}" '  # nosec B608
                f'WHERE "{column}"::text = ANY(%s)',
                [[str(one) for one in values]],
            )
            cursor.execute(f'SELECT * FROM "{copy}"')  # nosec B608
            names = [column.name for column in cursor.description]
            rows = cursor.fetchall()
        keep = [
            index
            for index, name in enumerate(names)
            if not (identity and name == model._meta.pk.column)
        ]
        self.tables.append(
            (
                model,
                [names[index] for index in keep],
                copy,
                [[None if row[i] is None else _text(row[i]) for i in keep] for row in rows],
            )
        )


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def _types(table: str) -> dict[str, str]:
    """Each column of `table` with its SQL type, for casting a replaced text back."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
            [table],
        )
        return dict(cursor.fetchall())


# Copy g's run id and task ids, as the COPY seed made them: (1 << 120) | g, and
# (2 << 120) | (g << 8) | index, written as UUIDs.
RUN_ID = "('01' || lpad(to_hex(g), 30, '0'))::uuid"
TASK_ID = "('02' || lpad(to_hex(g * 256 + {index}), 30, '0'))::uuid"


def insert_copies(
    template: Template,
    *,
    first: int,
    last: int,
    parity: int,
    runs: int,
    end: datetime,
    step_base: int,
    spacing: int,
) -> int:
    """Copy the template once per g in first..last with g % 2 == parity, in the database.

    One `INSERT ... SELECT` per table over `generate_series`: copy g's timestamps
    move to `started_at(g)`, its step ids start at `step_base + 1 + (g - 1) *
    spacing`, the run's and tasks' ids are replaced wherever they appear (keys,
    text, JSON), and so is the template's order id, by the copy's business key
    `order-<g>`, which is also its correlation id. Return the rows written.
    """
    start = end - timedelta(microseconds=SPAN_US)
    shift = (
        f"(%(start)s::timestamptz - %(created)s::timestamptz + "
        f"(div((g - 1)::numeric * {SPAN_US}, %(runs)s))::float8 * interval '1 microsecond')"
    )
    # What each copy's rows share is computed once per copy, into a table every
    # statement of the copies reads, not once per row and column (the shift's numeric
    # division alone was about a microsecond each time).
    shared = [f"{shift} AS shift", f"{RUN_ID}::text AS run_id", f"{BUSINESS_KEY} AS key"] + [
        f"{TASK_ID.format(index=index)}::text AS task_{index}"
        for index in range(len(template.task_ids))
    ]
    replace = [(template.run_id, "c.run_id"), (template.key, "c.key")] + [
        (task_id, f"c.task_{index}") for index, task_id in enumerate(template.task_ids)
    ]
    params = {
        "start": start,
        "created": template.created_at,
        "runs": runs,
        "step_base": step_base,
        "spacing": spacing,
        "first": first,
        "last": last,
        "parity": parity,
    }
    written = 0
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMPORARY TABLE seed_copies AS SELECT g, {', '.join(shared)} "  # nosec B608
            "FROM generate_series(%(first)s::bigint, %(last)s) g WHERE mod(g, 2) = %(parity)s",
            params,
        )
        for model, columns, copy, rows in template.tables:
            if not rows:
                continue
            table = model._meta.db_table
            types = _types(table)
            step_columns = {
                field.column
                for field in model._meta.concrete_fields
                if field.is_relation and field.related_model is StepRun
            }
            if model is StepRun:
                step_columns.add("id")
            values = []
            for position, column in enumerate(columns):
                quoted = f't."{column}"'
                texts = [row[position] for row in rows if row[position] is not None]
                if types[column] == "timestamp with time zone":
                    values.append(f"{quoted} + c.shift")
                elif column in step_columns:
                    cases = " ".join(
                        f"WHEN {old} THEN %(step_base)s + 1 + (g - 1) * %(spacing)s + {n}"
                        for n, old in enumerate(template.step_ids)
                    )
                    values.append(f"CASE {quoted} {cases} ELSE {quoted} END")
                elif model is WorkflowRun and column == "correlation_id":
                    values.append("c.key")
                elif any(old in text for text in texts for old, _ in replace):
                    expression = f"{quoted}::text"
                    for old, new in replace:
                        if any(old in text for text in texts):
                            expression = f"replace({expression}, '{old}', {new})"
                    values.append(f"({expression})::{types[column]}")
                else:
                    values.append(quoted)
            names = ", ".join(f'"{name}"' for name in columns)
            cursor.execute(
                f'INSERT INTO "{table}" ({names}) SELECT {", ".join(values)} '  # nosec B608
                f'FROM "{copy}" t CROSS JOIN seed_copies c',
                params,
            )
            written += cursor.rowcount
        cursor.execute("DROP TABLE seed_copies")
    return written


# The history's tables, which the seed fills by the million.
HISTORY = (
    WorkflowRun,
    StepRun,
    StepEvent,
    Signal,
    HumanTask,
    LogEntry,
    HumanTask.candidate_users.through,
    HumanTask.candidate_groups.through,
)


def filled_tables() -> list[str]:
    """The tables the seed fills by the million, whose secondary indexes are built after:
    the history's, and every table `seed.clone_tasks` copies beside a live task (its
    inbox entries, and the notifications a group task sends each of its group's members:
    25M rows at 10M runs)."""
    models_ = [*HISTORY, *(model for model, _ in seed.hanging_off(HumanTask))]
    return list(dict.fromkeys(model._meta.db_table for model in models_))


def drop_indexes() -> list[str]:
    """Drop the filled tables' secondary indexes; return the statements that make them again.

    Building an index once over the loaded rows (sorted, in parallel) is many times
    cheaper than keeping it up to date row by row. Indexes behind a constraint
    (primary keys, unique constraints) stay; a partitioned table's index goes with
    its partitions' and comes back on every partition.
    """
    tables = filled_tables()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i "
            "WHERE i.indrelid = ANY(%s::regclass[]) AND NOT i.indisprimary "
            "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)",
            [tables],
        )
        found = cursor.fetchall()
        for name, _ in found:
            cursor.execute(f"DROP INDEX {name}")  # nosec B608
    # A partitioned table's index is written `ON ONLY` the parent, which would make it
    # alone, invalid, with no index on any partition: without ONLY it is made on every
    # partition too, as the migrations made it.
    return [definition.replace(" ON ONLY ", " ON ", 1) for _, definition in found]


def index_templates(templates: dict[str, Any]) -> list[str]:
    """Index the live templates' own rows in the tables copied beside a task, by their key
    to it; return the indexes' names.

    `seed.clone_tasks` finds a template's rows by that key, whose index is dropped
    while the table fills: without one, each batch would scan the notifications made
    so far (tens of millions). These indexes hold the templates' rows alone (no copy
    matches their condition), so the copies cost them nothing; they go before the
    table's own indexes are made again.
    """
    tasks = ", ".join(f"'{value}'" for key, value in templates.items() if key.endswith("_task"))
    names = []
    with connection.cursor() as cursor:
        for model, link in seed.hanging_off(HumanTask):
            table = model._meta.db_table
            column = model._meta.get_field(link).column  # type: ignore[union-attr]
            name = f"seed_templates_{len(names)}"
            cursor.execute(
                f'CREATE INDEX "{name}" ON "{table}" ("{column}") '  # nosec B608 (our own ids)
                f'WHERE "{column}" = ANY(ARRAY[{tasks}]::uuid[])'
            )
            names.append(name)
    return names


def drop_named(indexes: list[str]) -> None:
    with connection.cursor() as cursor:
        for name in indexes:
            cursor.execute(f'DROP INDEX "{name}"')  # nosec B608 (names made above)


def make_indexes(definitions: list[str]) -> None:
    """Make the indexes, `WORKERS` at a time, the largest tables' first.

    A partitioned table's indexes are made one after the other: each names its
    partitions' indexes after their columns, and two made at once can pick the same
    free name (`cid` and `cid_like`: `..._cid_idx`), where one after the other the
    second takes the next.
    """
    jobs: dict[str, list[str]] = {}
    for definition in definitions:
        table = _table_of(definition)
        jobs.setdefault(table if _partitioned(table) else definition, []).append(definition)
    by_size = sorted(jobs.values(), key=lambda group: -_size(_table_of(group[0])))
    for _ in in_parallel([partial(_make_indexes, group) for group in by_size]):
        pass


def _make_indexes(definitions: list[str]) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        cursor.execute("SET max_parallel_maintenance_workers = 2")
        for definition in definitions:
            cursor.execute(definition)


def _partitioned(table: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind = 'p' FROM pg_class WHERE oid = %s::regclass", [table])
        return bool(cursor.fetchone()[0])


def _table_of(definition: str) -> str:
    """The table a `CREATE INDEX ... ON <table> USING ...` statement indexes."""
    return definition.split(" ON ", 1)[1].split(" USING ", 1)[0]


def _size(table: str) -> int:
    """The bytes of `table`'s rows, its partitions' included."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(pg_relation_size(relid)), 0) FROM pg_partition_tree(%s)",
            [table],
        )
        return int(cursor.fetchone()[0])


def vacuum() -> None:
    """`VACUUM (ANALYZE)` the database, as autovacuum would have by now, `WORKERS` tables
    at a time, the largest first.

    The same work as one database-wide `VACUUM (ANALYZE)`: each partition is vacuumed,
    and analyzed by its partitioned table's ANALYZE (which samples them all); every
    other table is vacuumed and analyzed.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.oid::regclass::text, c.relkind = 'p', c.relispartition, "
            "(SELECT coalesce(sum(pg_relation_size(relid)), 0) "
            " FROM pg_partition_tree(c.oid)) AS size "
            "FROM pg_class c WHERE c.relkind IN ('r', 'm', 'p') AND c.relpersistence <> 't' "
            "ORDER BY size DESC"
        )
        tables = cursor.fetchall()
    statements = [
        f"ANALYZE {name}"
        if partitioned
        else f"VACUUM {name}"
        if partition
        else f"VACUUM (ANALYZE) {name}"
        for name, partitioned, partition, _ in tables
    ]
    for _ in in_parallel([partial(_execute, statement) for statement in statements]):
        pass


def _execute(statement: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement)  # nosec B608 (names read from the catalogue)


# Connections the seed fills, indexes and vacuums with at once: the machine's cores.
WORKERS = 2

T = TypeVar("T")


def in_parallel(jobs: list[Callable[[], T]], *, workers: int = WORKERS) -> Iterator[T]:
    """Run `jobs`, `workers` at a time, each in a thread with a connection of its own;
    yield their results as they end.

    A statement of PostgreSQL runs on one core (an INSERT ... SELECT never in
    parallel), so one connection leaves the other core of this machine idle. The
    jobs must not depend on each other's order; the first failure stops the rest.
    """

    def run(job: Callable[[], T]) -> T:
        try:
            compress_wal()
            return job()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run, job) for job in jobs]
        try:
            for future in as_completed(futures):
                yield future.result()
        finally:
            for future in futures:
                future.cancel()


def unchecked(call: Callable[[], T]) -> T:
    """Run `call` in a transaction of its own whose inserts skip the foreign-key checks."""
    with transaction.atomic(), connection.cursor() as cursor:
        without_key_checks(cursor)
        return call()


def compress_wal() -> None:
    """Compress the full pages this session writes to the WAL, where the role may: a seed
    writes gigabytes, and after each checkpoint every page it touches goes whole."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET wal_compression = on")
    except DatabaseError:
        pass


def without_key_checks(cursor: Any) -> None:
    """Skip the foreign-key checks of this transaction's inserts, where allowed.

    Every row copied points at rows of its own copy or at the templates', by
    construction; checking each of tens of millions one by one is most of a naive
    seed's time. `session_replication_role = replica` needs a superuser (the tests'
    server has one); without it the checks run, only slower.
    """
    try:
        with transaction.atomic():
            cursor.execute("SET LOCAL session_replication_role = replica")
    except DatabaseError:
        pass


# ---------------------------------------------------------------------------
# The seed
# ---------------------------------------------------------------------------


def make_reviewers(count: int) -> list[int]:
    names = [f"bench-scale-reviewer-{number:05d}" for number in range(1, count + 1)]
    existing = set(User.objects.filter(username__in=names).values_list("username", flat=True))
    User.objects.bulk_create(
        [User(username=name, first_name="Reviewer") for name in names if name not in existing]
    )
    return list(User.objects.filter(username__in=names).order_by("id").values_list("pk", flat=True))


def make_groups(count: int) -> list[int]:
    names = [f"bench-scale-group-{number:03d}" for number in range(1, count + 1)]
    existing = set(Group.objects.filter(name__in=names).values_list("name", flat=True))
    Group.objects.bulk_create([Group(name=name) for name in names if name not in existing])
    return list(Group.objects.filter(name__in=names).order_by("id").values_list("pk", flat=True))


def make_manager(group_id: int) -> None:
    manager, _ = User.objects.get_or_create(username=MANAGER, defaults={"first_name": "Manager"})
    GroupManager.objects.update_or_create(group_id=group_id, defaults={"manager": manager})


def make_operator() -> None:
    User.objects.filter(username=OPERATOR).exists() or User.objects.create_superuser(
        username=OPERATOR, email="operator@example.com", password=None
    )


OPERATOR = "bench-operator"
MANAGER = "bench-scale-manager"


def seed_scale(*, runs: int, log: Callable[[str], Any] = print) -> dict[str, Any]:
    """Fill an empty, migrated database with `runs` finished runs of history and live work."""
    began = time.monotonic()

    def say(text: str) -> None:
        log(f"{text} [{time.monotonic() - began:.0f} s]")

    compress_wal()
    now = timezone.now()
    end = now - timedelta(days=1)
    people = seed.ensure_people()
    templates = seed.make_templates(people)
    make_operator()
    for partitioned in partitions.partitioned_tables():
        month = partitions.month_of(end - timedelta(microseconds=SPAN_US))
        while month <= partitions.month_of(now):
            partitions.ensure_month(partitioned, month)
            month = partitions.add_months(month, 1)
    finished = [
        Template(run, number=number) for number, run in enumerate(finished_templates(people))
    ]
    # Copies alternate between the templates: even numbers the first, odd the second.
    steps_each = [len(template.step_ids) for template in finished]
    spacing = max(steps_each)
    step_base = seed.reserve_ids(StepRun, count=runs * spacing + 10)
    indexes = drop_indexes()
    lookups = index_templates(templates)
    chunks = [(first, min(runs, first + CHUNK - 1)) for first in range(1, runs + 1, CHUNK)]
    copies = [
        partial(
            unchecked,
            partial(
                _copy_chunk,
                finished,
                first=first,
                last=last,
                runs=runs,
                end=end,
                step_base=step_base,
                spacing=spacing,
            ),
        )
        for first, last in chunks
    ]
    rows = copied = 0
    for count, written in in_parallel(copies):
        rows += written
        copied += count
        say(f"  finished runs: {copied:,} of {runs:,} ({rows:,} rows)")
    for template in finished:
        template.drop()
    # Vacuum the history before the live work is added, as autovacuum would have while it
    # was recent. A vacuum records each page's gap in the free space map; in a database of
    # years, ordinary inserts soon fill the gaps of recent pages, and old pages, all-visible,
    # are never scanned again. One vacuum at the end would advertise the gap of every page
    # of three years at once, and the measured sweep's new steps then went to 100 cold pages
    # instead of the newest few (at 10M: 200 steps on 100 pages, 50 read from outside
    # shared_buffers; after: on 6 pages at the table's end, 3 to 6 read). The live work's
    # inserts now fill the history's gaps, and the last vacuum skips the pages they did not
    # touch. (The events' current month still offers gaps the sweep's small events fill,
    # one a page: README's "Scaling".)
    vacuum()
    say("  history vacuumed")
    open_tasks = runs // 10
    reviewers = make_reviewers(REVIEWERS)
    groups = make_groups(GROUPS)
    make_manager(groups[0])
    base = seed.reserve_ids(StepRun, count=open_tasks + REVIEWER_CLAIMED + REVIEWER_QUEUE + 10)
    with transaction.atomic(), connection.cursor() as cursor:
        without_key_checks(cursor)
        seed.clone_tasks(
            templates=templates,
            kind="mine",
            tag="mine",
            first=1,
            last=REVIEWER_CLAIMED,
            step_base=base,
        )
        base += REVIEWER_CLAIMED
        seed.clone_tasks(
            templates=templates,
            kind="queue",
            tag="queue",
            first=1,
            last=REVIEWER_QUEUE,
            step_base=base,
        )
        base += REVIEWER_QUEUE
    # Half of the other reviewers' open tasks are claimed by one of them, half wait in
    # one of the groups' queues; beside them, runs asleep. Every batch is its own job.
    person = f"(%(people)s::bigint[])[1 + mod(g, {len(reviewers)})]"
    group = f"(%(groups)s::bigint[])[1 + mod(g - 1, {len(groups)})]"
    claimed = open_tasks // 2
    shares = (
        ("other_claimed", claimed, {"person": person, "params": {"people": reviewers}}),
        ("other_open", open_tasks - claimed, {"group": group, "params": {"groups": groups}}),
    )
    live: list[Callable[[], tuple[str, int]]] = []
    for kind, count, extra in shares:
        for first, last in _batches(count):
            clone = partial(
                seed.clone_tasks,
                templates=templates,
                kind=kind,
                tag=kind,
                first=first,
                last=last,
                step_base=base,
                **extra,
            )
            live.append(partial(_labelled, f"{kind} open tasks", last - first + 1, clone))
        base += count
    sleepers = runs // 10
    sleep_base = seed.reserve_ids(StepRun, count=sleepers + 10)
    for first, last in _batches(sleepers):
        clone = partial(
            seed.clone_runs,
            run_id=templates["sleep_run"],
            step_id=templates["sleep_step"],
            tag="sleep",
            first=first,
            last=last,
            step_base=sleep_base,
            step_overrides={"due_at": f"{seed.FAR_FUTURE} + g * interval '1 second'"},
        )
        live.append(partial(_labelled, "waiting runs", last - first + 1, clone))
    made: dict[str, int] = {}
    for label, count in in_parallel([partial(unchecked, job) for job in live]):
        made[label] = made.get(label, 0) + count
        say(f"  {label}: {made[label]:,}")
    drop_named(lookups)
    make_indexes(indexes)
    say(f"  indexes: {len(indexes)} built")
    vacuum()
    say("  vacuumed")
    return {
        "people": people,
        "templates": templates,
        "runs": runs,
        "open_tasks": open_tasks + REVIEWER_CLAIMED + REVIEWER_QUEUE,
        "waiting_runs": sleepers,
        "history_from": (end - timedelta(microseconds=SPAN_US)).astimezone(UTC).isoformat(),
    }


def _copy_chunk(
    finished: list[Template], *, first: int, last: int, **shared: Any
) -> tuple[int, int]:
    """Make copies first..last, alternately of each template; return (copies, rows written)."""
    rows = 0
    for parity, template in enumerate(finished):
        rows += insert_copies(template, first=first, last=last, parity=parity, **shared)
    return last - first + 1, rows


def _labelled(label: str, count: int, call: Callable[[], Any]) -> tuple[str, int]:
    call()
    return label, count


def _batches(count: int) -> Iterator[tuple[int, int]]:
    for first in range(1, count + 1, seed.BATCH):
        yield first, min(count, first + seed.BATCH - 1)
