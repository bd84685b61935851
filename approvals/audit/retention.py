"""Audit retention: drop whole months of the audit log, anchored by a checkpoint first.

On PostgreSQL the audit entries are partitioned by month (workflows.partitions).
`prune_audit` drops the months wholly before a cutoff's month: it first verifies
the chain up to the last chained entry it drops and anchors it there with a
signed checkpoint (saved, and exported like every checkpoint), drops the
months, deletes the few entries numbered up to that one that lie in later
partitions (written in the last instant of a month, or caught by the default
partition), then appends a chained `audit_pruned` entry about the checkpoint.
`verify_audit` then starts from that checkpoint (see approvals.audit.chain), so
the chain still verifies, and a prefix deleted any other way still shows.

The chain's lock is held throughout, so no entry is appended meanwhile. SQLite
(the demo) does not partition: nothing is pruned there.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.db import connection, transaction

from approvals.audit import chain
from workflows import partitions

logger = logging.getLogger("baton.audit")

TABLE = "auditlog_logentry"


@dataclass(frozen=True)
class AuditPrune:
    """What `prune_audit` did: the months dropped, the entries gone, the anchoring checkpoint."""

    months: list[str]
    entries: int
    checkpoint: chain.Checkpoint | None


def prune_audit(
    *, before: datetime, now: datetime, export_to: str | Path | None = None
) -> AuditPrune:
    """Drop the audit log's months wholly before `before`'s month, after anchoring the chain.

    Raise chain.AuditChainBroken, dropping nothing, if the entries to go do not
    verify: a broken chain is never pruned out of sight.
    """
    if not partitions.is_partitioned(TABLE):
        return AuditPrune([], 0, None)
    first_kept = partitions.month_of(before)
    old = [month for month in partitions.months(TABLE) if month < first_kept]
    cut = datetime(first_kept.year, first_kept.month, 1, tzinfo=UTC)
    with transaction.atomic():
        chain.hold_chain_lock()
        last = (
            chain.chained_entries()
            .filter(timestamp__lt=cut)
            .order_by("-id")
            .values_list("pk", flat=True)
            .first()
        )
        checkpoint = None
        if last is not None:
            checkpoint = chain.write_checkpoint(now=now, export_to=export_to, upto=last)
        with connection.cursor() as cursor:
            cursor.execute(
                f'SELECT count(*) FROM "{TABLE}" WHERE timestamp < %s OR id <= %s',  # nosec B608
                [cut, last or 0],
            )
            entries = cursor.fetchone()[0]
            for month in old:
                partitions.drop_month(TABLE, month)
            cursor.execute(
                f'DELETE FROM "{TABLE}" WHERE timestamp < %s OR id <= %s',  # nosec B608
                [cut, last or 0],
            )
        if checkpoint is not None:
            chain.record_pruning(checkpoint=checkpoint, before=cut, now=now)
    names = [partitions.partition_name(TABLE, month) for month in old]
    logger.info("audit.pruned", extra={"months": names, "entries": entries})
    return AuditPrune(names, entries, checkpoint)
