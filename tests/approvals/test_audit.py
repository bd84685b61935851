"""The audit trail: an entry for every action, attributed, chained under a key, and anchored."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from auditlog.models import LogEntry
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from approvals import audit, human_tasks, tasks
from approvals.audit import GENESIS, SYSTEM_USERNAME, chain, hashing, verify_audit_chain
from approvals.checks import check_audit_key
from approvals.models import AuditCheckpoint
from approvals.states import Channel

pytestmark = pytest.mark.django_db


def verify() -> str:
    out = StringIO()
    call_command("verify_audit", stdout=out)
    return out.getvalue()


@pytest.fixture
def decided(manager_task, carol):
    human_tasks.comment_on_human_task(
        task_id=manager_task.pk,
        user=carol,
        body="Receipt?",
        channel=Channel.INBOX,
        remote_addr="10.0.0.7",
    )
    human_tasks.approve_human_task(
        task_id=manager_task.pk,
        user=carol,
        channel=Channel.API,
        comment="ok",
        remote_addr="10.0.0.7",
    )
    return manager_task


class TestCommentsAreChainedAsKeyedDigests:
    """The chain covers a comment's keyed digest, so its words may be erased (approvals.privacy)
    and the chain still verifies, while words rewritten any other way break it."""

    def test_the_entry_keeps_the_words_and_the_chain_covers_their_digest(self, decided):
        entry = LogEntry.objects.get(additional_data__event="commented")

        assert entry.additional_data["comment"] == "Receipt?"
        assert entry.additional_data["comment_digest"] == hashing.comment_digest(
            "Receipt?", key=audit.chain_key()
        )
        assert chain._content_of(entry, key=audit.chain_key())["comment"].startswith("hmac-sha256:")

    def test_erased_words_leave_the_chain_intact(self, decided):
        entry = LogEntry.objects.get(additional_data__event="commented")

        LogEntry.objects.filter(pk=entry.pk).update(
            additional_data={**entry.additional_data, "comment": hashing.ERASED_COMMENT}
        )

        assert verify_audit_chain().intact

    def test_rewritten_words_break_the_chain_at_their_entry(self, decided):
        entry = LogEntry.objects.get(additional_data__event="commented")

        LogEntry.objects.filter(pk=entry.pk).update(
            additional_data={**entry.additional_data, "comment": "Looks fine"}
        )

        assert verify_audit_chain().broken_entry.pk == entry.pk

    def test_an_entry_written_before_digests_still_verifies_by_its_words(self, decided):
        previous = GENESIS
        for entry in LogEntry.objects.order_by("id"):
            data = {key: value for key, value in entry.additional_data.items()}
            data.pop("comment_digest", None)
            entry.additional_data = data
            content = chain._content_of(entry, key=audit.chain_key())
            data["chain"] = {
                "previous": previous,
                "hash": hashing.entry_hash(previous, content, key=audit.chain_key()),
            }
            LogEntry.objects.filter(pk=entry.pk).update(additional_data=data)
            previous = data["chain"]["hash"]

        assert verify_audit_chain().intact
        commented = LogEntry.objects.get(additional_data__event="commented")
        LogEntry.objects.filter(pk=commented.pk).update(
            additional_data={**commented.additional_data, "comment": hashing.ERASED_COMMENT}
        )
        assert verify_audit_chain().broken_entry.pk == commented.pk


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
        assert verify_audit_chain().intact
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

        assert verify_audit_chain().broken_entry.pk == entries[2].pk


def recompute_unkeyed(entries) -> None:
    """What an intruder with database access did to the old chain: recompute every hash."""
    previous = GENESIS
    for entry in entries.order_by("id"):
        data = entry.additional_data
        data["chain"] = {
            "previous": previous,
            "hash": hashing.unkeyed_entry_hash(
                previous, chain._content_of(entry, key=audit.chain_key())
            ),
        }
        LogEntry.objects.filter(pk=entry.pk).update(additional_data=data)
        previous = data["chain"]["hash"]


@pytest.fixture
def first_key(settings) -> None:
    settings.BATON_AUDIT_KEY = "first-key"


def recompute_keyed(entries) -> None:
    """What an intruder who also holds the key could do: rewrite and re-sign the chain."""
    previous = GENESIS
    for entry in entries.order_by("id"):
        data = entry.additional_data
        new_hash = hashing.entry_hash(
            previous, chain._content_of(entry, key=audit.chain_key()), key=audit.chain_key()
        )
        data["chain"] = {"previous": previous, "hash": new_hash}
        LogEntry.objects.filter(pk=entry.pk).update(additional_data=data)
        previous = new_hash


class TestKeyedChain:
    def test_an_edit_with_every_hash_recomputed_without_the_key_is_named(self, decided):
        edited = LogEntry.objects.get(additional_data__event="commented")
        LogEntry.objects.filter(pk=edited.pk).update(
            additional_data={**edited.additional_data, "comment": "Nothing to see"}
        )

        recompute_unkeyed(LogEntry.objects.all())

        assert verify_audit_chain().broken_entry.pk == LogEntry.objects.order_by("id").first().pk
        with pytest.raises(CommandError, match="does not fit the chain"):
            verify()

    def test_the_chain_is_keyed_with_baton_audit_key(
        self, first_key, settings, manager_task, carol
    ):
        human_tasks.comment_on_human_task(
            task_id=manager_task.pk, user=carol, body="Receipt?", channel=Channel.INBOX
        )
        assert verify_audit_chain().intact
        assert "keyed with BATON_AUDIT_KEY" in verify()

        settings.BATON_AUDIT_KEY = "another-key"

        assert not verify_audit_chain().intact

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
        assert not verify_audit_chain().intact
        upgrade = timezone.now()

        rekeyed = audit.rekey_unkeyed_chain(log_entries=LogEntry, now=upgrade)

        assert rekeyed == LogEntry.objects.count() == 3
        assert verify_audit_chain().intact
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
        assert verify_audit_chain().broken_entry.pk == entries[1].pk

    def test_entries_written_after_the_upgrade_extend_the_rekeyed_chain(
        self, decided, manager_task, carol
    ):
        recompute_unkeyed(LogEntry.objects.all())
        audit.rekey_unkeyed_chain(log_entries=LogEntry, now=timezone.now())

        human_tasks.comment_on_human_task(
            task_id=manager_task.pk, user=carol, body="After", channel=Channel.INBOX
        )

        assert verify_audit_chain().intact

    @pytest.mark.django_db(transaction=True)
    def test_the_upgrade_migration_rehashes_an_unkeyed_chain(self, decided):
        executor = MigrationExecutor(connection)
        executor.migrate([("approvals", "0004_decisions_index")])
        recompute_unkeyed(LogEntry.objects.all())
        assert not verify_audit_chain(checkpoints=[]).intact  # (no checkpoint table yet)

        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes("approvals"))

        assert verify_audit_chain().intact
        assert all("rekeyed" in e.additional_data["chain"] for e in LogEntry.objects.all())


def checkpoint(**options) -> audit.Checkpoint:
    return audit.write_checkpoint(now=timezone.now(), **options)


def comment(task, user, body: str) -> None:
    human_tasks.comment_on_human_task(task_id=task.pk, user=user, body=body, channel=Channel.INBOX)


class TestCheckpoints:
    def test_an_intact_chain_holds_against_its_checkpoints(self, decided):
        anchored = checkpoint()

        report = verify_audit_chain()

        assert (report.intact, report.entries, report.holding) == (True, 3, anchored)
        assert f"the newest, checkpoint #{anchored.number}" in verify()

    def test_deleting_the_newest_entries_after_a_checkpoint_is_named_with_the_checkpoint(
        self, decided
    ):
        anchored = checkpoint()
        newest = list(LogEntry.objects.order_by("-id")[:2])
        LogEntry.objects.filter(pk__in=[entry.pk for entry in newest]).delete()

        report = verify_audit_chain()

        assert not report.intact
        assert f"checkpoint #{anchored.number} of" in report.problem
        assert f"anchored 3 entries up to entry {newest[0].pk}, which is gone" in report.problem
        with pytest.raises(CommandError, match="Entries were deleted"):
            verify()

    def test_a_cut_is_placed_after_the_newest_checkpoint_that_still_holds(
        self, decided, manager_task, carol
    ):
        first = checkpoint()
        comment(manager_task, carol, "One more")
        second = checkpoint()
        LogEntry.objects.filter(pk=second.entry_id).delete()

        report = verify_audit_chain()

        assert report.holding == first
        assert f"checkpoint #{second.number} of" in report.problem
        assert f"still matches checkpoint #{first.number} of" in report.problem

    def test_an_edit_recomputed_with_the_key_still_breaks_its_checkpoint(self, decided):
        anchored = checkpoint()
        edited = LogEntry.objects.get(additional_data__event="commented")
        LogEntry.objects.filter(pk=edited.pk).update(
            additional_data={**edited.additional_data, "comment": "Nothing to see"}
        )

        recompute_keyed(LogEntry.objects.all())

        report = verify_audit_chain()
        assert f"no longer match checkpoint #{anchored.number} of" in report.problem
        assert "rewritten" in report.problem

    def test_an_edit_in_the_chain_names_the_entry_and_the_checkpoint_before_it(
        self, decided, manager_task, carol
    ):
        anchored = checkpoint()
        comment(manager_task, carol, "Later")
        later = LogEntry.objects.order_by("-id").first()
        LogEntry.objects.filter(pk=later.pk).update(
            additional_data={**later.additional_data, "comment": "Edited"}
        )

        report = verify_audit_chain()

        assert report.broken_entry.pk == later.pk
        assert f"still matches checkpoint #{anchored.number} of" in report.problem

    def test_a_forged_checkpoint_is_named(self, decided):
        anchored = checkpoint()
        AuditCheckpoint.objects.filter(pk=anchored.number).update(entries=2)

        report = verify_audit_chain()

        assert f"Checkpoint #{anchored.number} of" in report.problem
        assert "not signed with the audit key" in report.problem

    def test_a_broken_chain_is_never_anchored(self, decided):
        edited = LogEntry.objects.get(additional_data__event="commented")
        LogEntry.objects.filter(pk=edited.pk).update(
            additional_data={**edited.additional_data, "comment": "Nothing to see"}
        )

        with pytest.raises(audit.AuditChainBroken, match=f"Audit entry {edited.pk} "):
            checkpoint()

        assert not AuditCheckpoint.objects.exists()

    def test_a_checkpoint_is_refused_when_the_last_ones_entries_are_gone(self, decided):
        anchored = checkpoint()
        LogEntry.objects.filter(pk=anchored.entry_id).delete()

        with pytest.raises(audit.AuditChainBroken, match="deleted or rewritten since it"):
            checkpoint()

        assert AuditCheckpoint.objects.count() == 1

    def test_an_empty_log_has_nothing_to_anchor(self, db):
        assert checkpoint() is None
        assert not AuditCheckpoint.objects.exists()

    def test_the_beat_task_writes_a_checkpoint(self, decided, settings):
        tasks.audit_checkpoint()

        assert AuditCheckpoint.objects.get().entries == 3
        schedule = settings.CELERY_BEAT_SCHEDULE["baton-audit-checkpoint"]
        assert schedule["task"] == tasks.audit_checkpoint.name


class TestExportedCheckpoints:
    def test_the_command_prints_a_signed_line_and_appends_it_to_the_export_file(
        self, decided, tmp_path
    ):
        path = tmp_path / "checkpoints.jsonl"
        out = StringIO()

        call_command("audit_checkpoint", "--export", str(path), stdout=out)
        call_command("audit_checkpoint", "--export", str(path), stdout=StringIO())

        line = json.loads(out.getvalue())
        assert line["entries"] == 3
        assert len(line["signature"]) == 64
        assert path.read_text().splitlines()[0] == out.getvalue().strip()
        assert len(path.read_text().splitlines()) == 2

    def test_the_file_shows_a_cut_even_with_the_checkpoint_rows_deleted(
        self, decided, tmp_path, settings
    ):
        path = tmp_path / "checkpoints.jsonl"
        settings.BATON_AUDIT_CHECKPOINT_FILE = str(path)
        checkpoint()
        AuditCheckpoint.objects.all().delete()
        LogEntry.objects.filter(pk=LogEntry.objects.order_by("-id").first().pk).delete()

        with pytest.raises(CommandError, match=f"in {path}, line 1"):
            verify()
        assert verify_audit_chain().intact  # the database alone no longer knows

    def test_a_file_named_on_the_command_line_is_read(self, decided, tmp_path):
        path = tmp_path / "elsewhere.jsonl"
        checkpoint(export_to=path)
        AuditCheckpoint.objects.all().delete()
        LogEntry.objects.filter(pk=LogEntry.objects.order_by("-id").first().pk).delete()

        with pytest.raises(CommandError, match="Entries were deleted"):
            call_command("verify_audit", "--checkpoints", str(path), stdout=StringIO())

    def test_a_checkpoint_both_saved_and_exported_counts_once(self, decided, tmp_path):
        path = tmp_path / "checkpoints.jsonl"
        checkpoint(export_to=path)
        out = StringIO()

        call_command("verify_audit", "--checkpoints", str(path), stdout=out)

        assert "1 checkpoint(s) hold" in out.getvalue()

    def test_an_altered_line_is_named(self, decided, tmp_path):
        path = tmp_path / "checkpoints.jsonl"
        checkpoint(export_to=path)
        path.write_text(path.read_text().replace('"entries": 3', '"entries": 2'))

        with pytest.raises(CommandError, match="not signed with the audit key"):
            call_command("verify_audit", "--checkpoints", str(path), stdout=StringIO())

    def test_a_line_cut_short_is_named(self, decided, tmp_path):
        path = tmp_path / "checkpoints.jsonl"
        checkpoint(export_to=path)
        path.write_text(path.read_text()[:40])

        with pytest.raises(CommandError, match=f"Line 1 of {path} is not a checkpoint"):
            call_command("verify_audit", "--checkpoints", str(path), stdout=StringIO())

    def test_a_missing_file_is_named(self, decided, tmp_path):
        with pytest.raises(CommandError, match="Cannot read the checkpoint file"):
            call_command(
                "verify_audit", "--checkpoints", str(tmp_path / "gone.jsonl"), stdout=StringIO()
            )

    def test_an_unwritable_export_anchors_nothing(self, decided, tmp_path):
        with pytest.raises(CommandError, match="Nothing was anchored"):
            call_command(
                "audit_checkpoint", "--export", str(tmp_path / "no-dir" / "x"), stdout=StringIO()
            )

        assert not AuditCheckpoint.objects.exists()
