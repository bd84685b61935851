"""What operators do to runs from the console: each action changes the run, is audited
naming the operator, and is refused with a reason for others and for the wrong state."""

from __future__ import annotations

import uuid

import pytest
from auditlog.models import LogEntry

from approvals.act import Act
from approvals.console import services as console_services
from tests.workflows.test_engine import sweep_until_quiet
from workflows.models import WorkflowRun
from workflows.states import RunState, StepState

pytestmark = pytest.mark.django_db


def by(user, *, reason: str = "") -> Act:
    """Who acts, as the console's pages build it."""
    return Act(user=user, channel=console_services.CHANNEL, reason=reason)


@pytest.fixture
def dead_letter(start, drive, order_input) -> WorkflowRun:
    failing = order_input(simulate={"shipping": "fail", "refund": "outage"})
    run = sweep_until_quiet(drive(start("order", failing)), drive)
    assert run.state == RunState.DEAD_LETTERED
    return run


@pytest.fixture
def failed_run(start, drive) -> WorkflowRun:
    run = drive(start("test_linear", {"simulate": {"first": "outage"}}))
    run = sweep_until_quiet(run, drive)
    assert run.state == RunState.FAILED
    return run


def entries(run: WorkflowRun) -> list[LogEntry]:
    return list(LogEntry.objects.get_for_object(run).order_by("id"))


class TestRetryDeadLetter:
    def test_reopens_the_run_and_audits_the_operator_and_reason(
        self, dead_letter, console_operator
    ):
        done = console_services.retry_dead_letter(
            run_id=dead_letter.pk,
            act=by(console_operator, reason="refund service is back"),
        )

        assert done.changed
        assert done.run.state == RunState.COMPENSATING
        [entry] = entries(dead_letter)
        assert entry.actor == console_operator
        assert entry.additional_data["event"] == "run_retried"
        assert entry.additional_data["channel"] == "console"
        assert entry.additional_data["comment"] == "refund service is back"
        assert entry.changes == {"state": ["dead_lettered", "compensating"]}

    def test_an_outsider_is_refused_saying_who_may(self, dead_letter, eve):
        with pytest.raises(console_services.NotOperator, match="Only operators may retry a"):
            console_services.retry_dead_letter(run_id=dead_letter.pk, act=by(eve))

        dead_letter.refresh_from_db()
        assert dead_letter.state == RunState.DEAD_LETTERED
        assert entries(dead_letter) == []

    def test_staff_who_may_only_view_runs_are_refused(self, dead_letter, viewer):
        with pytest.raises(console_services.NotOperator) as refused:
            console_services.retry_dead_letter(run_id=dead_letter.pk, act=by(viewer))

        assert refused.value.status == 403
        assert "permission to operate workflow runs" in str(refused.value)

    def test_a_run_that_is_not_dead_lettered_is_refused_with_its_state(
        self, start, order_input, console_operator
    ):
        run = start("order", order_input())

        with pytest.raises(console_services.NotPossibleNow) as refused:
            console_services.retry_dead_letter(run_id=run.pk, act=by(console_operator))

        assert refused.value.status == 409
        assert "Only a dead-lettered run can be retried or resumed; this one is running" in str(
            refused.value
        )
        assert entries(run) == []


class TestResumeDeadLetter:
    def test_moves_past_the_failed_undo_and_audits_it(self, dead_letter, console_operator, drive):
        done = console_services.resume_dead_letter(
            run_id=dead_letter.pk, act=by(console_operator, reason="refunded by hand")
        )

        run = drive(done.run)
        assert run.state == RunState.COMPENSATED
        [entry] = entries(run)
        assert (entry.actor, entry.additional_data["event"]) == (
            console_operator,
            "run_resumed_past_failure",
        )


