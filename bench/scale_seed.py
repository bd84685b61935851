"""Seed a company's worth of history by COPY, in the shape the engine writes it.

Two finished runs are made through the real code (a 3-step run of no-op
activities, and a one-approval run that a reviewer approved: its step, events,
signal, human task with its candidates, and its audit entries), and their rows
are read back as the engine wrote them. `runs` copies of them, alternately, are
then streamed into each table with `COPY ... FROM STDIN`: every copy gets a run
id, step ids and a task id of its own (the template's ids are replaced wherever
they appear, in keys and in text), a business key (`correlation_id`
`order-<n>`), and every timestamp moved by the same amount, so the copies start
evenly over three years, oldest first. Rows whose primary key is an identity
column (events, signals, candidates, audit entries) get theirs from the
database.

Beside the history, live work is cloned by `bench.seed`'s INSERT ... SELECT from
templates the real code made: the benchmark reviewer's 2,000 open tasks (1,600
claimed by them, 400 in their group's queue), `runs // 10` open tasks of other
reviewers (one of `REVIEWERS`, in turns), and `runs // 10` runs asleep on a
far-off timer (the sweep must not find them due).

Month partitions are made for the three years first, so the history lands in
its months (as the migration does for an existing table's oldest rows). Seeded
audit entries copy the template's chain fields, so they are not a valid chain:
no benchmark verifies it.

Timestamps are computed in whole microseconds from the copy's number, so no
size overflows a `timedelta`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from auditlog.models import LogEntry
from django.contrib.auth.models import User
from django.db import connection, models, transaction
from django.utils import timezone

from approvals import human_tasks
from approvals.models import HumanTask
from approvals.states import Channel
from bench import definitions, seed
from workflows import engine, partitions
from workflows.models import Signal, StepEvent, StepRun, WorkflowRun

YEARS = 3
SPAN_US = YEARS * 365 * 86_400 * 1_000_000
REVIEWER_CLAIMED = 1_600
REVIEWER_QUEUE = 400
REVIEWERS = 500
CHUNK = 20_000
TIMESTAMPTZ = 1184


def business_key(number: int) -> str:
    return f"order-{number}"


def started_at(number: int, *, runs: int, end: datetime) -> datetime:
    """When copy `number` (1..runs) started: evenly over YEARS before `end`, oldest first."""
    offset_us = (number - 1) * SPAN_US // max(runs, 1)  # integers: exact at any size
    return end - timedelta(microseconds=SPAN_US - offset_us)


# ---------------------------------------------------------------------------
# Templates: finished runs the real code made
# ---------------------------------------------------------------------------


def finished_templates(people: dict[str, Any]) -> list[WorkflowRun]:
    """Make the two finished runs that every copy is one of."""
    chain, _ = engine.start_workflow(workflow_type=definitions.NOOP3, input={})
    for _ in range(10):
        step = chain.steps.filter(state="scheduled").first()
        if step is None:
            break
        engine.execute_step(step_id=step.pk)
    reviewer = User.objects.get(pk=people["others"][0])
    approval, _ = engine.start_workflow(
        workflow_type=definitions.APPROVAL_MINE,
        input={"title": "Bench finished review", "assignee": reviewer.username},
    )
    task = approval.human_tasks.get()
    human_tasks.approve_human_task(task_id=task.pk, user=reviewer, channel=Channel.INBOX)
    runs = [WorkflowRun.objects.get(pk=chain.pk), WorkflowRun.objects.get(pk=approval.pk)]
    for run in runs:
        if run.finished_at is None:
            raise RuntimeError(f"template run {run.pk} did not finish: {run.state}")
    return runs


class Template:
    """A finished run's rows, as the engine wrote them, ready to be copied."""

    def __init__(self, run: WorkflowRun) -> None:
        self.run_id = str(run.pk)
        self.created_at = run.created_at
        self.step_ids = list(
            StepRun.objects.filter(run=run).order_by("id").values_list("pk", flat=True)
        )
        tasks = HumanTask.objects.filter(run=run).values_list("pk", flat=True)
        self.task_ids = [str(pk) for pk in tasks]
        self.tables: list[tuple[type[models.Model] | str, list[str], list[list[Any]]]] = []
        self._read(WorkflowRun, "id = %s", [self.run_id])
        self._read(StepRun, "run_id = %s", [self.run_id])
        self._read(StepEvent, "run_id = %s", [self.run_id])
        self._read(Signal, "run_id = %s", [self.run_id])
        if self.task_ids:
            self._read(HumanTask, "run_id = %s", [self.run_id])
            for field in HumanTask._meta.many_to_many:
                through = field.remote_field.through
                self._read(through, f"{field.m2m_column_name()} = ANY(%s::uuid[])", [self.task_ids])
            self._read(LogEntry, "object_pk = ANY(%s)", [self.task_ids])

    def _read(self, model: type[models.Model], where: str, params: list[Any]) -> None:
        table = model._meta.db_table
        identity = model is not StepRun and model is not WorkflowRun and model is not HumanTask
        with connection.cursor() as cursor:
            cursor.execute(f'SELECT * FROM "{table}" WHERE {where} ORDER BY 1', params)
            description = cursor.description
            rows = cursor.fetchall()
        columns = [column.name for column in description]
        kinds = [column.type_code for column in description]
        keep = [
            index
            for index, name in enumerate(columns)
            if not (identity and name == model._meta.pk.column)
        ]
        self.tables.append(
            (
                model,
                [columns[index] for index in keep],
                [[(kinds[index], row[index]) for index in keep] for row in rows],
            )
        )


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def copy_rows(
    template: Template,
    numbers: list[int],
    *,
    runs: int,
    end: datetime,
    step_base: int,
    spacing: int,
) -> int:
    """COPY the template once per number in `numbers`; return the rows written.

    Copy n's steps take the ids from `step_base + 1 + (n - 1) * spacing` on.
    """
    written = 0
    steps = spacing
    with connection.cursor() as cursor:
        raw = cursor.cursor  # psycopg's own cursor, for COPY
        for model, columns, rows in template.tables:
            table = model._meta.db_table
            names = ", ".join(f'"{name}"' for name in columns)
            step_columns = {
                field.column
                for field in model._meta.concrete_fields
                if field.is_relation and field.related_model is StepRun
            }
            if model is StepRun:
                step_columns.add("id")
            with raw.copy(f'COPY "{table}" ({names}) FROM STDIN') as copy:
                for number in numbers:
                    shift = started_at(number, runs=runs, end=end) - template.created_at
                    run_id = str(uuid.UUID(int=(1 << 120) | number))
                    replace = {template.run_id: run_id}
                    for index, task_id in enumerate(template.task_ids):
                        replace[task_id] = str(uuid.UUID(int=(2 << 120) | (number << 8) | index))
                    first_step = step_base + 1 + (number - 1) * steps
                    step_of = {old: first_step + n for n, old in enumerate(template.step_ids)}
                    for row in rows:
                        out = []
                        for column, (kind, value) in zip(columns, row, strict=True):
                            if value is None:
                                out.append(None)
                            elif kind == TIMESTAMPTZ:
                                out.append((value + shift).isoformat())
                            elif column in step_columns:
                                out.append(str(step_of.get(value, value)))
                            elif model is WorkflowRun and column == "correlation_id":
                                out.append(business_key(number))
                            else:
                                text = _text(value)
                                for old, new in replace.items():
                                    if old in text:
                                        text = text.replace(old, new)
                                out.append(text)
                        copy.write_row(out)
                        written += 1
    return written


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


