"""A unit of work's INSERT writes the rows bulk_create would write, in one statement."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.forms.models import model_to_dict
from django.utils import timezone

from workflows.engine import batch
from workflows.models import StepEvent, StepRun, WorkflowRun
from workflows.states import EventKind, StepState

pytestmark = pytest.mark.django_db

ODD_TEXT = "a \\ \" ' {,} NULL"


def _runs(count: int) -> list[WorkflowRun]:
    runs = [
        WorkflowRun(workflow_type="test_sleeping", workflow_version=1, input={"n": n})
        for n in range(count)
    ]
    return WorkflowRun.objects.bulk_create(runs)


def _steps(runs: list[WorkflowRun], node: str, now=None) -> list[StepRun]:
    now = now or timezone.now()
    return [
        StepRun(
            run=run,
            node=node,
            state=StepState.SCHEDULED if n % 3 else StepState.WAITING,
            scheduled_at=now,
            due_at=now + timedelta(seconds=n % 2),
            lease=timedelta(days=1, seconds=30, microseconds=5),
            result={"n": [n, "x"]} if n % 2 else None,
            lease_holder=ODD_TEXT if n == 1 else "",
            may_have_applied=n % 2 == 0,
        )
        for n, run in enumerate(runs)
    ]


def _written(node: str) -> list[dict]:
    rows = StepRun.objects.filter(node=node).order_by("run__input__n")
    return [
        {k: v for k, v in model_to_dict(row).items() if k not in ("id", "node")} for row in rows
    ]


def _insert(rows: list[StepRun]) -> None:
    with transaction.atomic():
        batch.execute([batch.insert(StepRun, rows, returning_ids=True)])


class TestInsert:
    def test_a_batch_writes_what_bulk_create_writes(self):
        runs, now = _runs(6), timezone.now()
        StepRun.objects.bulk_create(_steps(runs, "by_django", now))

        _insert(_steps(runs, "by_batch", now))

        assert _written("by_batch") == _written("by_django")

    def test_each_row_learns_its_id_in_the_order_given(self):
        steps = _steps(_runs(5), "ordered")

        _insert(steps)

        assert [StepRun.objects.get(pk=step.pk).run_id for step in steps] == [
            step.run_id for step in steps
        ]
        assert all(not step._state.adding and step.changed_fields() == [] for step in steps)

    def test_rows_alike_in_every_column_are_each_written(self):
        run = _runs(1)[0]
        now = timezone.now()
        events = [StepEvent(run=run, kind=EventKind.WAITING, at=now, detail={}) for _ in range(3)]

        with transaction.atomic():
            batch.execute([batch.insert(StepEvent, events, returning_ids=False)])

        assert StepEvent.objects.filter(run=run, kind=EventKind.WAITING).count() == 3

    def test_a_column_the_same_for_every_row_is_sent_once(self):
        steps = _steps(_runs(4), "sent_once")

        statement = batch.insert(StepRun, steps, returning_ids=True)

        assert '"node"' not in statement.sql.split("AS ")[-1]
        assert "sent_once" in statement.params
