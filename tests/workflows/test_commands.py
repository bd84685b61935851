"""Management commands and the scheduled-start task, as operators use them."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from auditlog.models import LogEntry
from django.core.management import CommandError, call_command
from django.utils import timezone

from tests.workflows.test_engine import sweep_until_quiet
from workflows import heartbeats
from workflows.beat import beat_heartbeat_name
from workflows.models import WorkflowRun
from workflows.states import RunState
from workflows.tasks import start_scheduled_workflow

pytestmark = pytest.mark.django_db


def run_command(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.fixture
def dead_letter(start, drive, order_input):
    failing = order_input(simulate={"shipping": "fail", "refund": "outage"})
    run = sweep_until_quiet(drive(start("order", failing)), drive)
    assert run.state == RunState.DEAD_LETTERED
    return run


class TestDemoLedger:
    def test_json_prints_one_object_per_effect(self, start, drive, order_input):
        run = drive(start("order", order_input()))

        rows = json.loads(run_command("demo_ledger", "--run", str(run.pk), "--json"))

        assert [(row["service"], row["action"]) for row in rows] == [
            ("inventory", "reserve"),
            ("payments", "charge"),
            ("shipping", "ship"),
            ("notifications", "notify"),
        ]
        assert set(rows[0]) == {
            "run_id",
            "service",
            "action",
            "idempotency_key",
            "applied_at",
            "requests_seen",
        }
        assert all(row["requests_seen"] == 1 and row["applied_at"] for row in rows)


class TestDeadLetters:
    def test_list_names_the_run_and_the_failed_undo(self, dead_letter):
        output = run_command("dead_letters", "list")

        assert f"{dead_letter.pk} order failed undoing charge_payment" in output

    def test_retry_reopens_the_run(self, dead_letter):
        output = run_command("dead_letters", "retry", str(dead_letter.pk))

        dead_letter.refresh_from_db()
        assert dead_letter.state == RunState.COMPENSATING
        assert "is compensating" in output

    def test_resume_moves_past_the_failed_step(self, dead_letter, drive):
        run_command("dead_letters", "resume", str(dead_letter.pk))

        assert drive(dead_letter).state == RunState.COMPENSATED

    def test_a_retry_by_an_operator_is_audited_with_their_name(self, dead_letter, operator):
        run_command("dead_letters", "retry", str(dead_letter.pk), "--by", operator.username)

        entry = LogEntry.objects.filter(additional_data__event="run_retried").get()
        assert entry.actor == operator
        assert entry.additional_data["channel"] == "command"

    def test_a_retry_by_someone_who_is_not_an_operator_is_refused_and_changes_nothing(
        self, dead_letter, bob
    ):
        with pytest.raises(CommandError, match="bob is not an operator"):
            run_command("dead_letters", "retry", str(dead_letter.pk), "--by", "bob")

        dead_letter.refresh_from_db()
        assert dead_letter.state == RunState.DEAD_LETTERED

    def test_a_run_that_is_not_dead_lettered_is_refused_clearly(self, start, order_input):
        run = start("order", order_input())

        with pytest.raises(CommandError, match="Only a dead-lettered run"):
            run_command("dead_letters", "retry", str(run.pk))


class TestScheduledStart:
    def test_a_schedule_starts_a_run_of_its_type(self, order_input):
        run_id = start_scheduled_workflow.apply(
            args=("order", order_input()), kwargs={"correlation_id": "nightly"}, task_id="fire-1"
        ).get()

        run = WorkflowRun.objects.get(pk=run_id)
        assert (run.workflow_type, run.correlation_id) == ("order", "nightly")

    def test_a_redelivered_schedule_message_starts_no_second_run(self, order_input):
        for _ in range(2):
            start_scheduled_workflow.apply(args=("order", order_input()), task_id="fire-2")

        assert WorkflowRun.objects.filter(idempotency_key="schedule:fire-2").count() == 1


class TestLiveness:
    def test_a_recent_sweep_is_alive(self):
        heartbeats.record(name=heartbeats.SWEEP, now=timezone.now() - timedelta(seconds=3))

        assert run_command("liveness", "sweep").startswith("Alive: the last sweep was 3")

    def test_a_stale_sweep_exits_non_zero_saying_why(self):
        heartbeats.record(name=heartbeats.SWEEP, now=timezone.now() - timedelta(seconds=120))

        with pytest.raises(CommandError, match=r"Not alive: the last sweep was 120 s ago"):
            run_command("liveness", "sweep", "--max-age", "60")

    def test_no_sweep_yet_is_not_alive(self):
        with pytest.raises(CommandError, match="no sweep has been recorded yet"):
            run_command("liveness", "sweep")

    def test_this_hosts_beat_is_alive_once_it_ticked(self):
        heartbeats.record(name=beat_heartbeat_name(), now=timezone.now())

        assert run_command("liveness", "beat").startswith(
            f"Alive: the last {beat_heartbeat_name()}"
        )

    def test_a_beat_that_never_ticked_here_is_not_alive(self):
        heartbeats.record(name=heartbeats.SWEEP, now=timezone.now())  # another beat sweeps

        with pytest.raises(CommandError, match="no beat@elsewhere has been recorded yet"):
            run_command("liveness", "beat", "--hostname", "elsewhere")
