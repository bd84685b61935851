"""The audit trail of human tasks, for operators and auditors: a keyed hash chain of entries.

Every use case writes here; nothing here imports the use cases or the pages, only the
domain (`approvals.models`). The chain itself, its checkpoints and its verification
live in `approvals.audit.chain`, the export of entries in `approvals.audit.export`;
the names below are their public face.

The names are imported when first used (PEP 562), not when the package is: the
offline verifier of an export (`python -m approvals.audit.verify_export`) imports
this package and must run where Django is neither configured nor installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from approvals.audit.chain import (
        SYSTEM_USERNAME,
        AuditChainBroken,
        ChainReport,
        Checkpoint,
        CheckpointFileError,
        chain_key,
        exported_checkpoints,
        key_source,
        record,
        record_account_sync,
        record_attachment,
        record_erasure,
        record_lockout,
        record_unlock,
        rekey_unkeyed_chain,
        stored_checkpoints,
        system_actor,
        trail,
        verify_audit_chain,
        write_checkpoint,
    )
    from approvals.audit.export import (
        EXPORT_FORMATS,
        AuditExport,
        ExportFilterError,
        ExportFilters,
        start_export,
    )
    from approvals.audit.hashing import GENESIS

_HOMES = {
    "GENESIS": "approvals.audit.hashing",
    **dict.fromkeys(
        [
            "SYSTEM_USERNAME",
            "AuditChainBroken",
            "ChainReport",
            "Checkpoint",
            "CheckpointFileError",
            "chain_key",
            "exported_checkpoints",
            "key_source",
            "record",
            "record_account_sync",
            "record_attachment",
            "record_erasure",
            "record_lockout",
            "record_unlock",
            "rekey_unkeyed_chain",
            "stored_checkpoints",
            "system_actor",
            "trail",
            "verify_audit_chain",
            "write_checkpoint",
        ],
        "approvals.audit.chain",
    ),
    **dict.fromkeys(
        ["EXPORT_FORMATS", "AuditExport", "ExportFilterError", "ExportFilters", "start_export"],
        "approvals.audit.export",
    ),
}

__all__ = [
    "EXPORT_FORMATS",
    "GENESIS",
    "SYSTEM_USERNAME",
    "AuditChainBroken",
    "AuditExport",
    "ChainReport",
    "Checkpoint",
    "CheckpointFileError",
    "ExportFilterError",
    "ExportFilters",
    "chain_key",
    "exported_checkpoints",
    "key_source",
    "record",
    "record_account_sync",
    "record_attachment",
    "record_erasure",
    "record_lockout",
    "record_unlock",
    "rekey_unkeyed_chain",
    "start_export",
    "stored_checkpoints",
    "system_actor",
    "trail",
    "verify_audit_chain",
    "write_checkpoint",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # found once; later lookups never come here
    return value
