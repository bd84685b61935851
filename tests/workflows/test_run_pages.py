"""Each page of the runs' table keeps room for a run's next version (migration 0024):
a run woken, started or finished is written again on its own page, not on whichever
cold page of years of history the free space map offers (the sweep among 100,000 runs
asleep read a page of runs from outside shared_buffers for each run it woke)."""

from __future__ import annotations

import pytest
from django.db import connection

from workflows.models import WorkflowRun
from workflows.states import RunState

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL storage setting"),
]

TABLE = WorkflowRun._meta.db_table


def block_of(run: WorkflowRun) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (ctid::text::point)[0]::bigint FROM {TABLE} WHERE id = %s",  # nosec B608
            [run.pk],
        )
        return cursor.fetchone()[0]


def asleep(count: int) -> list[WorkflowRun]:
    """Runs asleep, each row alike (~500 bytes), written one after another."""
    return [
        WorkflowRun.objects.create(
            workflow_type="test_sleeping",
            workflow_version=1,
            state=RunState.WAITING,
            input={"note": "x" * 300},
            correlation_id=f"page-{number:04d}",
        )
        for number in range(count)
    ]


def test_the_runs_table_is_filled_to_90_percent():
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE oid = %s::regclass", [TABLE])
        assert cursor.fetchone()[0] == ["fillfactor=90"]


def test_a_run_woken_on_a_page_inserts_found_full_stays_on_that_page():
    runs = asleep(60)  # some four pages' worth
    blocks = [block_of(run) for run in runs]
    # The last run written on a page before the next one had to go elsewhere: inserts
    # found that page full. Packed to 100 %, an update of the same size would not fit.
    last_on_full_pages = [
        run for run, block, after in zip(runs, blocks, blocks[1:], strict=False) if block != after
    ]
    assert last_on_full_pages  # the runs spanned more than one page

    for run in last_on_full_pages:
        WorkflowRun.objects.filter(pk=run.pk).update(state=RunState.RUNNING)  # not HOT

    assert [block_of(run) for run in last_on_full_pages] == [
        block for run, block in zip(runs, blocks, strict=True) if run in last_on_full_pages
    ]
