"""Moving live runs to another version (workflows.engine.migrate): the dry run changes
nothing and names every run that cannot move; applying moves the others, each in its own
transaction, with a step event, human tasks keeping their ids and decisions."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from auditlog.models import LogEntry
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import human_tasks
from approvals.states import Outcome
from tests.workflows.definitions import VERSIONED_RENAMES, VERSIONED_V2
from workflows import engine, registry
from workflows.engine.execute import claim_step
from workflows.models import StepEvent, StepRun, WorkflowRun
from workflows.registry import UnknownWorkflow
from workflows.states import EventKind, RunState, StepState
from workflows.versions import InvalidMigration

pytestmark = pytest.mark.django_db

PLAN = {"workflow_type": "test_versioned", "from_version": 1, "to_version": 2}


@pytest.fixture
def deploy_v2():
    """Register v2 beside v1 (start v1's runs first: new runs take the newest version)."""
    deployed = []

    def deploy() -> None:
        registry.register(VERSIONED_V2)
        deployed.append(VERSIONED_V2)

    yield deploy
    for workflow in deployed:
        registry.unregister(workflow)


@pytest.fixture
def start_v1(start, drive, people):
    def start_one(path: str = "", **input) -> WorkflowRun:
        run = drive(start("test_versioned", {"path": path, **input}))
        assert run.workflow_version == 1
        return run

    return start_one


def move(**options) -> engine.MigrationReport:
    return engine.migrate_runs(**PLAN, renames=VERSIONED_RENAMES, channel="api", **options)


def lines(report: engine.MigrationReport) -> dict:
    return {run.run_id: run for run in report.runs}


class TestPreview:
    def test_says_for_every_run_whether_it_can_move_and_why_not(self, start_v1, deploy_v2):
        ready = start_v1(amount=5)
        side = start_v1("side", amount=5)
        no_amount = start_v1()
        deploy_v2()

        report = engine.preview_migration(**PLAN, renames=VERSIONED_RENAMES)

        by_id = lines(report)
        assert (by_id[ready.pk].can_move, by_id[ready.pk].at) == (True, ("await_go",))
        assert by_id[side.pk].reasons == (
            "it is at 'side_track', and test_versioned v2 has no node 'side_track' "
            "(name the node it becomes with a rename: side_track=NEW)",
        )
        assert by_id[no_amount.pk].reasons == (
            "its input does not fit test_versioned v2's input schema (amount: Field required)",
        )
        assert (len(report.movable), len(report.blocked), report.applied) == (1, 2, False)

    def test_changes_nothing(self, start_v1, deploy_v2):
        run = start_v1(amount=5)
        deploy_v2()
        events = StepEvent.objects.count()

        engine.preview_migration(**PLAN, renames=VERSIONED_RENAMES)

        run.refresh_from_db()
        assert run.workflow_version == 1
        assert run.steps.filter(node="await_go").exists()
        assert StepEvent.objects.count() == events

    def test_a_running_activity_is_named(self, start, start_v1, deploy_v2):
        run = start("test_versioned", {"path": "work", "amount": 1})
        step = run.steps.get(node="work")
        claim_step(step.pk, now=timezone.now())
        deploy_v2()

        [line] = engine.preview_migration(**PLAN, renames=VERSIONED_RENAMES).runs

        assert line.reasons == (
            "its activity 'work' is running (attempt 1): try again once it has finished",
        )

    def test_finished_runs_are_not_listed(self, start, drive, start_v1, deploy_v2):
        run = start_v1(amount=5)
        engine.signal_run(run_id=run.pk, name="go")
        assert drive(run).state == RunState.SUCCEEDED
        deploy_v2()

        assert engine.preview_migration(**PLAN, renames=VERSIONED_RENAMES).runs == ()

    def test_an_unknown_version_or_a_bad_plan_is_refused(self, start_v1, deploy_v2):
        deploy_v2()

        with pytest.raises(UnknownWorkflow, match="has no version 3"):
            engine.preview_migration(workflow_type="test_versioned", from_version=1, to_version=3)
        with pytest.raises(InvalidMigration, match="test_versioned v2 has no node 'nowhere'"):
            engine.preview_migration(**PLAN, renames={"await_go": "nowhere"})


class TestMigrateRuns:
    def test_moves_the_runs_that_can_and_leaves_the_others_untouched(
        self, start_v1, deploy_v2, olga
    ):
        ready = start_v1(amount=5)
        side = start_v1("side", amount=5)
        deploy_v2()
        side_steps = list(side.steps.values_list("id", "node", "state"))

        report = move(actor=olga)

        by_id = lines(report)
        assert (by_id[ready.pk].moved, by_id[ready.pk].at) == (True, ("await_signal",))
        assert by_id[side.pk].moved is False
        assert by_id[side.pk].reasons
        ready.refresh_from_db()
        side.refresh_from_db()
        assert (ready.workflow_version, side.workflow_version) == (2, 1)
        assert ready.steps.get(state=StepState.WAITING).node == "await_signal"
        assert list(side.steps.values_list("id", "node", "state")) == side_steps
        assert not side.events.filter(kind=EventKind.OPERATOR).exists()

    def test_writes_a_step_event_naming_the_versions_the_renames_and_the_operator(
        self, start_v1, deploy_v2, olga
    ):
        run = start_v1(amount=5)
        deploy_v2()

        move(actor=olga)

        event = run.events.get(kind=EventKind.OPERATOR)
        assert event.detail == {
            "action": "migrated",
            "from_version": 1,
            "to_version": 2,
            "renames": {"await_go": "await_signal"},
            "input_changed": False,
            "by": "olga",
            "channel": "api",
            "comment": "",
        }

    def test_is_audited_with_the_operator_named(self, start_v1, deploy_v2, olga):
        run = start_v1(amount=5)
        blocked = start_v1("side", amount=5)
        deploy_v2()

        move(actor=olga, remote_addr="10.0.0.1", comment="release 2")

        entry = LogEntry.objects.get_for_object(run).get()
        assert (entry.actor, entry.remote_addr, entry.additional_data["event"]) == (
            olga,
            "10.0.0.1",
            "run_migrated",
        )
        assert (entry.additional_data["channel"], entry.additional_data["comment"]) == (
            "api",
            "release 2",
        )
        assert entry.changes == {
            "state": ["waiting", "waiting"],
            "version": [1, 2],
            "renames": {"await_go": "await_signal"},
        }
        assert not LogEntry.objects.get_for_object(blocked).exists()

    def test_a_moved_run_goes_on_through_the_target_version(
        self, start_v1, deploy_v2, drive, effects
    ):
        run = start_v1(amount=5)
        deploy_v2()
        move()

        engine.signal_run(run_id=run.pk, name="go")
        run = drive(run)

        assert run.state == RunState.SUCCEEDED
        assert list(run.steps.order_by("id").values_list("node", flat=True)) == [
            "route",
            "work_or_not",
            "check",
            "await_signal",
            "finish",
        ]
        assert effects(run) == {"test.finish": 1}

    def test_keeps_the_input_as_the_target_reads_it(self, start_v1, deploy_v2):
        run = start_v1(amount="7")
        deploy_v2()

        move()

        run.refresh_from_db()
        assert run.input == {"path": "", "amount": 7}
        assert run.events.get(kind=EventKind.OPERATOR).detail["input_changed"] is True

    def test_human_tasks_keep_their_ids_and_decisions(self, start_v1, deploy_v2, carol, drive):
        waiting = start_v1("approve", amount=5)
        open_task = waiting.human_tasks.get()
        decided = start_v1("approve", amount=5)
        decided_task = decided.human_tasks.get()
        human_tasks.approve_human_task(
            task_id=decided_task.pk, user=carol, channel="inbox", comment="fine"
        )
        deploy_v2()

        report = move()

        assert {line.run_id for line in report.moved} == {waiting.pk, decided.pk}
        open_task.refresh_from_db()
        decided_task.refresh_from_db()
        assert (open_task.node, open_task.is_live) == ("review", True)
        assert (decided_task.node, decided_task.outcome, decided_task.decided_by) == (
            "review",
            Outcome.APPROVED,
            carol,
        )
        assert decided_task.comment == "fine"
        # The open task is decided as before, now against v2's node.
        human_tasks.approve_human_task(task_id=open_task.pk, user=carol, channel="inbox")
        waiting = drive(waiting)
        assert waiting.steps.get(node="review").state == StepState.SUCCEEDED
        assert waiting.steps.get(state=StepState.WAITING).node == "await_signal"

    def test_each_run_moves_in_its_own_transaction(self, start_v1, deploy_v2):
        first = start_v1(amount=5)
        clashing = start_v1(amount=5)
        # A leftover step under the name its waiting step would take.
        StepRun.objects.create(
            run=clashing,
            node="await_signal",
            state=StepState.CANCELLED,
            scheduled_at=timezone.now(),
        )
        last = start_v1(amount=5)
        deploy_v2()

        report = move()

        by_id = lines(report)
        assert by_id[first.pk].moved
        assert by_id[last.pk].moved
        assert not by_id[clashing.pk].moved
        [reason] = by_id[clashing.pk].reasons
        assert reason.startswith(
            "renaming its steps clashed with a step it already has: duplicate key value "
            'violates unique constraint "step_unique_per_round_and_item"'
        )
        clashing.refresh_from_db()
        assert clashing.workflow_version == 1
        assert clashing.steps.filter(node="await_go", state=StepState.WAITING).exists()
        assert not clashing.events.filter(kind=EventKind.OPERATOR).exists()

    def test_moving_again_moves_nothing_more(self, start_v1, deploy_v2):
        start_v1(amount=5)
        blocked = start_v1("side", amount=5)
        deploy_v2()
        move()

        again = move()

        assert [line.run_id for line in again.runs] == [blocked.pk]
        assert again.moved == []

    def test_the_registry_hooks_hear_the_move_in_its_transaction(
        self, start_v1, deploy_v2, olga, monkeypatch
    ):
        run = start_v1(amount=5)
        deploy_v2()
        heard = []
        monkeypatch.setattr(
            registry, "_run_action_hooks", [lambda **call: heard.append(("action", call))]
        )
        monkeypatch.setattr(
            registry,
            "_run_migration_hooks",
            [lambda **call: heard.append(("migration", call))],
        )

        move(actor=olga, remote_addr="10.0.0.1", comment="release 2")

        [(first, migration), (second, action)] = heard
        assert (first, migration["from_version"], migration["renames"]) == (
            "migration",
            1,
            {"await_go": "await_signal"},
        )
        assert (second, action["action"], action["actor"], action["state_before"]) == (
            "action",
            "migrate_runs",
            olga,
            RunState.WAITING,
        )
        assert action["changes"] == {"version": [1, 2], "renames": {"await_go": "await_signal"}}
        assert (action["channel"], action["remote_addr"], action["comment"]) == (
            "api",
            "10.0.0.1",
            "release 2",
        )
        assert action["run"].pk == run.pk


class TestAThousandWaitingRuns:
    def test_a_dry_run_then_apply_moves_them_and_names_the_ones_that_cannot(
        self, start, deploy_v2, olga
    ):
        kinds = ["ready"] * 900 + ["side"] * 50 + ["no_amount"] * 50
        runs: dict[str, list] = {"ready": [], "side": [], "no_amount": []}
        for index, kind in enumerate(kinds):
            input = {"path": "side" if kind == "side" else "", "n": index}
            if kind != "no_amount":
                input["amount"] = index
            run, _ = engine.start_workflow(workflow_type="test_versioned", input=input)
            runs[kind].append(run.pk)
        assert (
            WorkflowRun.objects.filter(state=RunState.WAITING, workflow_version=1).count() == 1000
        )
        deploy_v2()

        started = time.monotonic()
        with CaptureQueriesContext(connection) as preview_queries:
            preview = engine.preview_migration(**PLAN, renames=VERSIONED_RENAMES)
        preview_seconds = time.monotonic() - started
        started = time.monotonic()
        applied = move(actor=olga)
        apply_seconds = time.monotonic() - started

        # The dry run reads by batches: a few queries, not a few per run.
        assert len(preview_queries) <= 8
        assert (len(preview.runs), len(preview.movable), len(preview.blocked)) == (1000, 900, 100)
        assert len(applied.moved) == 900
        blocked = {line.run_id: line.reasons for line in applied.blocked}
        assert set(blocked) == {*runs["side"], *runs["no_amount"]}
        assert Counter(reasons[0].split(",")[0] for reasons in blocked.values()) == {
            "it is at 'side_track'": 50,
            "its input does not fit test_versioned v2's input schema (amount: Field required)": 50,
        }
        assert WorkflowRun.objects.filter(workflow_version=2).count() == 900
        assert set(
            WorkflowRun.objects.filter(workflow_version=1).values_list("id", flat=True)
        ) == set(blocked)
        assert StepEvent.objects.filter(kind=EventKind.OPERATOR).count() == 900
        assert StepRun.objects.filter(node="await_signal", state=StepState.WAITING).count() == 900
        print(f"\n1,000 runs: dry run {preview_seconds:.2f} s, apply {apply_seconds:.2f} s")


@pytest.mark.django_db(transaction=True)
class TestAMoveAndAClaimAtOnce:
    def test_a_claim_waits_for_the_move_and_runs_the_targets_activity(
        self, start, deploy_v2, monkeypatch
    ):
        run = start("test_versioned", {"path": "work", "amount": 1})
        step = run.steps.get(node="work", state=StepState.SCHEDULED)
        deploy_v2()
        inside, release = threading.Event(), threading.Event()

        def hold_the_move(**call) -> None:
            inside.set()  # the move holds the run's lock now
            assert release.wait(timeout=30)

        monkeypatch.setattr(registry, "_run_migration_hooks", [hold_the_move])
        claims = []

        def claim() -> None:
            assert inside.wait(timeout=30)
            claims.append(claim_step(step.pk, now=timezone.now()))
            claims.append(time.monotonic())

        worker = threading.Thread(target=lambda: (claim(), connection.close()))
        worker.start()
        mover = threading.Thread(target=lambda: (move(), connection.close()))
        mover.start()
        assert inside.wait(timeout=30)
        time.sleep(0.5)  # long enough for the claim to reach the lock
        released_at = time.monotonic()
        release.set()
        mover.join(timeout=30)
        worker.join(timeout=30)

        [claimed, claimed_at] = claims
        assert claimed_at > released_at
        assert claimed.function is VERSIONED_V2.activity("work").run
        run.refresh_from_db()
        assert run.workflow_version == 2
        assert run.steps.get(pk=step.pk).state == StepState.RUNNING