class TestRetryFailedRun:
    def test_sends_the_run_back_to_its_failed_step_and_audits_it(
        self, failed_run, console_operator, drive
    ):
        console_services.retry_failed_run(run_id=failed_run.pk, act=by(console_operator))

        run = drive(failed_run)
        assert run.state == RunState.SUCCEEDED
        [entry] = entries(run)
        assert entry.changes == {"state": ["failed", "running"]}
        assert entry.actor == console_operator

    def test_a_compensated_run_is_refused_saying_why(self, start, drive, console_operator):
        run = drive(start("test_linear", {"simulate": {"second": "fail"}}))
        run = sweep_until_quiet(run, drive)

        with pytest.raises(console_services.NotPossibleNow, match="this one is compensated"):
            console_services.retry_failed_run(run_id=run.pk, act=by(console_operator))


class TestPauseAndResume:
    def test_pause_then_resume_are_each_audited(self, start, console_operator):
        run = start("test_linear", {})

        console_services.pause_run(run_id=run.pk, act=by(console_operator))
        console_services.resume_run(run_id=run.pk, act=by(console_operator))

        run.refresh_from_db()
        assert run.state == RunState.RUNNING
        assert [entry.additional_data["event"] for entry in entries(run)] == [
            "run_paused",
            "run_resumed",
        ]

    def test_a_second_pause_is_a_no_op_audited_once(self, start, console_operator):
        run = start("test_linear", {})
        console_services.pause_run(run_id=run.pk, act=by(console_operator))

        again = console_services.pause_run(run_id=run.pk, act=by(console_operator))

        assert not again.changed
        assert len(entries(run)) == 1

    def test_resuming_a_run_that_is_not_paused_is_refused(self, start, console_operator):
        run = start("test_linear", {})

        with pytest.raises(console_services.NotPossibleNow, match="Only a paused run"):
            console_services.resume_run(run_id=run.pk, act=by(console_operator))

    def test_an_outsider_cannot_pause(self, start, eve):
        run = start("test_linear", {})

        with pytest.raises(console_services.NotOperator, match="Only operators may pause a run"):
            console_services.pause_run(run_id=run.pk, act=by(eve))


class TestCancel:
    def test_cancels_and_audits(self, start, drive, console_operator):
        run = start("test_linear", {})

        done = console_services.cancel_run(run_id=run.pk, act=by(console_operator, reason="dup"))

        assert done.run.state in (RunState.CANCELLING, RunState.CANCELLED)
        [entry] = entries(run)
        assert (entry.actor, entry.additional_data["comment"]) == (console_operator, "dup")

    def test_a_finished_run_is_refused(self, start, drive, console_operator):
        run = drive(start("test_linear", {}))

        with pytest.raises(console_services.NotPossibleNow, match="succeeded"):
            console_services.cancel_run(run_id=run.pk, act=by(console_operator))


class TestSkipStep:
    def test_gives_the_step_the_result_and_audits_node_and_result(
        self, failed_run, console_operator, drive
    ):
        console_services.skip_step(
            run_id=failed_run.pk,
            node="first",
            result='{"effect_id": 0, "by": "hand"}',
            act=by(console_operator, reason="done in the back office"),
        )

        run = drive(failed_run)
        assert run.state == RunState.SUCCEEDED
        assert run.steps.get(node="first").state == StepState.SKIPPED
        [entry] = entries(run)
        assert entry.actor == console_operator
        assert entry.additional_data["event"] == "step_skipped"
        assert entry.changes["step"] == "first"
        assert entry.changes["result"] == {"effect_id": 0, "by": "hand"}

    @pytest.mark.parametrize(
        ("text", "says"),
        [
            ("", "Give the step's result as JSON"),
            ("{'a': 1}", "The result is not JSON: Expecting property name"),
            ("NaN", "NaN is not a JSON number"),
            ('"\\u0000"', "cannot be stored: text must not contain NUL"),
            ("[" + "1," * 40000 + "1]", "at most 64 KiB"),
        ],
    )
    def test_a_result_that_is_not_storable_json_is_refused_saying_why(
        self, failed_run, console_operator, text, says
    ):
        with pytest.raises(console_services.InvalidInput, match=says) as refused:
            console_services.skip_step(
                run_id=failed_run.pk,
                node="first",
                result=text,
                act=by(console_operator),
            )

        assert refused.value.status == 422
        failed_run.refresh_from_db()
        assert failed_run.state == RunState.FAILED
        assert entries(failed_run) == []

    def test_a_finished_step_is_refused_saying_its_state(self, start, drive, console_operator):
        run = drive(start("test_linear", {"simulate": {"second": "fail"}}))

        with pytest.raises(console_services.NotPossibleNow, match="first is succeeded"):
            console_services.skip_step(
                run_id=run.pk,
                node="first",
                result="null",
                act=by(console_operator),
            )

    def test_an_outsider_is_refused(self, failed_run, eve):
        with pytest.raises(console_services.NotOperator, match="Only operators may skip a step"):
            console_services.skip_step(
                run_id=failed_run.pk,
                node="first",
                result="1",
                act=by(eve),
            )


