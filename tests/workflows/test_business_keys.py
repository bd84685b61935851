"""Signals by business key (workflows.business_keys): the one live run, or a new one."""

from __future__ import annotations

import pytest

from tests.conftest import at_once
from workflows import business_keys, engine
from workflows.business_keys import AmbiguousKey, BusinessKey, InvalidKey, NoLiveRun
from workflows.models import Signal, WorkflowRun
from workflows.states import RunState

QUOTE = {"order_id": "Q-1", "amount": 100}


class TestSignalByKey:
    def test_the_run_with_the_searchable_field_is_signalled(self, workflow_env):
        run = workflow_env.start("test_quoted", QUOTE)
        workflow_env.start("test_quoted", {**QUOTE, "order_id": "Q-2"})

        signalled = workflow_env.signal_by_key("test_quoted", "go", key={"order_id": "Q-1"})

        assert signalled.pk == run.pk
        workflow_env.assert_path(run, "prepare", "await_go", "charge")
        workflow_env.assert_state(run, RunState.SUCCEEDED)

    def test_the_run_with_the_correlation_id_is_signalled(self, workflow_env):
        run = workflow_env.start("test_quoted", QUOTE, correlation_id="shop-7")

        signalled = workflow_env.signal_by_key("test_quoted", "go", correlation_id="shop-7")

        assert signalled.pk == run.pk
        workflow_env.assert_state(run, RunState.SUCCEEDED)

    def test_an_ended_run_with_the_key_is_not_found(self, workflow_env):
        workflow_env.signal(workflow_env.start("test_quoted", QUOTE), "stop")

        with pytest.raises(NoLiveRun, match=r"No live run of 'test_quoted'.*order_id='Q-1'"):
            workflow_env.signal_by_key("test_quoted", "go", key={"order_id": "Q-1"})

    def test_several_live_runs_with_the_key_are_counted_and_none_is_signalled(self, workflow_env):
        runs = [workflow_env.start("test_quoted", QUOTE) for _ in range(3)]

        with pytest.raises(AmbiguousKey, match="3 live runs of 'test_quoted' have order_id='Q-1'"):
            workflow_env.signal_by_key("test_quoted", "go", key={"order_id": "Q-1"})

        assert not Signal.objects.filter(run__in=runs).exists()

    def test_a_field_that_is_not_searchable_is_refused_naming_those_that_are(self, workflow_env):
        with pytest.raises(InvalidKey, match="find its runs by correlation_id, order_id"):
            workflow_env.signal_by_key("test_quoted", "go", key={"amount": 100})

    def test_only_the_runs_among_those_given_are_found(self, workflow_env):
        run = workflow_env.start("test_quoted", QUOTE)

        with pytest.raises(NoLiveRun):
            business_keys.signal_by_key(
                key=BusinessKey("test_quoted", "order_id", "Q-1"),
                name="go",
                among=WorkflowRun.objects.exclude(pk=run.pk),
            )


class TestSignalWithStart:
    def test_a_missing_run_is_started_and_signalled_in_one_go(self, workflow_env):
        run = workflow_env.signal_by_key(
            "test_quoted",
            "go",
            {"note": "as agreed"},
            key={"order_id": "Q-9"},
            signal_id="s-1",
            start_input={"amount": 40},
        )

        assert run.input == {"order_id": "Q-9", "amount": 40, "currency": "EUR"}
        assert run.idempotency_key == "signal-with-start:s-1"
        # The signal waited for the wait that asks for it, as any early signal does.
        workflow_env.assert_path(run, "prepare", "await_go", "charge")
        workflow_env.assert_state(run, RunState.SUCCEEDED)

    def test_a_live_run_with_the_key_is_signalled_and_none_started(self, workflow_env):
        run = workflow_env.start("test_quoted", QUOTE)

        signalled = workflow_env.signal_by_key(
            "test_quoted", "go", key={"order_id": "Q-1"}, signal_id="s-1", start_input=QUOTE
        )

        assert signalled.pk == run.pk
        assert WorkflowRun.objects.count() == 1

    def test_a_retry_after_the_run_ended_starts_nothing_and_is_a_duplicate(self, workflow_env):
        options = {"key": {"order_id": "Q-9"}, "signal_id": "s-1", "start_input": {"amount": 40}}
        run = workflow_env.signal_by_key("test_quoted", "go", **options)
        workflow_env.assert_state(run, RunState.SUCCEEDED)

        keyed = business_keys.signal_by_key(
            key=BusinessKey("test_quoted", "order_id", "Q-9"),
            name="go",
            signal_id="s-1",
            start_input={"amount": 40},
        )

        assert (keyed.run_id, keyed.duplicate, keyed.started) == (run.pk, True, False)
        assert WorkflowRun.objects.count() == 1

    def test_it_needs_a_signal_id(self, workflow_env):
        with pytest.raises(InvalidKey, match="needs the signal's id"):
            workflow_env.signal_by_key(
                "test_quoted", "go", key={"order_id": "Q-9"}, start_input={"amount": 40}
            )

    def test_a_start_input_with_another_key_value_is_refused(self, workflow_env):
        with pytest.raises(InvalidKey, match="order_id='Q-8', not the key's 'Q-9'"):
            workflow_env.signal_by_key(
                "test_quoted",
                "go",
                key={"order_id": "Q-9"},
                signal_id="s-1",
                start_input={"order_id": "Q-8", "amount": 40},
            )

    def test_a_refused_signal_starts_no_run(self, workflow_env):
        with pytest.raises(engine.IllegalRunOperation):
            workflow_env.signal_by_key(
                "test_quoted",
                "change_amount",  # an update: never a plain signal
                key={"order_id": "Q-9"},
                signal_id="s-1",
                start_input={"amount": 40},
            )

        assert not WorkflowRun.objects.exists()


@pytest.mark.django_db(transaction=True)
class TestSignalWithStartAtOnce:
    def test_two_requests_for_one_missing_key_start_one_run_and_signal_it_twice(self):
        def signal_with_start(signal_id: str):
            return lambda: business_keys.signal_by_key(
                key=BusinessKey("test_quoted", "order_id", "Q-9"),
                name="nudge",
                signal_id=signal_id,
                start_input={"amount": 40},
            )

        answers = at_once(signal_with_start("s-1"), signal_with_start("s-2"))

        run = WorkflowRun.objects.get()
        assert sorted(answer.started for answer in answers) == [False, True]
        assert {answer.run_id for answer in answers} == {run.pk}
        assert sorted(run.signals.values_list("signal_id", flat=True)) == ["s-1", "s-2"]
