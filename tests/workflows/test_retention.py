"""Pruning finished runs: old finished runs go with their rows, everything else stays."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from auditlog.models import LogEntry
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from approvals import human_tasks
from approvals.human_tasks import attachments
from approvals.models import Attachment, HumanTask
from approvals.states import Channel
from tests.workflows.test_engine import sweep_until_quiet
from workflows import engine, partitions, retention
from workflows.models import Signal, StepEvent, StepRun, WorkflowRun
from workflows.retention import EVENTS
from workflows.states import RunState
from workflows.tasks import prune_runs

pytestmark = pytest.mark.django_db


def prune(*args: str) -> str:
    out = StringIO()
    call_command("prune_runs", *args, stdout=out)
    return out.getvalue()


def age(run: WorkflowRun, days: float) -> WorkflowRun:
    """Make the run look as if it started, had its events and (if it did) finished `days` ago."""
    then = timezone.now() - timedelta(days=days)
    WorkflowRun.objects.filter(pk=run.pk).update(
        created_at=then, finished_at=then if run.finished_at else None
    )
    StepEvent.objects.filter(run=run).update(at=then)
    return run


@pytest.fixture
def approved_expense(manager_task, carol, drive) -> WorkflowRun:
    """alice's expense, approved by carol through the API, paid and finished."""
    human_tasks.approve_human_task(
        task_id=manager_task.pk, user=carol, channel=Channel.API, comment="ok"
    )
    run = drive(manager_task.run)
    assert run.state == RunState.SUCCEEDED
    return run


@pytest.fixture
def runs(approved_expense, start_expense, start, drive, order_input) -> dict[str, WorkflowRun]:
    """One run of each kind pruning must tell apart, all but `recent` started 100 days ago."""
    failing = order_input(simulate={"shipping": "fail", "refund": "outage"})
    dead_letter = sweep_until_quiet(drive(start("order", failing)), drive)
    assert dead_letter.state == RunState.DEAD_LETTERED
    recent = drive(start("order", order_input(order_id="A-2")))
    assert recent.state == RunState.SUCCEEDED
    return {
        "old finished": age(approved_expense, 100),
        "old live": age(start_expense(), 100),
        "old dead letter": age(dead_letter, 100),
        "recent": age(recent, 1),
    }


def remaining(runs: dict[str, WorkflowRun]) -> set[str]:
    kept = set(WorkflowRun.objects.values_list("pk", flat=True))
    return {name for name, run in runs.items() if run.pk in kept}


class TestDryRun:
    def test_it_counts_what_would_go_and_deletes_nothing(self, runs):
        old = runs["old finished"]
        rows_before = WorkflowRun.objects.count(), StepRun.objects.count()

        output = prune("--finished-before", "90d", "--dry-run")

        assert output.startswith("Would delete 1 runs that finished before ")
        assert (
            f"with {old.steps.count()} steps, {old.events.count()} events, "
            f"{old.signals.count()} signals and 1 human tasks"
        ) in output
        assert (WorkflowRun.objects.count(), StepRun.objects.count()) == rows_before


class TestPrune:
    def test_old_finished_runs_go_with_their_rows(self, runs):
        old = runs["old finished"]
        assert old.events.exists()
        assert old.signals.exists()
        assert old.human_tasks.exists()

        output = prune("--finished-before", "90d")

        assert output.startswith("Deleted 1 runs that finished before ")
        assert remaining(runs) == {"old live", "old dead letter", "recent"}
        for model in (StepRun, StepEvent, Signal, HumanTask):
            assert not model.objects.filter(run_id=old.pk).exists()

    def test_live_and_dead_lettered_runs_stay_however_old(self, runs):
        prune("--finished-before", "1s")

        assert remaining(runs) == {"old live", "old dead letter"}
        assert runs["old live"].human_tasks.exists()

    def test_the_audit_log_is_kept_and_its_chain_still_verifies(self, runs):
        entries = LogEntry.objects.count()
        task_id = str(runs["old finished"].human_tasks.get().pk)

        prune("--finished-before", "90d")

        assert LogEntry.objects.count() == entries
        assert LogEntry.objects.filter(object_pk=task_id).exists()
        verified = StringIO()
        call_command("verify_audit", stdout=verified)  # raises CommandError if broken
        assert verified.getvalue().startswith("The audit chain is intact")

    def test_runs_go_one_batch_at_a_time(self, runs):
        age(runs["recent"], 100)

        report = retention.prune_runs(finished_before=timezone.now() - timedelta(days=90), batch=1)

        assert report.count("runs") == 2
        assert report.batches == 2
        assert remaining(runs) == {"old live", "old dead letter"}

    def test_a_bounded_pass_stops_after_its_batches(self, runs):
        age(runs["recent"], 100)

        report = retention.prune_runs(
            finished_before=timezone.now() - timedelta(days=90), batch=1, max_batches=1
        )

        assert report.count("runs") == 1
        assert len(remaining(runs)) == 3


class TestChildRuns:
    def test_a_child_stays_while_its_parent_lives_and_goes_with_it(self, start, drive):
        parent = drive(start("test_parent", {"hold": True}))
        child = age(drive(WorkflowRun.objects.get(parent_run=parent)), days=100)
        engine.signal_run(run_id=child.pk, name="go")
        age(drive(child), days=100)

        prune("--finished-before", "90d")

        assert WorkflowRun.objects.filter(pk=child.pk).exists()  # its parent still waits
        # The sweep's look at the waiting step finds the child's end.
        parent = sweep_until_quiet(parent, drive)
        assert parent.state == RunState.SUCCEEDED
        age(parent, days=100)
        counted = retention.count_prunable(finished_before=timezone.now() - timedelta(days=90))

        prune("--finished-before", "90d")

        assert counted.deleted["runs"] == 2

        assert not WorkflowRun.objects.filter(pk__in=[parent.pk, child.pk]).exists()


