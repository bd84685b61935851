"""Loops: a GoBack starts another round of the nodes it goes back to, at most max_rounds.

Driven in this process against the real database, as tests/workflows/test_engine.py
does; tests/e2e/test_worker_processes.py kills a real worker in the second round.
The test definitions (tests/workflows/definitions.py) draft once per round until
`input["rounds"]` drafts are done, going back at most twice (max_rounds=3).
"""

from __future__ import annotations

import pytest

from workflows import engine
from workflows.examples.models import ServiceEffect
from workflows.models import StepEvent, StepRun
from workflows.states import EventKind, RunState, StepKind, StepState

pytestmark = pytest.mark.django_db


def forward(run, node: str) -> list[StepRun]:
    return list(run.steps.filter(node=node, kind=StepKind.FORWARD).order_by("round"))


def undos(run) -> list[tuple[str, int]]:
    compensations = run.steps.filter(kind=StepKind.COMPENSATION).order_by("finished_at", "id")
    return [(step.node, step.round) for step in compensations]


class TestGoingBack:
    def test_a_second_round_makes_new_steps_one_round_up(self, start, drive, effects):
        run = start("test_looping", {"rounds": 2})

        run = drive(run)

        assert run.state == RunState.SUCCEEDED
        assert [(s.round, s.state) for s in forward(run, "draft")] == [
            (0, StepState.SUCCEEDED),
            (1, StepState.SUCCEEDED),
        ]
        assert [s.round for s in forward(run, "check")] == [0, 1]
        assert [s.round for s in forward(run, "send_back")] == [0]
        assert [s.round for s in forward(run, "publish")] == [1]
        assert effects(run) == {"test.prepare": 1, "test.draft": 2, "test.publish": 1}

    def test_each_round_has_its_own_idempotency_key_and_round_zero_keeps_the_old_one(
        self, start, drive
    ):
        run = drive(start("test_looping", {"rounds": 2}))

        first, second = forward(run, "draft")

        assert first.idempotency_key == f"{run.pk}:draft"
        assert second.idempotency_key == f"{run.pk}:draft@1"
        keys = ServiceEffect.objects.filter(run_id=run.pk, action="draft")
        assert sorted(keys.values_list("idempotency_key", flat=True)) == [
            f"{run.pk}:draft",
            f"{run.pk}:draft@1",
        ]

    def test_the_first_rounds_rows_are_left_as_they_were(self, start, drive):
        run = start("test_looping", {"rounds": 2})
        drive(run, max_steps=2)  # prepare, then the first draft (which goes back)
        before = list(run.steps.filter(round=0).order_by("id").values())
        assert run.steps.filter(node="draft", round=1, state=StepState.SCHEDULED).exists()

        drive(run)

        assert list(run.steps.filter(round=0).order_by("id").values()) == before

    def test_activities_and_conditions_see_the_latest_rounds_result(self, start, drive):
        run = drive(start("test_looping", {"rounds": 2}))

        assert run.results["draft"]["round"] == 1
        assert run.results["send_back"] == {"went_back_to": "draft", "rounds_run": 1}
        assert dict(run.results)["draft"]["round"] == 1
        assert run.results.of_round("draft", 0)["round"] == 0

    def test_the_timeline_says_where_the_run_went_back_to(self, start, drive):
        run = drive(start("test_looping", {"rounds": 2}))

        went_back = run.events.get(node="send_back", kind=EventKind.COMPLETED)

        assert went_back.detail == {"went_back_to": "draft"}
        assert run.events.filter(node="draft", kind=EventKind.COMPLETED).count() == 2

    def test_after_max_rounds_the_run_takes_the_otherwise_exit(self, start, drive, effects):
        run = start("test_looping", {"rounds": 10})

        run = drive(run)

        assert run.state == RunState.SUCCEEDED
        assert [s.round for s in forward(run, "draft")] == [0, 1, 2]
        assert [s.result for s in forward(run, "send_back")] == [
            {"went_back_to": "draft", "rounds_run": 1},
            {"went_back_to": "draft", "rounds_run": 2},
            {"went_back_to": None, "rounds_run": 3},
        ]
        assert effects(run) == {"test.prepare": 1, "test.draft": 3, "test.give_up": 1}

    def test_after_max_rounds_with_no_otherwise_the_run_fails_and_is_undone(
        self, start, drive, effects
    ):
        run = start("test_looping_fails", {"rounds": 10})

        run = drive(run)

        assert run.state == RunState.COMPENSATED
        assert run.error["node"] == "send_back"
        assert run.error["type"] == "RoundsExhausted"
        assert "2 times" in run.error["message"]
        assert undos(run) == [("draft", 2), ("draft", 1), ("draft", 0), ("prepare", 0)]
        assert effects(run)["test.undo_draft"] == 3

    def test_a_definition_without_loops_keeps_every_step_in_round_zero(self, start, drive):
        run = drive(start("test_linear", {}))

        assert set(run.steps.values_list("round", flat=True)) == {0}
        assert run.steps.get(node="first").idempotency_key == f"{run.pk}:first"


