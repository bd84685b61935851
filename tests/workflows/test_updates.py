"""Updates (engine.updates): a signal validated, handled and answered, once per id."""

from __future__ import annotations

import pytest
from django.utils import translation

from tests.conftest import at_once
from workflows import engine
from workflows.models import Signal, StepEvent, WorkflowRun
from workflows.states import EventKind, RunState

QUOTE = {"order_id": "Q-1", "amount": 100}


@pytest.fixture
def quoted(workflow_env):
    """A quote prepared and waiting for the customer's go."""
    return workflow_env.start("test_quoted", QUOTE)


class TestUpdateChangesTheRun:
    def test_the_handler_answers_and_its_new_input_is_what_later_steps_read(
        self, workflow_env, quoted
    ):
        charge = workflow_env.spy("test_quoted", "charge")

        answer = workflow_env.update(quoted, "change_amount", {"amount": 120, "reason": "extra"})
        run = workflow_env.signal(quoted, "go")

        assert answer == {"was": 100, "now": 120}
        assert run.input == {"order_id": "Q-1", "amount": 120, "currency": "EUR"}
        assert charge.runs[0].input["amount"] == 120
        workflow_env.assert_state(run, RunState.SUCCEEDED)

    def test_it_is_recorded_as_a_signal_with_its_payload_answer_and_a_timeline_line(
        self, workflow_env, quoted
    ):
        workflow_env.update(
            quoted, "change_amount", {"amount": 120, "reason": "extra"}, update_id="u-1"
        )

        signal = Signal.objects.get(run=quoted)
        assert (signal.name, signal.signal_id, signal.consumed_by) == ("change_amount", "u-1", None)
        assert signal.payload == {"amount": 120, "reason": "extra"}
        assert signal.answer == {"result": {"was": 100, "now": 120}}
        event = StepEvent.objects.get(run=quoted, kind=EventKind.SIGNALLED)
        assert event.detail == {"name": "change_amount", "id": "u-1", "update": True}

    def test_an_update_named_like_a_signal_the_run_waits_for_resumes_it(self, workflow_env, quoted):
        answer = workflow_env.update(quoted, "accept", {"accepted_by": "ada"})

        assert answer == {"accepted": 100, "by": "ada"}
        workflow_env.assert_path(quoted, "prepare", "await_go", "charge")
        workflow_env.assert_state(quoted, RunState.SUCCEEDED)

    def test_the_same_id_again_gets_the_first_answer_and_changes_nothing(
        self, workflow_env, quoted
    ):
        first = workflow_env.update(
            quoted, "change_amount", {"amount": 120, "reason": "extra"}, update_id="u-1"
        )

        again = engine.update_run(
            run_id=quoted.pk,
            name="change_amount",
            payload={"amount": 999, "reason": "again"},
            update_id="u-1",
        )

        assert (again.result, again.duplicate) == (first, True)
        assert workflow_env.refresh(quoted).input["amount"] == 120
        assert Signal.objects.filter(run=quoted).count() == 1

    def test_an_id_used_by_another_signal_is_refused(self, workflow_env, quoted):
        workflow_env.signal(quoted, "nudge", signal_id="s-1")

        with pytest.raises(engine.IllegalRunOperation, match="already used by the signal 'nudge'"):
            engine.update_run(
                run_id=quoted.pk, name="accept", payload={"accepted_by": "ada"}, update_id="s-1"
            )


class TestWithTheKit:
    """The README's example."""

    def test_the_new_amount_is_what_the_charge_reads(self, workflow_env):
        charge = workflow_env.spy("test_quoted", "charge")
        run = workflow_env.start("test_quoted", {"order_id": "Q-1", "amount": 100})

        answer = workflow_env.update(run, "change_amount", {"amount": 120, "reason": "extra seat"})
        workflow_env.signal_by_key("test_quoted", "go", key={"order_id": "Q-1"})

        assert answer == {"was": 100, "now": 120}
        assert workflow_env.query(run, "quote")["amount"] == 120
        assert charge.runs[0].input["amount"] == 120
        workflow_env.assert_state(run, RunState.SUCCEEDED)


