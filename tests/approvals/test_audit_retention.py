"""Pruning old months of the audit log: anchored first, still verified, and never silent."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from auditlog.models import LogEntry
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from approvals import audit
from approvals.audit import retention, verify_audit_chain
from workflows import partitions

pytestmark = pytest.mark.django_db

AUDIT = partitions.Partitioned("auditlog_logentry", "timestamp")


@pytest.fixture
def write(manager_task, carol):
    """Append a chained entry about carol's task, written `days_ago` days ago."""

    def write_entry(days_ago: float, comment: str = "noted") -> LogEntry:
        with transaction.atomic():
            return audit.record(
                task=manager_task,
                event="commented",
                actor=carol,
                channel="inbox",
                now=timezone.now() - timedelta(days=days_ago),
                comment=comment,
            )

    return write_entry


@pytest.fixture
def old_month():
    """The month 14 months back, with a partition of its own."""
    month = partitions.month_of(timezone.now() - timedelta(days=425))
    partitions.ensure_month(AUDIT, month)
    return month


def prune_year() -> retention.AuditPrune:
    now = timezone.now()
    return retention.prune_audit(before=now - timedelta(days=365), now=now)


class TestPruneAudit:
    def test_old_months_are_dropped_and_the_chain_still_verifies(self, write, old_month):
        old = [write(425), write(425), write(425)]
        recent = [write(1), write(0)]

        pruned = prune_year()
        report = verify_audit_chain()

        assert partitions.partition_name(AUDIT.table, old_month) in pruned.months
        assert old_month not in partitions.months(AUDIT.table)
        assert not LogEntry.objects.filter(pk__in=[entry.pk for entry in old]).exists()
        assert LogEntry.objects.filter(pk__in=[entry.pk for entry in recent]).count() == 2
        assert report.intact, report.problem
        assert report.pruned_through == pruned.checkpoint
        assert pruned.checkpoint.entry_id == old[-1].pk
        # Counted from the first entry ever: 3 pruned, 2 kept, and the pruning's own.
        assert report.entries == pruned.checkpoint.entries + 3

    def test_verify_audit_says_where_it_started(self, write, old_month):
        write(425)
        write(0)
        pruned = prune_year()
        out = StringIO()

        call_command("verify_audit", stdout=out)

        assert out.getvalue().startswith("The audit chain is intact")
        assert (
            f"Entries up to entry {pruned.checkpoint.entry_id} were pruned; verified from "
            f"{pruned.checkpoint.label}"
        ) in out.getvalue()

    def test_the_pruning_is_itself_in_the_chain(self, write, old_month):
        write(425)
        write(0)

        pruned = prune_year()

        entry = LogEntry.objects.filter(additional_data__event="audit_pruned").get()
        assert entry.object_pk == str(pruned.checkpoint.number)
        assert entry.changes["through_entry"] == pruned.checkpoint.entry_id

    def test_checkpoints_of_pruned_entries_are_set_aside_and_later_ones_hold(
        self, write, old_month
    ):
        write(425)
        before = audit.write_checkpoint(now=timezone.now())
        write(425)
        write(0)
        after = audit.write_checkpoint(now=timezone.now())

        prune_year()
        report = verify_audit_chain()

        assert before.entry_id < report.pruned_through.entry_id
        assert report.intact, report.problem
        assert report.holding == after

    def test_entries_caught_by_the_default_partition_go_too(self, write):
        far_back = write(3000)  # eight years: no month partition, the default one
        kept = write(0)
        # The chain is cut by number: what was written before the last entry to go, goes.
        before = LogEntry.objects.filter(pk__lte=far_back.pk).count()

        pruned = prune_year()

        assert pruned.entries == before
        assert not LogEntry.objects.filter(pk__lte=far_back.pk).exists()
        assert LogEntry.objects.filter(pk=kept.pk).exists()
        assert verify_audit_chain().intact

    def test_a_checkpoint_after_pruning_starts_from_the_prunings(self, write, old_month):
        write(425)
        write(0)
        prune_year()
        write(0)

        anchored = audit.write_checkpoint(now=timezone.now())

        assert verify_audit_chain().holding == anchored

    def test_nothing_old_is_nothing_to_prune(self, write):
        write(0)

        pruned = prune_year()

        assert (pruned.months, pruned.entries, pruned.checkpoint) == ([], 0, None)

    def test_the_command_says_what_went(self, write, old_month):
        old = write(425)
        write(0)
        going = LogEntry.objects.filter(pk__lte=old.pk).count()
        out = StringIO()

        call_command("prune_audit", "--older-than", "365d", stdout=out)

        assert out.getvalue().startswith(f"Pruned {going} audit entries in 1 month(s), ")
        assert "anchored by checkpoint #" in out.getvalue()


class TestWhatPruningDoesNotHide:
    def test_a_broken_chain_is_not_pruned(self, write, old_month):
        entry = write(425, comment="original")
        write(0)
        LogEntry.objects.filter(pk=entry.pk).update(
            additional_data={**entry.additional_data, "comment": "edited"}
        )

        with pytest.raises(audit.AuditChainBroken):
            prune_year()

        assert old_month in partitions.months(AUDIT.table)
        assert LogEntry.objects.filter(pk=entry.pk).exists()

    def test_deleting_the_oldest_entries_is_named_even_up_to_a_checkpoint(self, write):
        write(10)
        second = write(9)
        write(0)
        audit.write_checkpoint(now=timezone.now(), upto=second.pk)

        LogEntry.objects.filter(pk__lte=second.pk).delete()
        report = verify_audit_chain()

        assert not report.intact
        assert "they were deleted, not pruned" in report.problem

    def test_deleting_the_first_entry_left_by_a_pruning_is_named(self, write, old_month):
        write(425)
        survivor = write(0)
        write(0)
        prune_year()

        LogEntry.objects.filter(pk=survivor.pk).delete()
        report = verify_audit_chain()

        assert not report.intact
        assert "deleted, not pruned" in report.problem
