"""The saga's plan: which completed steps to undo, most recent first."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from workflows.compensation import FinishedStep, plan_compensation, steps_to_undo
from workflows.examples.order import ORDER

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def finished(
    node: str, seconds: int, sequence: int = 0, succeeded: bool = True, uncertain: bool = False
) -> FinishedStep:
    return FinishedStep(
        node=node,
        finished_at=T0 + timedelta(seconds=seconds),
        sequence=sequence,
        succeeded=succeeded,
        uncertain=uncertain,
    )


class TestPlanCompensation:
    def test_undoes_mutating_steps_in_reverse_completion_order(self):
        steps = [
            finished("validate", 0),
            finished("reserve_inventory", 1),
            finished("charge_payment", 2),
            finished("ship", 3),
        ]

        plan = plan_compensation(workflow=ORDER, finished=steps)

        assert plan == ["ship", "charge_payment", "reserve_inventory"]

    def test_skips_read_only_steps_and_those_declared_without_undo(self):
        steps = [finished("validate", 0), finished("notify_customer", 1)]

        assert plan_compensation(workflow=ORDER, finished=steps) == []

    def test_breaks_ties_in_completion_time_by_sequence(self):
        steps = [finished("reserve_inventory", 1, 1), finished("charge_payment", 1, 2)]

        assert plan_compensation(workflow=ORDER, finished=steps) == [
            "charge_payment",
            "reserve_inventory",
        ]

    def test_undoes_a_failed_step_if_any_attempt_timed_out_or_was_cancelled(self):
        steps = [
            finished("reserve_inventory", 1),
            finished("charge_payment", 2, succeeded=False, uncertain=True),
            finished("ship", 3, succeeded=False, uncertain=True),
        ]

        plan = plan_compensation(workflow=ORDER, finished=steps)

        assert plan == ["ship", "charge_payment", "reserve_inventory"]

    def test_leaves_a_clean_failure_alone(self):
        steps = [
            finished("reserve_inventory", 1),
            finished("charge_payment", 2, succeeded=False),
        ]

        assert plan_compensation(workflow=ORDER, finished=steps) == ["reserve_inventory"]


class TestStepsToUndo:
    def test_undoes_each_round_of_a_node_once_latest_first(self):
        steps = [
            finished("reserve_inventory", 1, 1),
            finished("charge_payment", 2, 2),
            replace(finished("charge_payment", 3, 3), round=1),
            replace(finished("charge_payment", 4, 4, succeeded=False), round=2),
        ]

        plan = steps_to_undo(workflow=ORDER, finished=steps)

        assert [(step.node, step.round) for step in plan] == [
            ("charge_payment", 1),
            ("charge_payment", 0),
            ("reserve_inventory", 0),
        ]
