"""Seed a database with many runs and human tasks in minutes, by cloning rows the real code made.

Each kind of row starts as a template made through the public entry points (a
real `start_workflow`, which opens a real human task), then is copied in bulk:
`INSERT INTO t (every column) SELECT <the template's column, or an override>
FROM t, generate_series(...) WHERE <the template>`. The column lists come from
`Model._meta.concrete_fields`, and only the columns that must differ (ids, state,
due times, people) are overridden by field name, so a column added or removed by
a migration is carried along as the real code set it.

What is seeded (`Seed`): `waiting_runs` runs asleep in a Sleep node whose timer is
due far in the future (the sweep must not read them), and `tasks` human tasks:
the reviewer's 1,000 live ones (800 claimed by them, 200 open in their group's
queue) and, beyond those, other people's, 95% completed and the rest live (claimed
by someone else, or open in another group's queue). Every task has its own run and
step. Step events and audit entries are not cloned: no benchmarked query reads them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import connection, models, transaction

from approvals.models import HumanTask
from bench import definitions
from bench.profiles import Seed
from workflows import engine
from workflows.models import StepRun, WorkflowRun

REVIEWER = "bench-reviewer"
OTHER_PEOPLE = 50
REVIEWER_CLAIMED = 800
REVIEWER_QUEUE = 200
BATCH = 100_000
# Far enough ahead that no sweep of a benchmark ever finds these due.
FAR_FUTURE = "TIMESTAMPTZ '2100-01-01 00:00:00+00'"


def _column(model: type[models.Model], field_name: str) -> str:
    return model._meta.get_field(field_name).column  # type: ignore[union-attr]


def clone(
    model: type[models.Model],
    *,
    where_field: str,
    where_value: Any,
    first: int,
    last: int,
    overrides: dict[str, str | None],
    only: str = "",
    params: dict[str, Any] | None = None,
) -> int:
    """Copy the rows of `model` matching the template once per g in first..last.

    `overrides` maps field names to SQL expressions over `g` (the copy's number) and
    `t` (the template row), or to None to leave the column to its default; `only`
    is an SQL condition over `g` choosing which copies to make. Return the rows added.
    """
    quote = connection.ops.quote_name
    by_column = {_column(model, name): expression for name, expression in overrides.items()}
    columns = [field.column for field in model._meta.concrete_fields]
    kept = [column for column in columns if by_column.get(column, "") is not None]
    values = [by_column.get(column) or f"t.{quote(column)}" for column in kept]
    table = quote(model._meta.db_table)
    statement = (
        f"INSERT INTO {table} ({', '.join(map(quote, kept))}) "
        f"SELECT {', '.join(values)} FROM {table} t "
        f"CROSS JOIN generate_series(%(first)s, %(last)s) AS g "
        f"WHERE t.{quote(_column(model, where_field))} = %(template)s"
        + (f" AND ({only})" if only else "")
    )
    with connection.cursor() as cursor:
        cursor.execute(
            statement, {"first": first, "last": last, "template": where_value, **(params or {})}
        )
        return cursor.rowcount


def reserve_ids(model: type[models.Model], *, count: int) -> int:
    """Reserve `count` ids of an integer primary key; return the one before the block."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_serial_sequence(%s, %s)",
            [model._meta.db_table, model._meta.pk.column],
        )
        (sequence,) = cursor.fetchone()
        cursor.execute("SELECT nextval(%s)", [sequence])
        (first,) = cursor.fetchone()
        cursor.execute("SELECT setval(%s, %s)", [sequence, first + count])
    return first - 1


def uuid_of(tag: str) -> str:
    """An SQL expression giving copy g of `tag` a stable UUID of its own."""
    return f"md5('{tag}:' || g)::uuid"


def _batches(count: int) -> Iterator[tuple[int, int]]:
    for first in range(1, count + 1, BATCH):
        yield first, min(count, first + BATCH - 1)


# ---------------------------------------------------------------------------
# People and templates (made through the real code)
# ---------------------------------------------------------------------------


