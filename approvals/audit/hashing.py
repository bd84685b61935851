"""The bytes the audit chain signs: an entry's canonical content and its HMAC, and a
checkpoint's signature.

Pure Python (hashlib, hmac, json), free of Django, so the chain that is written and
verified in the database (`approvals.audit.chain`) and the offline check of an
exported file (`approvals.audit.verify_export`, run by an auditor anywhere) compute
the very same bytes from the very same functions.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

# The `previous` hash of the chain's first entry.
GENESIS = "0" * 64
# What an erased comment reads (workflows.personal.TOMBSTONE's words).
ERASED_COMMENT = "[erased]"


def entry_content(
    *,
    content_type: int,
    object_pk: str,
    event: str | None,
    actor: int | None,
    channel: str | None,
    comment: str | None,
    remote_addr: str | None,
    changes: dict[str, Any],
    timestamp: str,
) -> dict[str, Any]:
    """Return what an entry's hash covers: who did what to which object, how, from
    where and when (`timestamp` in ISO 8601, as the database gives it back)."""
    return {
        "content_type": content_type,
        "object_pk": object_pk,
        "event": event,
        "actor": actor,
        "channel": channel,
        "comment": comment,
        "remote_addr": remote_addr,
        "changes": changes,
        "timestamp": timestamp,
    }


def comment_digest(comment: str, *, key: bytes) -> str:
    """Return what the chain covers of a comment: its HMAC-SHA256 under `key`, so the words
    themselves can be erased later (approvals.privacy) and the chain still verifies."""
    digest = hmac.new(key, b"baton.audit-comment\n" + comment.encode(), hashlib.sha256)
    return "hmac-sha256:" + digest.hexdigest()


def chained_comment(comment: str | None, digest: str | None, *, key: bytes) -> str | None:
    """Return the comment as an entry's hash covers it.

    An entry written before comments were digested carries none and covers its words.
    Otherwise the digest stands for words that still match it, or that were erased; words
    rewritten any other way are covered as they now read, so the entry no longer fits."""
    if digest is None:
        return comment
    if comment == ERASED_COMMENT or (
        comment is not None and hmac.compare_digest(comment_digest(comment, key=key), digest)
    ):
        return digest
    return comment


def canonical(previous_hash: str, content: dict[str, Any]) -> bytes:
    """Return the bytes an entry's HMAC is taken over: the previous hash, then its content
    as compact JSON with sorted keys."""
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return f"{previous_hash}\n{text}".encode()


def entry_hash(previous_hash: str, content: dict[str, Any], *, key: bytes) -> str:
    """Return an entry's chain hash: HMAC-SHA256 under `key`, in hex."""
    return hmac.new(key, canonical(previous_hash, content), hashlib.sha256).hexdigest()


def unkeyed_entry_hash(previous_hash: str, content: dict[str, Any]) -> str:
    """Return the hash entries carried before the chain was keyed (read only by the upgrade)."""
    return hashlib.sha256(canonical(previous_hash, content)).hexdigest()


def checkpoint_payload(*, at: str, entry: int, entries: int, head: str) -> dict[str, Any]:
    """Return what a checkpoint's signature covers: when, the newest entry, how many
    entries up to it, and its hash."""
    return {"at": at, "entry": entry, "entries": entries, "head": head}


def checkpoint_signature(payload: dict[str, Any], *, key: bytes) -> str:
    """Return a checkpoint's signature: HMAC-SHA256 of its payload under `key`, in hex."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, f"baton.audit-checkpoint\n{text}".encode(), hashlib.sha256).hexdigest()