def make_operator() -> None:
    User.objects.filter(username=OPERATOR).exists() or User.objects.create_superuser(
        username=OPERATOR, email="operator@example.com", password=None
    )


OPERATOR = "bench-operator"


def seed_scale(*, runs: int, log: Callable[[str], Any] = print) -> dict[str, Any]:
    """Fill an empty, migrated database with `runs` finished runs of history and live work."""
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
    finished = [Template(run) for run in finished_templates(people)]
    # Copies alternate between the templates: odd numbers the first, even the second.
    steps_each = [len(template.step_ids) for template in finished]
    spacing = max(steps_each)
    step_base = seed.reserve_ids(StepRun, count=runs * spacing + 10)
    rows = 0
    for first in range(1, runs + 1, CHUNK):
        last = min(runs, first + CHUNK - 1)
        with transaction.atomic():
            for index, template in enumerate(finished):
                numbers = [n for n in range(first, last + 1) if n % len(finished) == index]
                rows += copy_rows(
                    template, numbers, runs=runs, end=end, step_base=step_base, spacing=spacing
                )
        log(f"  finished runs: {last:,} of {runs:,} ({rows:,} rows)")
    open_tasks = runs // 10
    reviewers = make_reviewers(REVIEWERS)
    base = seed.reserve_ids(StepRun, count=open_tasks + REVIEWER_CLAIMED + REVIEWER_QUEUE + 10)
    with transaction.atomic():
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
    person = f"(%(people)s::bigint[])[1 + mod(g, {len(reviewers)})]"
    for first, last in _batches(open_tasks):
        with transaction.atomic():
            seed.clone_tasks(
                templates=templates,
                kind="other_claimed",
                tag="other_claimed",
                first=first,
                last=last,
                step_base=base,
                person=person,
                params={"people": reviewers},
            )
        log(f"  other reviewers' open tasks: {last:,} of {open_tasks:,}")
    base += open_tasks
    sleepers = runs // 10
    sleep_base = seed.reserve_ids(StepRun, count=sleepers + 10)
    for first, last in _batches(sleepers):
        with transaction.atomic():
            seed.clone_runs(
                run_id=templates["sleep_run"],
                step_id=templates["sleep_step"],
                tag="sleep",
                first=first,
                last=last,
                step_base=sleep_base,
                step_overrides={"due_at": f"{seed.FAR_FUTURE} + g * interval '1 second'"},
            )
    log(f"  waiting runs: {sleepers:,}")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE)")  # what autovacuum would have done by now
    return {
        "people": people,
        "templates": templates,
        "runs": runs,
        "open_tasks": open_tasks + REVIEWER_CLAIMED + REVIEWER_QUEUE,
        "waiting_runs": sleepers,
        "history_from": (end - timedelta(microseconds=SPAN_US)).astimezone(UTC).isoformat(),
    }


def _batches(count: int) -> Iterator[tuple[int, int]]:
    for first in range(1, count + 1, seed.BATCH):
        yield first, min(count, first + seed.BATCH - 1)
