"""The test kit for workflow authors: the real engine, driven in-process by a moving clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from approvals.human_tasks import ConflictOfDuty, TaskConflict
from approvals.testing import TaskError
from workflows import registry
from workflows.activity import NonRetryableError
from workflows.engine import work
from workflows.states import RunState, StepState
from workflows.testing import DEFAULT_START, WorkflowEnvironment

pytestmark = pytest.mark.django_db


class Declined(NonRetryableError):
    pass


class TestStartAndSettle:
    def test_a_run_goes_as_far_as_it_can_on_the_real_engine(self, workflow_env, effects):
        run = workflow_env.start("test_linear", {})

        assert run.state == RunState.SUCCEEDED
        workflow_env.assert_path(run, "first", "second", "third")
        assert effects(run) == {"test.first": 1, "test.second": 1, "test.third": 1}

    def test_the_clock_starts_on_a_monday_morning_and_stamps_the_timeline(self, workflow_env):
        run = workflow_env.start("test_linear", {})

        assert {at for at, _, _ in workflow_env.timeline(run)} == {DEFAULT_START}
        assert run.created_at <= datetime.now(UTC)  # created_at is the row's own

    def test_no_message_goes_to_a_broker(self, workflow_env, monkeypatch):
        sent: list[int] = []
        monkeypatch.setattr(
            work.current_app.amqp, "send_task_message", lambda *a, **k: sent.append(a)
        )

        workflow_env.start("test_linear", {})

        assert sent == []

    def test_a_failed_assertion_on_the_path_shows_the_path_taken(self, workflow_env):
        run = workflow_env.start("test_linear", {})

        with pytest.raises(AssertionError, match=r"took \['first', 'second', 'third'\]"):
            workflow_env.assert_path(run, "first", "third")


class TestTheClock:
    def test_a_timer_fires_when_the_clock_reaches_it_and_not_before(self, workflow_env):
        run = workflow_env.start("test_sleeping", {})

        assert run.state == RunState.WAITING
        workflow_env.advance(seconds=0.5)
        assert workflow_env.refresh(run).state == RunState.WAITING

        workflow_env.advance(seconds=0.5)
        workflow_env.assert_state(run, RunState.SUCCEEDED)
        workflow_env.assert_path(run, "nap", "wake_up")

    def test_a_retry_waits_for_its_backoff_then_succeeds(self, workflow_env):
        run = workflow_env.start("test_linear", {"simulate": {"second": "flaky"}})

        assert run.steps.get(node="second").state == StepState.RETRY_WAIT
        workflow_env.advance(seconds=0.1)  # the first retry, which fails again
        workflow_env.advance(seconds=1.1)  # the second, 0.2 s later: it succeeds

        workflow_env.assert_state(run, RunState.SUCCEEDED)
        assert run.steps.get(node="second").attempt == 3

    def test_a_wait_times_out_with_the_clock(self, workflow_env):
        run = workflow_env.start("test_signalled", {})

        workflow_env.advance(minutes=5)

        workflow_env.assert_path(run, "prepare", "await_go", "timed_out")

    def test_skipping_ahead_goes_to_the_next_due_time_in_the_database(self, workflow_env):
        run = workflow_env.start("test_linear", {"simulate": {"second": "flaky"}})

        first_retry = workflow_env.skip_ahead()
        second_retry = workflow_env.skip_ahead()

        assert first_retry == DEFAULT_START + timedelta(seconds=0.1)
        assert second_retry == first_retry + timedelta(seconds=0.2)
        workflow_env.assert_state(run, RunState.SUCCEEDED)
        assert workflow_env.skip_ahead() is None

    def test_a_jump_past_several_due_times_fires_each_at_its_own_time(self, workflow_env):
        env = workflow_env.travel_to(datetime(2026, 1, 9, 16, tzinfo=UTC))  # a Friday
        run = env.start("test_business_timers", {})  # 2 working hours, then 1 working day

        env.advance(days=7)

        finished = dict(run.steps.values_list("node", "finished_at"))
        assert finished["nap"] == datetime(2026, 1, 12, 10, tzinfo=UTC)
        assert finished["await_go"] == datetime(2026, 1, 13, 10, tzinfo=UTC)
        assert env.now == datetime(2026, 1, 16, 16, tzinfo=UTC)

    def test_the_clock_is_set_before_anything_starts(self, workflow_env):
        friday = datetime(2026, 1, 9, 16, tzinfo=UTC)

        run = workflow_env.travel_to(friday).start("test_linear", {})

        assert run.started_at == friday

    def test_the_clock_never_goes_back_once_runs_exist(self, workflow_env):
        workflow_env.start("test_linear", {})

        with pytest.raises(ValueError, match="only moves forward"):
            workflow_env.travel_to(DEFAULT_START - timedelta(days=1))
        with pytest.raises(ValueError, match="only moves forward"):
            workflow_env.advance(hours=-1)

    def test_a_naive_time_is_refused(self, workflow_env):
        with pytest.raises(ValueError, match="aware"):
            workflow_env.travel_to(datetime(2026, 1, 9, 16))


class TestSignals:
    def test_a_signal_moves_the_run_on(self, workflow_env):
        run = workflow_env.start("test_signalled", {})

        run = workflow_env.signal(run, "go", {"by": "a test"})

        assert run.state == RunState.SUCCEEDED
        workflow_env.assert_path(run, "prepare", "await_go", "went")
        assert run.results["await_go"]["payload"] == {"by": "a test"}

    def test_a_repeated_signal_id_is_taken_once(self, workflow_env, effects):
        run = workflow_env.start("test_signalled", {})

        workflow_env.signal(run, "go", signal_id="once")
        workflow_env.signal(run, "go", signal_id="once")

        assert effects(run)["test.went"] == 1


class TestReplacingActivities:
    def test_a_replaced_activity_runs_instead_and_its_calls_are_recorded(
        self, workflow_env, effects
    ):
        second = workflow_env.replace_activity("test_linear", "second", lambda context: {"ok": 1})

        run = workflow_env.start("test_linear", {})

        assert run.results["second"] == {"ok": 1}
        assert second.count == 1
        assert second.runs[0].idempotency_key.endswith(":second")
        assert "test.second" not in effects(run)

    def test_a_failing_replacement_undoes_the_completed_steps_in_reverse(self, workflow_env):
        def decline(context):
            raise Declined("card declined")

        third = workflow_env.replace_activity("test_linear", "third", decline)

        run = workflow_env.start("test_linear", {})

        workflow_env.assert_state(run, RunState.COMPENSATED)
        assert workflow_env.undone(run) == ["second", "first"]
        assert (third.count, third.undos) == (1, [])

    def test_a_spy_records_the_real_activity_and_its_undo(self, workflow_env, effects):
        first = workflow_env.spy("test_linear", "first")

        run = workflow_env.start("test_linear", {"simulate": {"third": "fail"}})
        while workflow_env.skip_ahead():  # through every retry of the third step
            pass

        assert (first.count, len(first.undos)) == (1, 1)
        assert effects(run)["test.undo_first"] == 1

    def test_the_registered_definition_comes_back_when_the_test_ends(self):
        registered = registry.get("test_linear")
        env = WorkflowEnvironment()

        env.replace_activity("test_linear", "first", lambda context: None)
        replaced = registry.get("test_linear")
        env.close()

        assert replaced is not registered
        assert registry.get("test_linear") is registered


class TestHumanTasks:
    def test_approvals_are_decided_as_a_given_user(self, workflow_env, alice, bob, effects):
        run = workflow_env.start("test_two_of_three", {})

        workflow_env.approve(run, "board", as_user=alice)
        run = workflow_env.approve(run, "board", as_user=bob, comment="fine")

        assert run.state == RunState.SUCCEEDED
        assert effects(run) == {"test.after": 1}
        decided = run.human_tasks.exclude(decided_by=None).values_list("decided_by__username")
        assert sorted(name for (name,) in decided) == ["alice", "bob"]

    def test_a_decision_the_services_refuse_is_refused_here_too(self, workflow_env, bob):
        run = workflow_env.start("test_two_of_three", {})
        workflow_env.approve(run, "board", as_user=bob)

        with pytest.raises(TaskConflict, match="already decided another share"):
            workflow_env.approve(run, "board", as_user=bob)  # the finance group's share

    def test_a_barred_decision_raises_the_kits_task_error_with_the_inboxs_message(
        self, workflow_env, client, alice
    ):
        run = workflow_env.start("test_two_of_three_people", {}, started_by=alice)
        task = workflow_env.task(run, "board", for_user=alice)
        client.force_login(alice)
        inbox = client.post(
            reverse("approvals:approve", args=[task.pk]), headers={"HX-Request": "true"}
        )

        with pytest.raises(TaskError) as refused:
            workflow_env.approve(run, "board", as_user=alice)

        assert isinstance(refused.value, ConflictOfDuty)
        assert str(refused.value) == (
            "You requested this test two of three people, so you cannot decide it."
        )
        assert inbox.status_code == 403
        assert str(refused.value) in inbox.text

    def test_a_rejection_needs_a_reason_and_ends_the_wait(self, workflow_env, alice, bob):
        run = workflow_env.start("test_two_of_three", {})

        workflow_env.reject(run, "board", as_user=alice, reason="too dear")
        run = workflow_env.reject(run, "board", as_user=bob, reason="agreed")

        workflow_env.assert_state(run, RunState.SUCCEEDED)
        workflow_env.assert_path(run, "board")

    def test_asking_for_a_task_that_is_not_open_says_what_is(self, workflow_env, alice):
        run = workflow_env.start("test_linear", {})

        with pytest.raises(AssertionError, match=r"no live human task on 'board'.*succeeded"):
            workflow_env.task(run, "board")

    def test_a_deadline_fires_through_the_sweep_and_undoes_the_run(
        self, workflow_env, people, effects
    ):
        run = workflow_env.start("test_deadline_fails", {})

        workflow_env.advance(hours=2)

        workflow_env.assert_state(run, RunState.COMPENSATED)
        assert effects(run) == {"test.prepare": 1, "test.undo_prepare": 1}


class TestCancel:
    def test_cancelling_undoes_what_was_done(self, workflow_env):
        run = workflow_env.start("test_signalled", {})

        run = workflow_env.cancel(run)

        assert run.state == RunState.CANCELLED
        assert workflow_env.undone(run) == ["prepare"]
