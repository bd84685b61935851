"""The audit trail: an entry for every action, attributed, and chained so tampering shows."""

from __future__ import annotations

from io import StringIO

import pytest
from auditlog.models import LogEntry
from django.core.management import CommandError, call_command

from approvals import services
from approvals.audit import SYSTEM_USERNAME, verify_audit_chain
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
