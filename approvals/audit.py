"""The audit trail: every action on a human task, as a django-auditlog entry in a keyed hash chain.

Entries are only ever created here, never updated or deleted. Each one carries,
in `additional_data["chain"]`, an HMAC-SHA256 of its own content and of the
entry before it, under a key kept outside the database (`chain_key`), so
`verify_audit_chain` can name the first entry that no longer fits: an edited or
deleted row breaks the chain from there on, and without the key nobody can
recompute the hashes after an edit.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime
from typing import Any

from auditlog.models import LogEntry
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.utils.crypto import salted_hmac

SYSTEM_USERNAME = "baton-system"
GENESIS = "0" * 64
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
    counted them; `description` names it in the trail.
    """
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
    if connection.vendor == "postgresql":
        # One writer at a time extends the chain; released at commit.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CHAIN_LOCK])
    previous = (
        LogEntry.objects.filter(additional_data__has_key="chain")
        .order_by("-id")
        .values_list("additional_data", flat=True)
        .first()
    )
    previous_hash = previous["chain"]["hash"] if previous else GENESIS
    content = {
        "content_type": ContentType.objects.get_for_model(subject).pk,
        "object_pk": str(subject.pk),
        "event": event,
        "actor": actor.pk if actor else None,
        "channel": channel,
        "comment": comment,
        "remote_addr": remote_addr,
        "changes": changes,
        "timestamp": now.isoformat(),
    }
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
            "chain": {
                "previous": previous_hash,
                "hash": _hash(previous_hash, content, key=chain_key()),
            },
        },
        **overrides,
    )


def _content_of(entry: LogEntry) -> dict[str, Any]:
    data = entry.additional_data or {}
    return {
        "content_type": entry.content_type_id,
        "object_pk": entry.object_pk,
        "event": data.get("event"),
        "actor": entry.actor_id,
        "channel": data.get("channel"),
        "comment": data.get("comment"),
        "remote_addr": entry.remote_addr,
        "changes": entry.changes or {},
        "timestamp": entry.timestamp.isoformat(),
    }


def _canonical(previous_hash: str, content: dict[str, Any]) -> bytes:
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return f"{previous_hash}\n{canonical}".encode()


def _hash(previous_hash: str, content: dict[str, Any], *, key: bytes) -> str:
    return hmac.new(key, _canonical(previous_hash, content), hashlib.sha256).hexdigest()


def _unkeyed_hash(previous_hash: str, content: dict[str, Any]) -> str:
    """The hash entries carried before the chain was keyed (read only by the upgrade)."""
    return hashlib.sha256(_canonical(previous_hash, content)).hexdigest()


def verify_audit_chain() -> LogEntry | None:
    """Return the first chained entry that no longer fits the chain, or None if all fit."""
    key = chain_key()
    previous_hash = GENESIS
    entries = LogEntry.objects.filter(additional_data__has_key="chain").order_by("id")
    for entry in entries.iterator(chunk_size=1000):
        chain = entry.additional_data["chain"]
        expected = _hash(previous_hash, _content_of(entry), key=key)
        if chain.get("previous") != previous_hash or chain.get("hash") != expected:
            return entry
        previous_hash = chain["hash"]
    return None


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
        content = _content_of(entry)
        if chain.get("previous") != stored_previous or chain.get("hash") not in (
            _unkeyed_hash(stored_previous, content),
            _hash(stored_previous, content, key=key),
        ):
            break
        new_hash = _hash(new_previous, content, key=key)
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