class TestActionsFor:
    @pytest.mark.parametrize(
        "make",
        ["running", "paused", "dead_letter", "failed"],
    )
    def test_every_action_offered_is_one_the_engine_takes(
        self, make, start, drive, order_input, console_operator
    ):
        def fresh() -> WorkflowRun:
            if make == "dead_letter":
                failing = order_input(simulate={"shipping": "fail", "refund": "outage"})
                return sweep_until_quiet(drive(start("order", failing)), drive)
            if make == "failed":
                failing = {"simulate": {"first": "outage"}}
                return sweep_until_quiet(drive(start("test_linear", failing)), drive)
            run = start("test_linear", {})
            if make == "paused":
                console_services.pause_run(run_id=run.pk, act=by(console_operator))
                run.refresh_from_db()
            return run

        run = fresh()
        offered = console_services.actions_for(run)

        assert offered
        for action in offered:
            run = fresh() if run.state not in action.offered_in else run
            done = console_services.USE_CASES[action.name](run_id=run.pk, act=by(console_operator))
            assert done.changed, action.name
            run = WorkflowRun.objects.get(pk=run.pk)

    def test_nothing_is_offered_for_a_run_that_succeeded(self, start, drive):
        run = drive(start("test_linear", {}))

        assert console_services.actions_for(run) == []
        assert console_services.skippable_steps(run, list(run.steps.all())) == []


class TestRetryDeadLetters:
    def test_retries_each_and_reports_the_one_that_does_not_fit(
        self, dead_letter, start, drive, order_input, console_operator
    ):
        other = sweep_until_quiet(
            drive(start("order", order_input(simulate={"shipping": "fail", "refund": "outage"}))),
            drive,
        )
        running = start("test_linear", {})

        outcomes = console_services.retry_dead_letters(
            run_ids=[dead_letter.pk, other.pk, running.pk],
            act=by(console_operator),
        )

        assert outcomes[dead_letter.pk].run.state == RunState.COMPENSATING
        assert outcomes[other.pk].run.state == RunState.COMPENSATING
        assert isinstance(outcomes[running.pk], console_services.NotPossibleNow)
        assert [len(entries(run)) for run in (dead_letter, other, running)] == [1, 1, 0]

    def test_an_outsider_is_refused_before_anything_changes(self, dead_letter, eve):
        with pytest.raises(console_services.NotOperator):
            console_services.retry_dead_letters(run_ids=[dead_letter.pk], act=by(eve))

        dead_letter.refresh_from_db()
        assert dead_letter.state == RunState.DEAD_LETTERED

    def test_more_than_a_bulk_at_once_is_refused(self, console_operator):
        too_many = [uuid.uuid4() for _ in range(console_services.BULK_MAX + 1)]

        with pytest.raises(console_services.InvalidInput, match="at most 100 runs"):
            console_services.retry_dead_letters(run_ids=too_many, act=by(console_operator))
