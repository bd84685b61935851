"""The engine's prepared reads give back what the ORM would, for less."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from workflows.engine import prepared
from workflows.models import StepRun, WorkflowRun

pytestmark = pytest.mark.django_db


def _values(row: StepRun | WorkflowRun) -> dict:
    return {field.attname: getattr(row, field.attname) for field in row._meta.concrete_fields}


class TestStepWithLockedRun:
    def test_builds_the_step_and_its_run_as_the_orm_does(self, start, drive, order_input):
        run = drive(start("order", order_input()))  # results, JSON and datetimes filled in
        step = run.steps.get(node="charge_payment")
        expected = StepRun.objects.select_related("run").get(pk=step.pk)

        with transaction.atomic():
            got = prepared.step_with_locked_run(step.pk)

        assert _values(got) == _values(expected)
        assert _values(got.run) == _values(expected.run)
        assert got.changed_fields() == []
        assert got.run.changed_fields() == []
        assert not got._state.adding

    def test_locks_the_run_in_one_statement(self, start, order_input):
        step = start("order", order_input()).steps.get()

        with transaction.atomic(), CaptureQueriesContext(connection) as queries:
            prepared.step_with_locked_run(step.pk)

        [query] = [q["sql"] for q in queries if "SAVEPOINT" not in q["sql"]]
        assert query.startswith("SELECT ")
        assert query.endswith("FOR UPDATE OF run")

    def test_an_unknown_step_is_none(self):
        with transaction.atomic():
            assert prepared.step_with_locked_run(987654321) is None
