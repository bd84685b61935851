"""The audit trail: every action on a human task, as a django-auditlog entry in a keyed hash chain.

Entries are only ever created here, never updated or deleted. Each one carries,
in `additional_data["chain"]`, an HMAC-SHA256 of its own content and of the
entry before it, under a key kept outside the database (`chain_key`), so
`verify_audit_chain` can name the first entry that no longer fits: an edited or
deleted row breaks the chain from there on, and without the key nobody can
recompute the hashes after an edit.

A chain alone cannot show that its newest entries were deleted: what is left
is still a valid chain. So its head is anchored outside the audit table from
time to time: `write_checkpoint` saves a signed checkpoint (entry, count, hash)
and appends it, as one signed JSON line, to a file the operator chooses. A
checkpoint whose entries are gone or different shows truncation and rewriting,
and names the newest checkpoint that still holds.

Old months of the log can be pruned (approvals.audit.retention): the chain is
first anchored at the last entry to go by a checkpoint, and a chained
`audit_pruned` entry about that checkpoint says so. Verification then starts
from that checkpoint rather than from the first entry ever written: the first
surviving entry must follow its hash, and the chain goes on from its count. A
prefix deleted by anyone else has no such entry naming its end, and shows.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from auditlog.models import LogEntry
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db import connection, transaction
from django.utils.crypto import salted_hmac

from approvals.audit.hashing import (
    GENESIS,
    chained_comment,
    checkpoint_payload,
    checkpoint_signature,
    comment_digest,
    entry_content,
    entry_hash,
    unkeyed_entry_hash,
)
from approvals.models import AuditCheckpoint
from workflows import personal

SYSTEM_USERNAME = "baton-system"
_CHAIN_LOCK = 0x0BA70A
_KEY_SALT = "baton.audit.chain-key"


def chain_key() -> bytes:
    """Return the key of the chain's HMACs: BATON_AUDIT_KEY, else one derived from SECRET_KEY.

    The derived key (salted, so it is no other use's key) keeps a demo or an
    upgrade working with nothing set, but then whoever learns SECRET_KEY can
    rewrite the chain, and rotating SECRET_KEY breaks it; the check
    approvals.W001 says so.
    """
    if settings.BATON_AUDIT_KEY:
        return settings.BATON_AUDIT_KEY.encode()
    return salted_hmac(_KEY_SALT, "audit chain", algorithm="sha256").digest()


def key_source() -> str:
    """Say, for operators, where the chain's key comes from."""
    if settings.BATON_AUDIT_KEY:
        return "BATON_AUDIT_KEY"
    return "a key derived from DJANGO_SECRET_KEY (BATON_AUDIT_KEY is not set)"


def system_actor() -> Any:
    """Return the named user that work done by Celery and the sweep is attributed to."""
    user, _ = get_user_model().objects.get_or_create(
        username=SYSTEM_USERNAME, defaults={"is_active": False, "first_name": "Baton system"}
    )
    return user


def record(
    *,
    task: Any,
    event: str,
    actor: Any,
    channel: str,
    now: datetime,
    comment: str = "",
    remote_addr: str | None = None,
    changes: dict[str, Any] | None = None,
) -> LogEntry:
    """Append one audit entry for `event` on `task`; call inside the use case's transaction."""
    return _append(
        task,
        event=event,
        actor=actor,
        channel=channel,
        now=now,
        comment=comment,
        remote_addr=remote_addr,
        changes=changes or {},
    )


def record_lockout(
    *,
    subject: Any,
    description: str,
    channel: str,
    now: datetime,
    comment: str,
    remote_addr: str | None,
    changes: dict[str, Any],
) -> LogEntry:
    """Append an entry saying that failed credentials locked out an account or an address.

    `subject` is the account when the failures named one, otherwise the row that
    counted them; `description` names it in the trail. Sign-in runs outside any
    transaction, so this opens one: the chain's lock must be held from reading
    the previous entry until this one is committed.
    """
    with transaction.atomic():
        return _append(
            subject,
            event="locked_out",
            actor=system_actor(),
            channel=channel,
            now=now,
            comment=comment,
            remote_addr=remote_addr,
            changes=changes,
            object_repr=description,
        )


def record_unlock(
    *,
    subject: Any,
    description: str,
    actor: Any,
    now: datetime,
    comment: str,
    changes: dict[str, Any],
) -> LogEntry:
    """Append an entry saying that an operator lifted a lockout, and why; call inside
    the transaction that deletes the counted failures."""
    return _append(
        subject,
        event="unlocked",
        actor=actor,
        channel="admin",
        now=now,
        comment=comment,
        remote_addr=None,
        changes=changes,
        object_repr=description,
    )


def hold_chain_lock() -> None:
    """Keep every other writer from extending the chain until this transaction ends."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CHAIN_LOCK])


def record_pruning(*, checkpoint: Checkpoint, before: datetime, now: datetime) -> LogEntry:
    """Append the entry saying that the entries up to `checkpoint`'s were pruned; inside
    the pruning's transaction (see approvals.audit.retention)."""
    return _append(
        AuditCheckpoint.objects.get(pk=checkpoint.number),
        event=PRUNED,
        actor=system_actor(),
        channel="system",
        now=now,
        comment=f"Pruned the audit entries before {before:%Y-%m-%d}.",
        remote_addr=None,
        changes={
            "through_entry": checkpoint.entry_id,
            "entries": checkpoint.entries,
            "before": before.isoformat(),
        },
        object_repr=checkpoint.label,
    )


def chained_entries() -> Any:
    """Return the chained audit entries, in chain order."""
    return _chained_entries()


def record_account_sync(
    *,
    user: Any,
    now: datetime,
    comment: str,
    remote_addr: str | None,
    changes: dict[str, Any],
) -> LogEntry:
    """Append an entry saying that a sign-in through the provider made the account or
    changed its groups or rights (approvals.sso.accounts); call inside its transaction."""
    return _append(
        user,
        event="account_synced",
        actor=user,
        channel="inbox",
        now=now,
        comment=comment,
        remote_addr=remote_addr,
        changes=changes,
        object_repr=f"account {user.get_username()}",
    )


def record_attachment(
    *, attachment: Any, actor: Any, channel: str, now: datetime, remote_addr: str | None
) -> LogEntry:
    """Append an entry holding an attached file's SHA-256, so that a file swapped in
    storage later no longer matches what the chain holds; call inside its transaction."""
    return _append(
        attachment,
        event="attached",
        actor=actor,
        channel=channel,
        now=now,
        comment="",
        remote_addr=remote_addr,
        changes={
            "sha256": [None, attachment.sha256],
            "name": [None, attachment.name],
            "size": [None, attachment.size],
            "task": [None, str(attachment.task_id) if attachment.task_id else None],
            "run": [None, str(attachment.run_id)],
        },
        object_repr=f"attachment {attachment.name}",
    )


def record_erasure(
    *, run: Any, actor: Any, now: datetime, comment: str, changes: dict[str, Any]
) -> LogEntry:
    """Append the entry saying that `run`'s personal data was erased (approvals.privacy):
    how many values and rows, which files; never what they held. Call inside its
    transaction."""
    return _append(
        run,
        event="personal_data_erased",
        actor=actor,
        channel="admin",
        now=now,
        comment=comment,
        remote_addr=None,
        changes=changes,
        object_repr=f"run {run.pk}",
    )


def _append(
    subject: Any,
    *,
    event: str,
    actor: Any,
    channel: str,
    now: datetime,
    comment: str,
    remote_addr: str | None,
    changes: dict[str, Any],
    object_repr: str | None = None,
) -> LogEntry:
    # A personal value (sealed by workflows.personal) is chained as its keyed digest, never
    # as the value nor its ciphertext: erasing it later leaves this entry, and the chain,
    # as they were.
    changes = personal.digested(changes, key=chain_key())
    # A comment too (a decision's reason, a note): its words are kept beside the entry,
    # where erasure may tombstone them, and the chain covers their keyed digest.
    digest = comment_digest(comment, key=chain_key()) if comment else None
    hold_chain_lock()  # one writer at a time extends the chain; released at commit
    previous = (
        LogEntry.objects.filter(additional_data__has_key="chain")
        .order_by("-id")
        .values_list("additional_data", flat=True)
        .first()
    )
    previous_hash = previous["chain"]["hash"] if previous else GENESIS
    content = entry_content(
        content_type=ContentType.objects.get_for_model(subject).pk,
        object_pk=str(subject.pk),
        event=event,
        actor=actor.pk if actor else None,
        channel=channel,
        comment=digest if digest else comment,
        remote_addr=remote_addr,
        changes=changes,
        timestamp=now.isoformat(),
    )
    overrides = {"object_repr": object_repr} if object_repr is not None else {}
    return LogEntry.objects.log_create(
        subject,
        force_log=True,
        action=LogEntry.Action.UPDATE,
        actor=actor,
        remote_addr=remote_addr,
        timestamp=now,
        changes=changes,
        additional_data={
            "event": event,
            "channel": channel,
            "comment": comment,
            **({"comment_digest": digest} if digest else {}),
            "chain": {
                "previous": previous_hash,
                "hash": entry_hash(previous_hash, content, key=chain_key()),
            },
        },
        **overrides,
    )


def _content_of(entry: LogEntry, *, key: bytes) -> dict[str, Any]:
    data = entry.additional_data or {}
    return entry_content(
        content_type=entry.content_type_id,
        object_pk=entry.object_pk,
        event=data.get("event"),
        actor=entry.actor_id,
        channel=data.get("channel"),
        comment=chained_comment(data.get("comment"), data.get("comment_digest"), key=key),
        remote_addr=entry.remote_addr,
        changes=entry.changes or {},
        timestamp=entry.timestamp.isoformat(),
    )


# ---------------------------------------------------------------------------
# Checkpoints: the chain's head, signed, kept outside the audit table
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint as read back, from the table or from a line of an exported file."""

    number: int | None
    at: str  # ISO 8601, exactly as signed
    entry_id: int
    entries: int
    head: str
    signature: str
    source: str = "the database"

    @classmethod
    def of(cls, row: AuditCheckpoint) -> Checkpoint:
        return cls(
            number=row.pk,
            at=row.created_at.isoformat(),
            entry_id=row.entry_id,
            entries=row.entries,
            head=row.head,
            signature=row.signature,
        )

    @property
    def label(self) -> str:
        where = "" if self.source == "the database" else f" in {self.source}"
        return f"checkpoint #{self.number} of {self.at[:19].replace('T', ' ')} UTC{where}"

    def payload(self) -> dict[str, Any]:
        return checkpoint_payload(
            at=self.at, entry=self.entry_id, entries=self.entries, head=self.head
        )

    def line(self) -> str:
        """The checkpoint as one JSON line, for a file outside the database."""
        return json.dumps(
            {"checkpoint": self.number, **self.payload(), "signature": self.signature},
            sort_keys=True,
        )

    def is_signed_with(self, key: bytes) -> bool:
        return hmac.compare_digest(self.signature, checkpoint_signature(self.payload(), key=key))


class AuditChainBroken(Exception):
    """The chain does not verify; the message says where and since which checkpoint."""


class CheckpointFileError(Exception):
    """An exported checkpoint file cannot be read; the message says which line."""


def stored_checkpoints() -> list[Checkpoint]:
    """Return the checkpoints saved in the database."""
    return [Checkpoint.of(row) for row in AuditCheckpoint.objects.order_by("id")]


def exported_checkpoints(path: str | Path) -> list[Checkpoint]:
    """Read the checkpoints exported to `path`, one JSON line each; raise CheckpointFileError."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise CheckpointFileError(f"Cannot read the checkpoint file {path}: {error}.") from None
    checkpoints = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            checkpoints.append(
                Checkpoint(
                    number=data["checkpoint"],
                    at=str(data["at"]),
                    entry_id=int(data["entry"]),
                    entries=int(data["entries"]),
                    head=str(data["head"]),
                    signature=str(data["signature"]),
                    source=f"{path}, line {number}",
                )
            )
        except (ValueError, KeyError, TypeError):
            raise CheckpointFileError(
                f"Line {number} of {path} is not a checkpoint: it was altered or cut short."
            ) from None
    return checkpoints


def write_checkpoint(
    *, now: datetime, export_to: str | Path | None = None, upto: int | None = None
) -> Checkpoint | None:
    """Anchor the chain's head now: save a signed checkpoint and append its line to a file.

    With `upto`, anchor the chain at that entry instead of at its head (pruning
    anchors the last entry it drops).

    The file is `export_to`, else settings.BATON_AUDIT_CHECKPOINT_FILE (none if
    empty). Entries since the newest checkpoint are verified first, and a chain
    that does not verify is never anchored (AuditChainBroken). Return None when
    the log has no chained entry yet. If the file cannot be written, nothing is
    saved. Needs no lock: entries are appended under the chain's lock and commit
    in id order, so every snapshot of them is a prefix of the chain.
    """
    key = chain_key()
    head = _verified_head(key=key, upto=upto)
    if head is None:
        return None
    entry_id, entries, head_hash = head
    export_to = export_to or settings.BATON_AUDIT_CHECKPOINT_FILE or None
    at = now.astimezone(UTC)  # as the database gives it back, so the signature still fits
    payload = checkpoint_payload(at=at.isoformat(), entry=entry_id, entries=entries, head=head_hash)
    with transaction.atomic():
        row = AuditCheckpoint.objects.create(
            created_at=at,
            entry_id=entry_id,
            entries=entries,
            head=head_hash,
            signature=checkpoint_signature(payload, key=key),
        )
        checkpoint = Checkpoint.of(row)
        if export_to:
            with open(export_to, "a", encoding="utf-8") as file:
                file.write(checkpoint.line() + "\n")
                file.flush()
                os.fsync(file.fileno())
    return checkpoint


def _verified_head(*, key: bytes, upto: int | None = None) -> tuple[int, int, str] | None:
    """Verify the entries since the newest stored checkpoint (up to entry `upto`, if
    given); return the chain there as (entry id, number of entries, hash), or None if
    the log has no chained entry."""
    rows = AuditCheckpoint.objects.order_by("-entry_id", "-id")
    if upto is not None:
        rows = rows.filter(entry_id__lte=upto)
    newest = Checkpoint.of(rows[0]) if rows[:1] else None
    entries = _chained_entries()
    if upto is not None:
        entries = entries.filter(pk__lte=upto)
    previous, count, last_id = GENESIS, 0, None
    if newest is not None:
        if not newest.is_signed_with(key):
            raise AuditChainBroken(_forged(newest))
        anchored = entries.filter(pk=newest.entry_id).first()
        if anchored is None and _pruned_base(_chained_entries().first(), [newest]) == newest:
            pass  # the entries up to it were pruned; the chain goes on from it
        elif anchored is None or _stored_hash(anchored) != newest.head:
            raise AuditChainBroken(
                f"The entries anchored by {newest.label} (up to entry {newest.entry_id}) were "
                "deleted or rewritten since it. Run verify_audit."
            )
        entries = entries.filter(pk__gt=newest.entry_id)
        previous, count, last_id = newest.head, newest.entries, newest.entry_id
    for entry in entries.iterator(chunk_size=1000):
        expected = entry_hash(previous, _content_of(entry, key=key), key=key)
        if not _fits(entry, previous, expected):
            raise AuditChainBroken(_misfit(entry, newest))
        previous, count, last_id = expected, count + 1, entry.pk
    if last_id is None:
        return None
    return last_id, count, previous


# ---------------------------------------------------------------------------
# Verifying the chain against its checkpoints
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ChainReport:
    """What `verify_audit_chain` found: how far the chain goes, and what no longer fits."""

    entries: int
    checkpoints: int  # distinct checkpoints checked
    holding: Checkpoint | None  # the newest checkpoint that still holds
    broken_entry: LogEntry | None = None
    problem: str = ""
    # The checkpoint verification started from, when older entries were pruned.
    pruned_through: Checkpoint | None = None

    @property
    def intact(self) -> bool:
        return not self.problem


def verify_audit_chain(*, checkpoints: Iterable[Checkpoint] | None = None) -> ChainReport:
    """Check every chained entry, then every checkpoint (those in the database by default).

    An entry that does not fit is named; so is a checkpoint that is not signed
    with the key, or whose entries are gone (the log was cut short) or differ
    (rewritten by someone holding the key), with the newest checkpoint that
    still holds: what changed lies after it.
    """
    key = chain_key()
    anchors = sorted(
        stored_checkpoints() if checkpoints is None else checkpoints,
        key=lambda checkpoint: (checkpoint.entry_id, checkpoint.at),
    )
    checked = len({anchor.signature for anchor in anchors})  # a row and its line are one
    for anchor in anchors:
        if not anchor.is_signed_with(key):
            return ChainReport(0, checked, None, problem=_forged(anchor))
    seen: dict[int, tuple[str, int]] = {}
    previous, count, last_id = GENESIS, 0, None
    first = _chained_entries().first()
    base = None
    if first is not None and _chain_of(first).get("previous") != GENESIS:
        base = _pruned_base(first, anchors)
        if base is None:
            return ChainReport(
                0,
                checked,
                None,
                first,
                f"The entries before audit entry {first.pk} are gone, and no checkpoint and "
                "record of pruning anchors where they ended: they were deleted, not pruned.",
            )
        # Checkpoints of pruned entries cannot be checked against them any more.
        anchors = [anchor for anchor in anchors if anchor.entry_id >= base.entry_id]
        previous, count, last_id = base.head, base.entries, base.entry_id
        seen[base.entry_id] = (base.head, base.entries)
    wanted = {anchor.entry_id for anchor in anchors}
    for entry in _chained_entries().iterator(chunk_size=1000):
        expected = entry_hash(previous, _content_of(entry, key=key), key=key)
        if not _fits(entry, previous, expected):
            holding = _newest_holding([a for a in anchors if a.entry_id < entry.pk], seen)
            return ChainReport(count, checked, holding, entry, _misfit(entry, holding))
        previous, count, last_id = expected, count + 1, entry.pk
        if entry.pk in wanted:
            seen[entry.pk] = (expected, count)
    holding = None
    for anchor in anchors:
        found = seen.get(anchor.entry_id)
        if found is None:
            ends = f"entry {last_id}, with {count}" if last_id else "no entry, with 0"
            return ChainReport(
                count,
                checked,
                holding,
                problem=(
                    f"Entries were deleted: {anchor.label} anchored {anchor.entries} entries "
                    f"up to entry {anchor.entry_id}, which is gone; the log now ends at {ends} "
                    f"entries.{_since(holding)}"
                ),
            )
        if found != (anchor.head, anchor.entries):
            return ChainReport(
                count,
                checked,
                holding,
                problem=(
                    f"Entries up to entry {anchor.entry_id} no longer match {anchor.label}: "
                    f"they were rewritten, by someone holding the audit key.{_since(holding)}"
                ),
            )
        holding = anchor
    return ChainReport(count, checked, holding, pruned_through=base)


PRUNED = "audit_pruned"


def _pruned_base(first: LogEntry | None, anchors: Iterable[Checkpoint]) -> Checkpoint | None:
    """Return the checkpoint that pruning anchored just before `first`, the oldest
    surviving entry: signed, following into `first`, and named by a chained
    `audit_pruned` entry (written by pruning, under the key). None if there is none."""
    if first is None:
        return None
    previous = _chain_of(first).get("previous")
    candidates = [
        anchor
        for anchor in anchors
        if anchor.entry_id < first.pk and anchor.head == previous and anchor.number is not None
    ]
    if not candidates:
        return None
    checkpoint_type = ContentType.objects.get_for_model(AuditCheckpoint)
    for anchor in sorted(candidates, key=lambda anchor: -anchor.entry_id):
        named = (
            LogEntry.objects.filter(
                content_type=checkpoint_type,
                object_pk=str(anchor.number),
                additional_data__event=PRUNED,
                additional_data__has_key="chain",
            )
            .values_list("changes", flat=True)
            .first()
        )
        if named and _through(named) == anchor.entry_id:
            return anchor
    return None


def _through(changes: Any) -> int | None:
    if isinstance(changes, str):  # auditlog may keep its changes as text
        changes = json.loads(changes)
    try:
        return int(changes["through_entry"])
    except (KeyError, TypeError, ValueError):
        return None


def _chain_of(entry: LogEntry) -> dict[str, Any]:
    return (entry.additional_data or {}).get("chain", {})


def _chained_entries() -> Any:
    return LogEntry.objects.filter(additional_data__has_key="chain").order_by("id")


def _stored_hash(entry: LogEntry) -> str | None:
    return (entry.additional_data or {}).get("chain", {}).get("hash")


def _fits(entry: LogEntry, previous: str, expected: str) -> bool:
    chain = entry.additional_data["chain"]
    return chain.get("previous") == previous and chain.get("hash") == expected


def _newest_holding(
    anchors: list[Checkpoint], seen: dict[int, tuple[str, int]]
) -> Checkpoint | None:
    holding = None
    for anchor in anchors:
        if seen.get(anchor.entry_id) != (anchor.head, anchor.entries):
            break
        holding = anchor
    return holding


def _misfit(entry: LogEntry, holding: Checkpoint | None) -> str:
    event = (entry.additional_data or {}).get("event")
    return (
        f"Audit entry {entry.pk} ({entry.timestamp:%Y-%m-%d %H:%M:%S}, {event} on "
        f"{entry.object_repr}) does not fit the chain: it, or an entry before it, was "
        f"changed or deleted.{_since(holding)}"
    )


def _since(holding: Checkpoint | None) -> str:
    if holding is None:
        return " No earlier checkpoint still holds."
    return (
        f" The chain still matches {holding.label} ({holding.entries} entries, up to "
        f"entry {holding.entry_id}): what changed lies after it."
    )


def _forged(anchor: Checkpoint) -> str:
    return (
        f"{anchor.label[0].upper()}{anchor.label[1:]} is not signed with the audit key: "
        "it was forged or altered, or the key has changed since it was written."
    )


# ---------------------------------------------------------------------------
# The upgrade from the unkeyed chain
# ---------------------------------------------------------------------------


def rekey_unkeyed_chain(*, log_entries: Any, now: datetime) -> int:
    """Re-hash with the key the entries written before the chain was keyed; return how many.

    Run once, by the upgrade's data migration (`log_entries` is its LogEntry
    model). Each entry is re-hashed only while the chain it was written in
    still holds, so the upgrade cannot launder an earlier edit: from the first
    entry that did not fit, entries keep their old hashes and `verify_audit`
    names that entry as it did before. An entry written by the new code before
    the migration ran (keyed already) is re-linked too. Each re-hashed entry
    says so, with the time, in `chain["rekeyed"]`.
    """
    key = chain_key()
    stored_previous = GENESIS  # the previous entry's hash as it was stored
    new_previous = GENESIS  # the previous entry's hash once re-keyed
    count = 0
    entries = log_entries.objects.filter(additional_data__has_key="chain").order_by("id")
    for entry in entries.iterator(chunk_size=1000):
        chain = entry.additional_data["chain"]
        content = _content_of(entry, key=key)
        if chain.get("previous") != stored_previous or chain.get("hash") not in (
            unkeyed_entry_hash(stored_previous, content),
            entry_hash(stored_previous, content, key=key),
        ):
            break
        new_hash = entry_hash(new_previous, content, key=key)
        stored_previous = chain["hash"]
        entry.additional_data["chain"] = {
            "previous": new_previous,
            "hash": new_hash,
            "rekeyed": now.isoformat(),
        }
        entry.save(update_fields=["additional_data"])
        new_previous = new_hash
        count += 1
    return count


def trail(task: Any) -> list[LogEntry]:
    """Return a task's audit entries, oldest first, with their actors."""
    return list(
        LogEntry.objects.get_for_object(task).select_related("actor").order_by("timestamp", "id")
    )
