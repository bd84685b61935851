"""The audit trail: an entry for every action, attributed, and chained so tampering shows."""

from __future__ import annotations

from io import StringIO

import pytest
from auditlog.models import LogEntry
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from approvals import audit, services
from approvals.audit import GENESIS, SYSTEM_USERNAME, verify_audit_chain
from approvals.checks import check_audit_key
from approvals.states import Channel

pytestmark = pytest.mark.django_db


def verify() -> str:
    out = StringIO()
    call_command("verify_audit", stdout=out)
    return out.getvalue()


@pytest.fixture
def decided(manager_task, carol):
    services.comment_on_human_task(
        task_id=manager_task.pk,
        user=carol,
        body="Receipt?",
        channel=Channel.INBOX,
        remote_addr="10.0.0.7",
    )
    services.approve_human_task(
        task_id=manager_task.pk,
        user=carol,
        channel=Channel.API,
        comment="ok",
        remote_addr="10.0.0.7",
    )
    return manager_task


class TestAuditEntries:
    def test_each_action_names_actor_channel_comment_and_address(self, decided, carol):
        entries = LogEntry.objects.get_for_object(decided).order_by("id")

        assert [
            (e.additional_data["event"], e.actor.username, e.additional_data["channel"])
            for e in entries
        ] == [
            ("created", SYSTEM_USERNAME, "system"),
            ("commented", "carol", "inbox"),
            ("approved", "carol", "api"),
        ]
        assert entries.last().additional_data["comment"] == "ok"
        assert entries.last().remote_addr == "10.0.0.7"


class TestVerifyAudit:
    def test_an_untouched_chain_verifies(self, decided):
        assert verify_audit_chain() is None
        assert "intact" in verify()

    def test_an_edited_entry_is_named(self, decided):
        edited = LogEntry.objects.get(additional_data__event="commented")
        LogEntry.objects.filter(pk=edited.pk).update(
            additional_data={**edited.additional_data, "comment": "Nothing to see"}
        )

        with pytest.raises(CommandError, match=f"Audit entry {edited.pk} "):
            verify()

    def test_a_deleted_entry_breaks_the_chain_at_the_next_one(self, decided):
        entries = list(LogEntry.objects.order_by("id"))
        LogEntry.objects.filter(pk=entries[1].pk).delete()

        assert verify_audit_chain().pk == entries[2].pk


def recompute_unkeyed(entries) -> None:
    """What an intruder with database access did to the old chain: recompute every hash."""
    previous = GENESIS
    for entry in entries.order_by("id"):
        data = entry.additional_data
        data["chain"] = {
            "previous": previous,
            "hash": audit._unkeyed_hash(previous, audit._content_of(entry)),
        }
        LogEntry.objects.filter(pk=entry.pk).update(additional_data=data)
        previous = data["chain"]["hash"]


@pytest.fixture
def first_key(settings) -> None:
    settings.BATON_AUDIT_KEY = "first-key"


class TestKeyedChain:
    def test_an_edit_with_every_hash_recomputed_without_the_key_is_named(self, decided):
        edited = LogEntry.objects.get(additional_data__event="commented")
        LogEntry.objects.filter(pk=edited.pk).update(
            additional_data={**edited.additional_data, "comment": "Nothing to see"}
        )

        recompute_unkeyed(LogEntry.objects.all())

        assert verify_audit_chain().pk == LogEntry.objects.order_by("id").first().pk
        with pytest.raises(CommandError, match="does not fit the chain"):
            verify()

    def test_the_chain_is_keyed_with_baton_audit_key(
        self, first_key, settings, manager_task, carol
    ):
        services.comment_on_human_task(
            task_id=manager_task.pk, user=carol, body="Receipt?", channel=Channel.INBOX
        )
        assert verify_audit_chain() is None
        assert "keyed with BATON_AUDIT_KEY" in verify()

        settings.BATON_AUDIT_KEY = "another-key"

        assert verify_audit_chain() is not None

    def test_without_baton_audit_key_the_deploy_check_says_where_the_key_comes_from(self, settings):
        settings.BATON_AUDIT_KEY = ""

        warnings = check_audit_key()

        assert [w.id for w in warnings] == ["approvals.W001"]
        assert "keyed from DJANGO_SECRET_KEY" in warnings[0].msg
        assert "derived from DJANGO_SECRET_KEY" in verify()

    def test_with_baton_audit_key_the_deploy_check_is_quiet(self, settings):
        settings.BATON_AUDIT_KEY = "k" * 40

        assert check_audit_key() == []


class TestRekeyingAtUpgrade:
    def test_an_intact_unkeyed_chain_is_rehashed_with_the_key_and_marked(self, decided):
        recompute_unkeyed(LogEntry.objects.all())
        assert verify_audit_chain() is not None
        upgrade = timezone.now()

        rekeyed = audit.rekey_unkeyed_chain(log_entries=LogEntry, now=upgrade)

        assert rekeyed == LogEntry.objects.count() == 3
        assert verify_audit_chain() is None
        assert {e.additional_data["chain"]["rekeyed"] for e in LogEntry.objects.all()} == {
            upgrade.isoformat()
        }

    def test_an_edit_made_before_the_upgrade_stays_named(self, decided):
        entries = list(LogEntry.objects.order_by("id"))
        recompute_unkeyed(LogEntry.objects.all())
        LogEntry.objects.filter(pk=entries[1].pk).update(
            additional_data={
                **LogEntry.objects.get(pk=entries[1].pk).additional_data,
                "comment": "Nothing to see",
            }
        )

        rekeyed = audit.rekey_unkeyed_chain(log_entries=LogEntry, now=timezone.now())

        assert rekeyed == 1
        assert verify_audit_chain().pk == entries[1].pk

    def test_entries_written_after_the_upgrade_extend_the_rekeyed_chain(
        self, decided, manager_task, carol
    ):
        recompute_unkeyed(LogEntry.objects.all())
        audit.rekey_unkeyed_chain(log_entries=LogEntry, now=timezone.now())

        services.comment_on_human_task(
            task_id=manager_task.pk, user=carol, body="After", channel=Channel.INBOX
        )

        assert verify_audit_chain() is None

    @pytest.mark.django_db(transaction=True)
    def test_the_upgrade_migration_rehashes_an_unkeyed_chain(self, decided):
        executor = MigrationExecutor(connection)
        executor.migrate([("approvals", "0004_decisions_index")])
        recompute_unkeyed(LogEntry.objects.all())
        assert verify_audit_chain() is not None

        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes("approvals"))

        assert verify_audit_chain() is None
        assert all("rekeyed" in e.additional_data["chain"] for e in LogEntry.objects.all())