class TestUpdateRefused:
    def test_a_payload_that_does_not_fit_the_schema_names_each_field(self, workflow_env, quoted):
        with pytest.raises(engine.InvalidUpdate) as refused:
            workflow_env.update(quoted, "change_amount", {"amount": -5, "colour": "red"})

        fields = {error["field"] for error in refused.value.errors}
        assert fields == {"amount", "reason", "colour"}
        assert not Signal.objects.filter(run=quoted).exists()

    def test_each_fields_problem_is_said_in_the_readers_language_with_its_type(
        self, workflow_env, quoted
    ):
        with translation.override("de"), pytest.raises(engine.InvalidUpdate) as refused:
            workflow_env.update(quoted, "change_amount", {"amount": 120})

        assert refused.value.errors == [
            {"field": "reason", "message": "Feld erforderlich", "type": "missing"}
        ]

    def test_the_handlers_refusal_is_the_answer_and_nothing_changes(self, workflow_env, quoted):
        with pytest.raises(engine.InvalidUpdate, match="more than ten times the quoted 100"):
            workflow_env.update(quoted, "change_amount", {"amount": 5000, "reason": "typo"})

        assert workflow_env.refresh(quoted).input["amount"] == 100
        assert not Signal.objects.filter(run=quoted).exists()

    def test_an_update_the_type_lacks_lists_those_it_has(self, workflow_env, quoted):
        with pytest.raises(engine.UnknownUpdate, match=r"its updates: accept, change_amount"):
            workflow_env.update(quoted, "discount", {})

    def test_an_update_accepted_only_while_waiting_elsewhere_is_not_accepted_now(
        self, workflow_env
    ):
        run = workflow_env.start("test_quoted", QUOTE)
        WorkflowRun.objects.filter(pk=run.pk).update(state=RunState.RUNNING)
        run.steps.filter(node="await_go").update(state="succeeded")

        with pytest.raises(engine.UpdateNotAccepted, match="only while it waits at await_go"):
            engine.update_run(
                run_id=run.pk, name="change_amount", payload={"amount": 120, "reason": "x"}
            )

    def test_a_paused_run_does_not_accept_updates(self, workflow_env, quoted):
        engine.pause_run(run_id=quoted.pk)

        with pytest.raises(engine.UpdateNotAccepted, match="is paused"):
            workflow_env.update(quoted, "accept", {"accepted_by": "ada"})

    def test_an_ended_run_does_not_accept_updates(self, workflow_env, quoted):
        run = workflow_env.signal(quoted, "stop")

        with pytest.raises(engine.RunAlreadyEnded, match="has already ended"):
            workflow_env.update(run, "accept", {"accepted_by": "ada"})

    def test_a_plain_signal_may_not_stand_in_for_an_update(self, workflow_env, quoted):
        with pytest.raises(engine.IllegalRunOperation, match="send it as an update"):
            engine.signal_run(run_id=quoted.pk, name="accept", payload={"accepted_by": ""})

        workflow_env.assert_state(quoted, RunState.WAITING)


@pytest.mark.django_db(transaction=True)
class TestUpdatesAtOnce:
    def test_two_deliveries_of_one_update_id_apply_it_once(self, start, drive):
        run = drive(start("test_quoted", QUOTE))

        def update():
            return engine.update_run(
                run_id=run.pk,
                name="change_amount",
                payload={"amount": 150, "reason": "more"},
                update_id="u-1",
            )

        answers = at_once(update, update)

        assert sorted(answer.duplicate for answer in answers) == [False, True]
        assert [answer.result for answer in answers] == [{"was": 100, "now": 150}] * 2
        assert Signal.objects.filter(run=run).count() == 1