def ensure_people() -> dict[str, Any]:
    reviewers, _ = Group.objects.get_or_create(name=definitions.REVIEWERS_GROUP)
    others, _ = Group.objects.get_or_create(name=definitions.OTHERS_GROUP)
    reviewer, _ = User.objects.get_or_create(username=REVIEWER, defaults={"first_name": "Rita"})
    reviewer.groups.add(reviewers)
    people = []
    for number in range(1, OTHER_PEOPLE + 1):
        person, _ = User.objects.get_or_create(username=f"bench-other-{number:02d}")
        person.groups.add(others)
        people.append(person.pk)
    return {
        "reviewer": reviewer.pk,
        "reviewers_group": reviewers.pk,
        "others_group": others.pk,
        "others": people,
    }


def make_templates() -> dict[str, Any]:
    """Start one run of each kind through the engine; return the ids of what it made."""
    sleeper, _ = engine.start_workflow(workflow_type=definitions.SLEEP, input={})
    mine, _ = engine.start_workflow(
        workflow_type=definitions.APPROVAL_MINE,
        input={"assignee": REVIEWER, "title": "Review the bench contract"},
    )
    queue, _ = engine.start_workflow(
        workflow_type=definitions.APPROVAL_QUEUE, input={"title": "Check the bench invoice"}
    )
    return {
        "sleep_run": str(sleeper.pk),
        "sleep_step": sleeper.steps.get().pk,
        "mine_run": str(mine.pk),
        "mine_step": mine.steps.get().pk,
        "mine_task": str(mine.human_tasks.get().pk),
        "queue_run": str(queue.pk),
        "queue_step": queue.steps.get().pk,
        "queue_task": str(queue.human_tasks.get().pk),
    }


# ---------------------------------------------------------------------------
# Cloning runs, steps and tasks
# ---------------------------------------------------------------------------


def clone_runs(
    *,
    run_id: str,
    step_id: int,
    tag: str,
    first: int,
    last: int,
    step_base: int,
    run_overrides: dict[str, str | None] | None = None,
    step_overrides: dict[str, str | None] | None = None,
    only: str = "",
    params: dict[str, Any] | None = None,
) -> int:
    """Copy a run and its one step; copy g gets run `uuid_of(tag)` and step `step_base + g`."""
    added = clone(
        WorkflowRun,
        where_field="id",
        where_value=run_id,
        first=first,
        last=last,
        overrides={"id": uuid_of(tag), "correlation_id": f"'{tag}'", **(run_overrides or {})},
        only=only,
        params=params,
    )
    clone(
        StepRun,
        where_field="id",
        where_value=step_id,
        first=first,
        last=last,
        overrides={"id": f"{step_base}::bigint + g", "run": uuid_of(tag), **(step_overrides or {})},
        only=only,
        params=params,
    )
    return added


def clone_tasks(
    *,
    templates: dict[str, Any],
    kind: str,
    tag: str,
    first: int,
    last: int,
    step_base: int,
    finished: bool = False,
    person: str | None = None,
    group: int | None = None,
    only: str = "",
    params: dict[str, Any] | None = None,
) -> int:
    """Copy the `kind` ("mine" or "queue") template's run, step, task and candidates.

    `person` is an SQL expression for the assignee (and candidate user) of a "mine"
    copy; `group` replaces a "queue" copy's candidate group; `finished` makes copies
    whose task was approved and whose run succeeded.
    """
    task_id = uuid_of(f"task-{tag}")
    due = f"{FAR_FUTURE} + mod(g::bigint * 7919, 100000) * interval '1 minute'"
    run_overrides: dict[str, str | None] = {}
    step_overrides: dict[str, str | None] = {}
    task_overrides: dict[str, str | None] = {
        "id": task_id,
        "run": uuid_of(tag),
        "step": f"{step_base}::bigint + g",
        "due_at": due,
        "title": "t.title || ' #' || g",
    }
    if person is not None:
        task_overrides["assignee"] = person
    if finished:
        run_overrides.update(state="'succeeded'", finished_at="now()")
        step_overrides.update(state="'succeeded'", finished_at="now()", due_at="NULL")
        task_overrides.update(
            state="'completed'",
            outcome="'approved'",
            decided_by=person or "t.assignee_id",
            decided_at="now() - g * interval '1 second'",
            completed_at="now() - g * interval '1 second'",
            channel="'inbox'",
            version="t.version + 1",
        )
    common = {"first": first, "last": last, "only": only, "params": params}
    clone_runs(
        run_id=templates[f"{kind}_run"],
        step_id=templates[f"{kind}_step"],
        tag=tag,
        step_base=step_base,
        run_overrides=run_overrides,
        step_overrides=step_overrides,
        **common,
    )
    added = clone(
        HumanTask,
        where_field="id",
        where_value=templates[f"{kind}_task"],
        overrides=task_overrides,
        **common,
    )
    users = HumanTask.candidate_users.through
    clone(
        users,
        where_field="humantask",
        where_value=templates[f"{kind}_task"],
        overrides={"id": None, "humantask": task_id, **({"user": person} if person else {})},
        **common,
    )
    groups = HumanTask.candidate_groups.through
    clone(
        groups,
        where_field="humantask",
        where_value=templates[f"{kind}_task"],
        overrides={"id": None, "humantask": task_id, **({"group": str(group)} if group else {})},
        **common,
    )
    return added


