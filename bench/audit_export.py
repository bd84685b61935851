"""The audit export's memory with few entries and with many (1M at full size): flat if the
export streams.

Entries are seeded in bulk (PostgreSQL COPY, a valid keyed chain computed in Python,
never the ORM one row at a time), then anchored by a signed checkpoint written beside
them, as `audit_checkpoint` would. Each size is exported twice:

- by `manage.py export_audit --format csv --output FILE` in a child process, whose
  peak resident memory is read from `wait4` (ru_maxrss): what an operator's
  process costs, Django and the interpreter included;
- in this process, through `start_export(...).chunks()`, with tracemalloc tracing:
  the peak of the Python heap the export itself allocates.

The few entries are seeded first and measured, then the rest appended to the same
chain and measured again: the ratios compare one export with another, in one database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.utils import timezone

from approvals.audit import ExportFilters, chain_key, hashing, start_export
from approvals.models import AuditCheckpoint, HumanTask
from bench.processes import ROOT
from bench.profiles import Profile
from bench.report import Result

START = datetime(2025, 1, 1, tzinfo=UTC)
OBJECTS = 1000  # entries are spread over this many (absent) human tasks

_COPY = (
    "COPY auditlog_logentry (content_type_id, object_pk, object_repr, action, changes_text, "
    "changes, remote_addr, timestamp, additional_data) FROM STDIN"
)


class Seeder:
    """Append valid chained entries in bulk, and anchor the chain's head."""

    def __init__(self) -> None:
        self.key = chain_key()
        self.content_type = ContentType.objects.get_for_model(HumanTask).pk
        self.objects = [str(uuid.uuid4()) for _ in range(OBJECTS)]
        self.previous = hashing.GENESIS
        self.count = 0

    def append(self, entries: int) -> None:
        with connection.cursor() as cursor, cursor.cursor.copy(_COPY) as copy:
            for _ in range(entries):
                copy.write_row(self._row())

    def _row(self) -> tuple:
        number = self.count
        at = (START + timedelta(seconds=number)).isoformat()
        comment = f"seeded entry {number}"
        changes = {"note": ["", comment]}
        content = hashing.entry_content(
            content_type=self.content_type,
            object_pk=self.objects[number % OBJECTS],
            event="commented",
            actor=None,
            channel="inbox",
            comment=comment,
            remote_addr="10.0.0.7",
            changes=changes,
            timestamp=at,
        )
        digest = hashing.entry_hash(self.previous, content, key=self.key)
        data = {
            "event": "commented",
            "channel": "inbox",
            "comment": comment,
            "chain": {"previous": self.previous, "hash": digest},
        }
        self.previous, self.count = digest, number + 1
        return (
            self.content_type,
            content["object_pk"],
            f"Seeded task {number % OBJECTS}",
            1,
            "",
            json.dumps(changes),
            "10.0.0.7",
            at,
            json.dumps(data),
        )

    def anchor(self) -> None:
        with connection.cursor() as cursor:
            # Statistics, as autovacuum would gather after a bulk load: without them the
            # planner reads a page's whole id range and sorts it instead of walking the
            # primary key to its LIMIT, and every page costs what the rest of the log does.
            cursor.execute("ANALYZE auditlog_logentry")
            cursor.execute("SELECT max(id) FROM auditlog_logentry")
            (head_id,) = cursor.fetchone()
        at = timezone.now().astimezone(UTC)
        payload = hashing.checkpoint_payload(
            at=at.isoformat(), entry=head_id, entries=self.count, head=self.previous
        )
        AuditCheckpoint.objects.create(
            created_at=at,
            entry_id=head_id,
            entries=self.count,
            head=self.previous,
            signature=hashing.checkpoint_signature(payload, key=self.key),
        )


def _child_peak(output: Path) -> tuple[float, float]:
    """Export everything in a child process; return its peak RSS (MB) and its seconds."""
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "manage.py", "export_audit", "--format", "csv", "--output", str(output)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.monotonic() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        error = child.stderr.read().decode(errors="replace") if child.stderr else ""
        raise RuntimeError(f"export_audit failed (exit {child.returncode}): {error[-2000:]}")
    if child.stderr:
        child.stderr.close()
    return usage.ru_maxrss / 1024, seconds  # Linux gives kilobytes


def _heap_peak() -> tuple[float, int]:
    """Export everything in this process under tracemalloc; return the peak (MB) and the
    number of entries written."""
    export = start_export(filters=ExportFilters(), format="csv", now=timezone.now())
    tracemalloc.start()
    try:
        for _chunk in export.chunks():
            pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / 2**20, export.entries


def _measure(seeder: Seeder, folder: Path, label: str) -> dict[str, float]:
    rss, seconds = _child_peak(folder / f"{label}.csv")
    heap, written = _heap_peak()
    if written != seeder.count:
        raise RuntimeError(f"the export wrote {written} entries of {seeder.count}")
    size = (folder / f"{label}.csv").stat().st_size / 2**20
    return {"rss": rss, "seconds": seconds, "heap": heap, "entries": written, "file_mb": size}


def run(*, profile: Profile) -> list[Result]:
    seeder = Seeder()
    with tempfile.TemporaryDirectory(prefix="baton-audit-bench-") as folder:
        seeder.append(profile.audit_small)
        seeder.anchor()
        few = _measure(seeder, Path(folder), "few")
        seeder.append(profile.audit_large - profile.audit_small)
        seeder.anchor()
        many = _measure(seeder, Path(folder), "many")
    note = (
        f"{many['entries']:,} vs {few['entries']:,} entries seeded by COPY, exported as CSV "
        f"({many['file_mb']:,.0f} MB vs {few['file_mb']:,.1f} MB)"
    )
    return [
        Result(
            "audit_export_rss_mb",
            round(many["rss"], 1),
            round(few["rss"], 1),
            note=f"{note}; peak RSS of manage.py export_audit (wait4 ru_maxrss)",
            extra={"few": few, "many": many},
        ),
        Result(
            "audit_export_heap_mb",
            round(many["heap"], 2),
            round(few["heap"], 2),
            note=f"{note}; tracemalloc peak while iterating start_export(...).chunks()",
        ),
        Result(
            "audit_export_per_s",
            round(many["entries"] / many["seconds"]),
            round(few["entries"] / few["seconds"]),
            note="entries ÷ wall time of the export_audit process, start-up included",
        ),
    ]
