"""Seed a database with many runs and human tasks in minutes, by cloning rows the real code made.

Each kind of row starts as a template made through the public entry points (a
real `start_workflow`, which opens a real human task; a real approval for the
finished kind), then is copied in bulk: `INSERT INTO t (every column) SELECT
<the template's column, or an override> FROM t, generate_series(...) WHERE <the
template>`. The column lists come from `Model._meta.concrete_fields`; only ids,
the due time and the person vary. Every table with a foreign key to HumanTask
(candidates, inbox entries, whatever a migration adds) is copied the same way,
so a column or a table added by another change is carried along as the real
code wrote it for the template.

What is seeded (`Seed`): `waiting_runs` runs asleep in a Sleep node whose timer is
due far in the future (the sweep must not read them), and `tasks` human tasks:
the reviewer's 1,000 live ones (800 claimed by them, 200 open in their group's
queue) and, beyond those, other people's, 95% completed and the rest live (claimed
by someone else, or open in another group's queue). Every task has its own run and
step. Step events and audit entries (which refer to a task by a generic key, not a
foreign key) are not cloned: no benchmarked query reads them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import connection, models, transaction

from approvals import human_tasks
from approvals.models import HumanTask, InboxEntry
from approvals.states import Channel
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
# Spreads the copies' due times over about 70 days, in an order unlike their ids.
DUE_SHIFT = "mod(g::bigint * 7919, 100000) * interval '1 minute'"
# The tasks make_templates leaves in the database (they count towards the size).
TEMPLATE_TASKS = 5


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


def make_templates(people: dict[str, Any]) -> dict[str, Any]:
    """Make one run of each kind through the engine and the services; return their ids.

    Each kind of seeded task is a copy of a task the real code made in that very
    state, so whatever the code writes beside a task (candidates, inbox entries,
    rows a later migration adds) is there to be copied too.
    """
    other = User.objects.get(pk=people["others"][0])
    sleeper, _ = engine.start_workflow(workflow_type=definitions.SLEEP, input={})
    templates: dict[str, Any] = {
        "sleep_run": str(sleeper.pk),
        "sleep_step": sleeper.steps.get().pk,
        "other_person": other.pk,
    }
    kinds = {
        "mine": (definitions.APPROVAL_MINE, {"assignee": REVIEWER}),
        "queue": (definitions.APPROVAL_QUEUE, {}),
        "other_claimed": (definitions.APPROVAL_MINE, {"assignee": other.username}),
        "other_open": (definitions.APPROVAL_OTHERS, {}),
        "other_done": (definitions.APPROVAL_MINE, {"assignee": other.username}),
    }
    for kind, (workflow_type, extra) in kinds.items():
        run, _ = engine.start_workflow(
            workflow_type=workflow_type, input={"title": f"Bench {kind} review", **extra}
        )
        task = run.human_tasks.get()
        templates.update(
            {f"{kind}_run": str(run.pk), f"{kind}_step": task.step_id, f"{kind}_task": str(task.pk)}
        )
    human_tasks.approve_human_task(
        task_id=templates["other_done_task"], user=other, channel=Channel.INBOX
    )
    return templates


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


def hanging_off(model: type[models.Model]) -> list[tuple[type[models.Model], str]]:
    """Return every model with a foreign key to `model` (m2m tables too), and that key."""
    found = []
    for field in model._meta.get_fields(include_hidden=True):
        if (field.one_to_many or field.one_to_one) and field.auto_created and not field.concrete:
            found.append((field.related_model, field.field.name))
    return list(dict.fromkeys(found))


def _carried(
    model: type[models.Model], *, person: str | None, group: str | None = None
) -> dict[str, str | None]:
    """Overrides for the columns that carry the template's person, group or due time.

    A user column holding the template task's person becomes `person`; a group
    column holding its candidate group becomes `group`; a date column holding its
    due time moves with the copy's due time. Judged per row in
    SQL, so a column another change adds (say, a sort key copied from due_at)
    follows without this code knowing it.
    """
    overrides: dict[str, str | None] = {}
    quote = connection.ops.quote_name
    for field in model._meta.concrete_fields:
        column = f"t.{quote(field.column)}"
        if person is not None and field.is_relation and field.related_model is User:
            overrides[field.name] = (
                f"CASE WHEN {column} = %(template_person)s THEN {person} ELSE {column} END"
            )
        elif group is not None and field.is_relation and field.related_model is Group:
            overrides[field.name] = (
                f"CASE WHEN {column} = %(template_group)s THEN {group} ELSE {column} END"
            )
        elif isinstance(field, models.DateTimeField):
            overrides[field.name] = (
                f"CASE WHEN {column} = %(template_due)s THEN {column} + {DUE_SHIFT} "
                f"ELSE {column} END"
            )
    return overrides


def _new_key(model: type[models.Model], *, tag: str, link: str) -> dict[str, str | None]:
    """How a copy of a `model` row gets its primary key (`link` is its key to the task)."""
    pk = model._meta.pk
    if pk.name == link:
        return {}
    if isinstance(pk, models.AutoField | models.BigAutoField | models.SmallAutoField):
        return {pk.name: None}
    if isinstance(pk, models.UUIDField):
        table = model._meta.db_table
        return {pk.name: f"md5('{tag}:{table}:' || g || ':' || t.{pk.column})::uuid"}
    raise TypeError(f"cannot make keys for {model.__name__}.{pk.name} ({type(pk).__name__})")


def clone_tasks(
    *,
    templates: dict[str, Any],
    kind: str,
    tag: str,
    first: int,
    last: int,
    step_base: int,
    person: str | None = None,
    group: str | None = None,
    only: str = "",
    params: dict[str, Any] | None = None,
) -> int:
    """Copy the `kind` template's run, step, task and every row that refers to the task.

    Copy g gets a due time of its own (so pages have an order to keep) and, with
    `person` (an SQL expression over g), that person wherever the template had its
    own: assignee, decider, candidate, inbox entry; with `group`, likewise that
    group wherever the template had its candidate group.
    """
    template_task = templates[f"{kind}_task"]
    task = HumanTask.objects.get(pk=template_task)
    task_id = uuid_of(f"task-{tag}")
    common: dict[str, Any] = {
        "first": first,
        "last": last,
        "only": only,
        "params": {
            **(params or {}),
            "template_person": templates["other_person"],
            "template_group": task.candidate_groups.values_list("pk", flat=True).first(),
            "template_due": task.due_at,
        },
    }
    clone_runs(
        run_id=templates[f"{kind}_run"],
        step_id=templates[f"{kind}_step"],
        tag=tag,
        step_base=step_base,
        **common,
    )
    added = clone(
        HumanTask,
        where_field="id",
        where_value=template_task,
        overrides={
            **_carried(HumanTask, person=person, group=group),
            "id": task_id,
            "run": uuid_of(tag),
            "step": f"{step_base}::bigint + g",
            "title": "t.title || ' #' || g",
        },
        **common,
    )
    for model, link in hanging_off(HumanTask):
        clone(
            model,
            where_field=link,
            where_value=template_task,
            overrides={
                **_carried(model, person=person, group=group),
                **_new_key(model, tag=tag, link=link),
                **(_entry_view(tag=tag, person=person) if model is InboxEntry else {}),
                link: task_id,
            },
            **common,
        )
    return added


def _entry_view(*, tag: str, person: str | None) -> dict[str, str | None]:
    """Overrides for what an inbox entry shows of its task (approvals.human_tasks.inbox_entries
    .view_of): the copy's run and title, and `person`'s username where it names the template's
    person, as the copied task does."""
    quote = connection.ops.quote_name
    overrides: dict[str, str | None] = {"run_id": uuid_of(tag), "title": "t.title || ' #' || g"}
    if person is not None:
        users = quote(User._meta.db_table)
        named = f"(SELECT username FROM {users} WHERE id = %(template_person)s)"
        for field in ("assignee", "owner", "substitute_for", "started_by"):
            column = f"t.{quote(field)}"
            overrides[field] = (
                f"CASE WHEN {column} = {named} "
                f"THEN (SELECT username FROM {users} WHERE id = {person}) ELSE {column} END"
            )
    return overrides


def seed(*, size: Seed, log: Any = print) -> dict[str, Any]:
    """Fill an empty, migrated database to `size`; return the people and templates made."""
    people = ensure_people()
    templates = make_templates(people)
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
    with transaction.atomic():
        clone_tasks(
            templates=templates,
            kind="mine",
            tag="mine",
            first=1,
            last=REVIEWER_CLAIMED,
            step_base=base,
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
    others = max(0, size.tasks - REVIEWER_CLAIMED - REVIEWER_QUEUE - TEMPLATE_TASKS)
    person = f"(%(people)s::bigint[])[1 + mod(g / 20, {len(people['others'])})]"
    params = {"people": people["others"]}
    passes = (
        ("other_done", "mod(g, 20) <> 0", person),
        ("other_claimed", "mod(g, 40) = 0", person),
        ("other_open", "mod(g, 40) = 20", None),
    )
    for first, last in _batches(others):
        with transaction.atomic():
            for kind, only, who in passes:
                clone_tasks(
                    templates=templates,
                    kind=kind,
                    tag=kind,
                    first=first,
                    last=last,
                    step_base=base,
                    person=who,
                    only=only,
                    params=params,
                )
        log(f"  other people's tasks: {last:,} of {others:,}")
    # Vacuumed as well as analyzed, as autovacuum would have done by now: a server with
    # autovacuum off (some are) would otherwise leave no page all-visible, and every
    # index-only read of the inbox's counts would visit the table besides its index.
    # VACUUM cannot run in a transaction: seeded inside a caller's (a test's), analyzed.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE" if connection.in_atomic_block else "VACUUM (ANALYZE)")
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
