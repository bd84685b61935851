"""The audit trail of human tasks, for operators and auditors: a keyed hash chain of entries.

Every use case writes here; nothing here imports the use cases or the pages, only the
domain (`approvals.models`). The chain itself, its checkpoints and its verification
live in `approvals.audit.chain`; the names below are its public face.
"""

from approvals.audit.chain import (
    GENESIS,
    SYSTEM_USERNAME,
    AuditChainBroken,
    ChainReport,
    Checkpoint,
    CheckpointFileError,
    chain_key,
    exported_checkpoints,
    key_source,
    record,
    record_lockout,
    record_unlock,
    rekey_unkeyed_chain,
    stored_checkpoints,
    system_actor,
    trail,
    verify_audit_chain,
    write_checkpoint,
)

__all__ = [
    "GENESIS",
    "SYSTEM_USERNAME",
    "AuditChainBroken",
    "ChainReport",
    "Checkpoint",
    "CheckpointFileError",
    "chain_key",
    "exported_checkpoints",
    "key_source",
    "record",
    "record_lockout",
    "record_unlock",
    "rekey_unkeyed_chain",
    "stored_checkpoints",
    "system_actor",
    "trail",
    "verify_audit_chain",
    "write_checkpoint",
]
