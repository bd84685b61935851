"""A run's results are read from its step rows, by node, only when asked."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from workflows.models import StepRun
from workflows.results import RunResults
from workflows.states import RunState

pytestmark = pytest.mark.django_db


class TestRunResults:
    def test_a_finished_step_result_is_found_by_its_node(self, start, drive, order_input):
        run = drive(start("order", order_input()))

        stored = run.steps.get(node="reserve_inventory").result
        assert stored is not None
        assert run.results["reserve_inventory"] == stored
        assert "reserve_inventory" in run.results

    def test_a_node_that_has_not_finished_has_no_result(self, start, order_input):
        run = start("order", order_input())

        assert "validate" not in run.results
        with pytest.raises(KeyError):
            run.results["validate"]
        assert run.results.get("validate", "none") == "none"

    def test_iterating_gives_every_finished_node_in_the_order_it_ran(
        self, start, drive, order_input
    ):
        run = drive(start("order", order_input()))

        assert list(run.results) == [
            "validate",
            "reserve_inventory",
            "charge_payment",
            "ship",
            "notify_customer",
        ]
        assert len(run.results) == 5

    def test_an_undone_step_keeps_its_result(self, start, drive, order_input):
        run = drive(start("order", order_input(simulate={"payment": "decline"})))
        reserve = run.steps.get(node="reserve_inventory", kind="forward")
        assert (run.state, reserve.state) == (RunState.COMPENSATED, "compensated")

        assert run.results["reserve_inventory"] == reserve.result

    def test_one_lookup_is_one_query_and_is_remembered(self, start, drive, order_input):
        run = drive(start("order", order_input()))
        results = RunResults(run.pk, steps=StepRun.objects)

        with CaptureQueriesContext(connection) as queries:
            assert results["ship"] == results["ship"]
            assert "missing" not in results
            assert "missing" not in results

        assert len(queries) == 2