class TestRefusals:
    @pytest.mark.parametrize(
        ("given", "reason"),
        [
            ("90", "a whole number and a unit"),
            ("ninety days", "a whole number and a unit"),
            ("0d", "an age of 0 would take runs that just finished"),
        ],
    )
    def test_an_age_it_cannot_read_is_refused_saying_why(self, given, reason):
        with pytest.raises(CommandError, match=reason):
            prune("--finished-before", given)

    def test_an_empty_batch_is_refused(self):
        with pytest.raises(CommandError, match="--batch must be at least 1"):
            prune("--finished-before", "90d", "--batch", "0")


class TestPeriodicPrune:
    def test_it_deletes_nothing_while_the_setting_is_off(self, runs, settings):
        settings.BATON_PRUNE_AFTER_DAYS = 0

        assert prune_runs.apply().get() == {}
        assert len(remaining(runs)) == 4

    def test_it_deletes_runs_older_than_the_setting(self, runs, settings):
        settings.BATON_PRUNE_AFTER_DAYS = 90

        deleted = prune_runs.apply().get()

        assert deleted["runs"] == 1
        assert remaining(runs) == {"old live", "old dead letter", "recent"}


def partition_of(event: StepEvent) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tableoid::regclass::text FROM workflows_stepevent WHERE id = %s", [event.pk]
        )
        return cursor.fetchone()[0]


class TestEventMonths:
    """Step events are partitioned by month: a prune drops old months whole."""

    @pytest.fixture
    def old_month(self, runs):
        """Put the old runs' events 100 days back, in a partition of their own month."""
        then = timezone.now() - timedelta(days=100)
        month = partitions.month_of(then)
        partitions.ensure_month(partitions.Partitioned(EVENTS, "at"), month)
        for name in ("old finished", "old live", "old dead letter"):
            StepEvent.objects.filter(run=runs[name]).update(at=then)
        return month

    def test_a_month_before_the_cutoff_is_dropped_whole(self, runs, old_month):
        old = runs["old finished"]
        events = old.events.count()

        report = retention.prune_runs(finished_before=timezone.now() - timedelta(days=40))

        assert old_month not in partitions.months(EVENTS)
        assert not StepEvent.objects.filter(run_id=old.pk).exists()
        assert report.count("events") >= events

    def test_the_events_of_runs_that_stay_are_kept_in_the_default_partition(self, runs, old_month):
        live, dead_letter = runs["old live"], runs["old dead letter"]
        kept = {run.pk: list(run.events.values_list("pk", "kind")) for run in (live, dead_letter)}

        retention.prune_runs(finished_before=timezone.now() - timedelta(days=40))

        for run in (live, dead_letter):
            assert list(run.events.values_list("pk", "kind")) == kept[run.pk]
            assert {partition_of(event) for event in run.events.all()} == {
                partitions.default_partition(EVENTS)
            }

    def test_the_recent_months_and_their_events_stay(self, runs, old_month):
        recent = runs["recent"]
        events = recent.events.count()
        months = set(partitions.months(EVENTS)) - {old_month}

        retention.prune_runs(finished_before=timezone.now() - timedelta(days=40))

        assert set(partitions.months(EVENTS)) == months
        assert recent.events.count() == events

    def test_a_bounded_pass_leaves_the_months_for_a_pass_that_finishes(self, runs, old_month):
        age(runs["recent"], 100)

        retention.prune_runs(
            finished_before=timezone.now() - timedelta(days=40), batch=1, max_batches=1
        )

        assert old_month in partitions.months(EVENTS)

    def test_a_batch_deletes_with_one_statement_per_table(
        self, runs, django_assert_max_num_queries
    ):
        age(runs["recent"], 100)
        cutoff = timezone.now() - timedelta(days=40)

        # One statement per table and per kind of row for the batch (2 runs here, or
        # 10,000), then the months' checks: never one per run or per row.
        with django_assert_max_num_queries(40):
            report = retention.prune_runs(finished_before=cutoff)

        assert report.count("runs") == 2

    def test_a_batch_reads_by_index_whatever_the_planner_estimates(self, runs, monkeypatch):
        # At 10M runs the planner's estimate for a skewed table chose to read all 25M
        # notifications to delete a batch's; a batch is now planned without sequential
        # scans, and the setting is put back after it (here the test's transaction
        # goes on, as a caller's would).
        age(runs["recent"], 100)
        seen = []

        def hook(run_ids):
            with connection.cursor() as cursor:
                cursor.execute("SHOW enable_seqscan")
                seen.append(cursor.fetchone()[0])

        monkeypatch.setattr(retention.registry, "_prune_hooks", [hook])

        retention.prune_runs(finished_before=timezone.now() - timedelta(days=40))

        assert seen == ["off"]
        with connection.cursor() as cursor:
            cursor.execute("SHOW enable_seqscan")
            assert cursor.fetchone()[0] == "on"


class TestAttachments:
    def test_a_pruned_runs_attachments_go_with_it_files_and_all(
        self, approved_expense, alice, settings, tmp_path, django_capture_on_commit_callbacks
    ):
        settings.MEDIA_ROOT = tmp_path
        csv = SimpleUploadedFile("costs.csv", b"date,amount\n2026-12-01,120.00\n", "text/csv")
        [kept] = attachments.attach(
            run_id=approved_expense.pk, user=alice, uploads=[csv], channel="inbox"
        )
        age(approved_expense, 100)

        stored = Path(kept.file.path)

        with django_capture_on_commit_callbacks(execute=True):
            prune("--finished-before", "90d")

        assert not Attachment.objects.filter(pk=kept.pk).exists()
        assert not stored.exists()
