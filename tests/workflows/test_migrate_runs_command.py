"""`manage.py migrate_runs`: a dry run by default, --apply to move, clear output naming every
run that cannot move and why."""

from __future__ import annotations

from io import StringIO

import pytest
from auditlog.models import LogEntry
from django.core.management import CommandError, call_command

from tests.workflows.definitions import VERSIONED_V2
from workflows import engine, registry
from workflows.models import WorkflowRun
from workflows.states import EventKind

pytestmark = pytest.mark.django_db

MOVE = ["migrate_runs", "test_versioned", "--from", "1", "--to", "2"]
RENAMES = ["--rename", "sign_off=review", "--rename", "await_go=await_signal"]


def run_command(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.fixture
def two_runs(people):
    """One v1 run that can move and one that cannot (v2 has no side track); v2 deployed."""
    ready, _ = engine.start_workflow(workflow_type="test_versioned", input={"amount": 1})
    side, _ = engine.start_workflow(
        workflow_type="test_versioned", input={"path": "side", "amount": 1}
    )
    registry.register(VERSIONED_V2)
    yield ready, side
    registry.unregister(VERSIONED_V2)


class TestDryRun:
    def test_lists_every_run_and_changes_nothing(self, two_runs):
        ready, side = two_runs

        output = run_command(*MOVE, *RENAMES)

        lines = output.splitlines()
        assert lines[0] == (
            "Dry run: Moving test_versioned runs from v1 to v2 (renames: sign_off=review, "
            "await_go=await_signal). Nothing is changed."
        )
        [ready_line] = [line for line in lines if str(ready.pk) in line]
        [side_line] = [line for line in lines if str(side.pk) in line]
        assert ready_line.split()[1:] == ["waiting", "at", "await_go", "can", "move"]
        assert side_line.endswith(
            "cannot move: it is at 'side_track', and test_versioned v2 has no node "
            "'side_track' (name the node it becomes with a rename: side_track=NEW)"
        )
        assert lines[-2:] == [
            "2 unfinished run(s) of test_versioned v1: 1 can move, 1 cannot.",
            "Run again with --apply to move the 1 that can.",
        ]
        assert set(WorkflowRun.objects.values_list("workflow_version", flat=True)) == {1}


class TestApply:
    def test_moves_the_runs_that_can_and_names_the_others(self, two_runs):
        ready, side = two_runs

        output = run_command(*MOVE, *RENAMES, "--apply")

        lines = output.splitlines()
        assert str(ready.pk) not in output  # moved runs are listed only with -v 2
        assert any(str(side.pk) in line and "cannot move" in line for line in lines)
        assert lines[-2:] == [
            "Moved 1 of 2 unfinished run(s) to test_versioned v2.",
            "1 could not move and were left as they were (above).",
        ]
        ready.refresh_from_db()
        side.refresh_from_db()
        assert (ready.workflow_version, side.workflow_version) == (2, 1)
        event = ready.events.get(kind=EventKind.OPERATOR)
        assert (event.detail["channel"], event.detail["by"]) == ("command", "")
        assert event.detail["comment"].startswith("manage.py migrate_runs, as ")
        entry = LogEntry.objects.get_for_object(ready).get()
        assert (entry.actor, entry.additional_data["channel"]) == (None, "command")
        assert entry.additional_data["comment"] == event.detail["comment"]
        assert not LogEntry.objects.get_for_object(side).exists()

    def test_verbose_output_lists_the_moved_runs_too(self, two_runs):
        ready, _ = two_runs

        output = StringIO()
        call_command(*MOVE, *RENAMES, "--apply", verbosity=2, stdout=output)

        [line] = [line for line in output.getvalue().splitlines() if str(ready.pk) in line]
        assert line.split()[1:] == ["waiting", "at", "await_signal", "moved"]

    def test_names_the_operator_given(self, two_runs, operator):
        ready, _ = two_runs

        run_command(*MOVE, *RENAMES, "--apply", "--by", "olga")

        assert ready.events.get(kind=EventKind.OPERATOR).detail["by"] == "olga"
        entry = LogEntry.objects.get_for_object(ready).get()
        assert (entry.actor, entry.additional_data["event"]) == (operator, "run_migrated")


class TestRefusals:
    def test_someone_who_is_not_an_operator_cannot_be_named(self, two_runs):
        with pytest.raises(CommandError, match="alice is not an operator"):
            run_command(*MOVE, "--apply", "--by", "alice")

    def test_a_malformed_rename_is_refused_before_anything_is_read(self, two_runs):
        with pytest.raises(CommandError, match="rename 'sign_off' is not of the form old=new"):
            run_command(*MOVE, "--rename", "sign_off")

    def test_an_impossible_plan_says_why(self, two_runs):
        with pytest.raises(CommandError) as refused:
            run_command(*MOVE, "--rename", "await_go=nowhere")

        assert str(refused.value) == (
            "The plan cannot be followed:\n"
            "- rename await_go=nowhere: test_versioned v2 has no node 'nowhere'"
        )

    def test_an_unknown_version_is_named(self, two_runs):
        with pytest.raises(CommandError, match="Workflow type 'test_versioned' has no version 9"):
            run_command("migrate_runs", "test_versioned", "--from", "1", "--to", "9")
