"""Each page of the runs' and the steps' tables keeps room for a row's next version
(migrations 0024 and 0025): a run woken or a step claimed is written again on its own
page, not on whichever cold page of years of history the free space map offers (the
sweep among 100,000 runs asleep read a page of runs from outside shared_buffers for
each run it woke)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection, models
from django.utils import timezone

from workflows.models import StepRun, WorkflowRun
from workflows.states import RunState, StepState

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL storage setting"),
]


def block_of(row: models.Model) -> int:
    table = type(row)._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (ctid::text::point)[0]::bigint FROM {table} WHERE id = %s",  # nosec B608
            [row.pk],
        )
        return cursor.fetchone()[0]


def run_asleep(number: int) -> WorkflowRun:
    """A run asleep, each alike (~500 bytes)."""
    return WorkflowRun.objects.create(
        workflow_type="test_sleeping",
        workflow_version=1,
        state=RunState.WAITING,
        input={"note": "x" * 300},
        correlation_id=f"page-{number:04d}",
    )


def step_scheduled(number: int) -> StepRun:
    """A step scheduled, each alike (~500 bytes), all of one run."""
    run, _ = WorkflowRun.objects.get_or_create(
        correlation_id="steps-page",
        defaults={
            "workflow_type": "test_sleeping",
            "workflow_version": 1,
            "state": RunState.WAITING,
            "input": {},
        },
    )
    return StepRun.objects.create(
        run=run, node=f"node-{number:04d}", scheduled_at=timezone.now(), last_traceback="x" * 300
    )


def woken(run: WorkflowRun) -> None:
    WorkflowRun.objects.filter(pk=run.pk).update(state=RunState.RUNNING)  # not HOT


def claimed(step: StepRun) -> None:
    StepRun.objects.filter(pk=step.pk).update(state=StepState.RUNNING)  # not HOT


# How a row of each table is written, and then changed.
WRITES: dict[str, tuple[Callable[[int], models.Model], Callable[[models.Model], None]]] = {
    "runs": (run_asleep, woken),
    "steps": (step_scheduled, claimed),
}


@pytest.mark.parametrize("model", [WorkflowRun, StepRun], ids=["runs", "steps"])
def test_the_table_is_filled_to_90_percent(model: type[models.Model]):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reloptions FROM pg_class WHERE oid = %s::regclass", [model._meta.db_table]
        )
        assert cursor.fetchone()[0] == ["fillfactor=90"]


@pytest.mark.parametrize("table", WRITES)
def test_a_row_changed_on_a_page_inserts_found_full_stays_on_that_page(table: str):
    write, change = WRITES[table]
    rows = [write(number) for number in range(60)]  # some four pages' worth
    blocks = [block_of(row) for row in rows]
    # The last row written on a page before the next one had to go elsewhere: inserts
    # found that page full. Packed to 100 %, an update of the same size would not fit.
    last_on_full_pages = [
        row for row, block, after in zip(rows, blocks, blocks[1:], strict=False) if block != after
    ]
    assert last_on_full_pages  # the rows spanned more than one page

    for row in last_on_full_pages:
        change(row)

    assert [block_of(row) for row in last_on_full_pages] == [
        block for row, block in zip(rows, blocks, strict=True) if row in last_on_full_pages
    ]