def seed(*, size: Seed, log: Any = print) -> dict[str, Any]:
    """Fill an empty, migrated database to `size`; return the people and templates made."""
    people = ensure_people()
    templates = make_templates()
    step_base = reserve_ids(StepRun, count=size.waiting_runs + size.tasks + 10)
    for first, last in _batches(size.waiting_runs):
        with transaction.atomic():
            clone_runs(
                run_id=templates["sleep_run"],
                step_id=templates["sleep_step"],
                tag="sleep",
                first=first,
                last=last,
                step_base=step_base,
                step_overrides={"due_at": f"{FAR_FUTURE} + g * interval '1 second'"},
            )
        log(f"  waiting runs: {last:,} of {size.waiting_runs:,}")
    base = step_base + size.waiting_runs
    reviewer = str(people["reviewer"])
    with transaction.atomic():
        clone_tasks(
            templates=templates,
            kind="mine",
            tag="mine",
            first=1,
            last=REVIEWER_CLAIMED,
            step_base=base,
            person=reviewer,
        )
        base += REVIEWER_CLAIMED
        clone_tasks(
            templates=templates,
            kind="queue",
            tag="queue",
            first=1,
            last=REVIEWER_QUEUE,
            step_base=base,
        )
        base += REVIEWER_QUEUE
    others = max(0, size.tasks - REVIEWER_CLAIMED - REVIEWER_QUEUE - 2)
    person = f"(%(people)s::bigint[])[1 + mod(g, {len(people['others'])})]"
    params = {"people": people["others"]}
    for first, last in _batches(others):
        with transaction.atomic():
            clone_tasks(
                templates=templates,
                kind="mine",
                tag="other-done",
                first=first,
                last=last,
                step_base=base,
                finished=True,
                person=person,
                only="mod(g, 20) <> 0",
                params=params,
            )
            clone_tasks(
                templates=templates,
                kind="mine",
                tag="other-claimed",
                first=first,
                last=last,
                step_base=base,
                person=person,
                only="mod(g, 40) = 0",
                params=params,
            )
            clone_tasks(
                templates=templates,
                kind="queue",
                tag="other-open",
                first=first,
                last=last,
                step_base=base,
                group=people["others_group"],
                only="mod(g, 40) = 20",
            )
        log(f"  other people's tasks: {last:,} of {others:,}")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return {"people": people, "templates": templates}


def add_due_timers(*, templates: dict[str, Any], count: int, due_before: datetime, tag: str) -> int:
    """Add `count` sleeping runs whose timers are due at or before `due_before`."""
    step_base = reserve_ids(StepRun, count=count + 1)
    with transaction.atomic():
        added = clone_runs(
            run_id=templates["sleep_run"],
            step_id=templates["sleep_step"],
            tag=tag,
            first=1,
            last=count,
            step_base=step_base,
            step_overrides={"due_at": "%(due)s::timestamptz - g * interval '1 millisecond'"},
            params={"due": due_before},
        )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {connection.ops.quote_name(StepRun._meta.db_table)}")
    return added


def remove_runs(*, tag: str) -> int:
    """Delete the runs cloned under `tag`, with everything that belongs to them."""
    deleted, _ = WorkflowRun.objects.filter(correlation_id=tag).delete()
    return deleted