class TestCompensationAfterASecondRound:
    def test_each_rounds_effect_is_undone_once_in_reverse_completion_order(
        self, start, drive, effects
    ):
        run = start("test_looping", {"rounds": 2, "simulate": {"publish": "decline"}})

        run = drive(run)

        assert run.state == RunState.COMPENSATED
        assert undos(run) == [("draft", 1), ("draft", 0), ("prepare", 0)]
        assert effects(run) == {
            "test.prepare": 1,
            "test.draft": 2,
            "test.undo_draft": 2,
            "test.undo_prepare": 1,
        }
        assert [s.state for s in forward(run, "draft")] == [StepState.COMPENSATED] * 2

    def test_each_undo_is_handed_the_key_and_result_of_its_own_round(self, start, drive):
        run = drive(start("test_looping", {"rounds": 2, "simulate": {"publish": "decline"}}))

        drafts = {
            effect.idempotency_key: effect.pk
            for effect in ServiceEffect.objects.filter(run_id=run.pk, action="draft")
        }
        undone = ServiceEffect.objects.filter(run_id=run.pk, action="undo_draft")

        assert sorted(effect.data["undoes"] for effect in undone) == sorted(drafts.values())
        assert sorted(effect.idempotency_key for effect in undone) == [
            f"{run.pk}:draft:compensate",
            f"{run.pk}:draft@1:compensate",
        ]


class TestRedeliveryAcrossRounds:
    def test_a_redelivered_message_for_a_first_round_step_does_nothing(self, start, drive, effects):
        run = drive(start("test_looping", {"rounds": 2}))
        first_draft = forward(run, "draft")[0]
        events = StepEvent.objects.filter(run=run).count()

        engine.execute_step(step_id=first_draft.pk)

        first_draft.refresh_from_db()
        assert first_draft.attempt == 1
        assert first_draft.state == StepState.SUCCEEDED
        assert StepEvent.objects.filter(run=run).count() == events
        assert effects(run) == {"test.prepare": 1, "test.draft": 2, "test.publish": 1}
        assert ServiceEffect.objects.get(idempotency_key=f"{run.pk}:draft").requests_seen == 1

    def test_a_redelivered_first_round_message_mid_second_round_leaves_the_round_alone(
        self, start, drive, effects
    ):
        run = start("test_looping", {"rounds": 2})
        drive(run, max_steps=2)
        first_draft, second_draft = forward(run, "draft")

        engine.execute_step(step_id=first_draft.pk)

        second_draft.refresh_from_db()
        assert second_draft.state == StepState.SCHEDULED
        assert effects(run) == {"test.prepare": 1, "test.draft": 1}
        assert drive(run).state == RunState.SUCCEEDED
