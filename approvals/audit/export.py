"""Export audit entries with their chain values, streamed, for auditors to verify offline.

`start_export` reads the filters, anchors the chain's head with a signed checkpoint
(the newest one if it names the head already, else a new one, as beat would write),
and returns an `AuditExport` whose `chunks()` yields the file's text a page at a time:
the entries up to that checkpoint's entry, oldest first, read by keyset pages of
`chunk_size` rows (one query each, in primary-key order), so memory stays flat however
many entries there are and the export works behind PgBouncer in transaction mode,
where server-side cursors do not. The file's layout and seals are
`approvals.audit.export_file`'s; `python -m approvals.audit.verify_export` checks it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Any

from auditlog.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db.models import Case, CharField, OuterRef, QuerySet, Subquery, UUIDField, When
from django.db.models.functions import Cast
from django.utils import timezone
from django.utils.translation import gettext as _

from approvals.audit.chain import Checkpoint, chain_key, write_checkpoint
from approvals.audit.export_file import FORMATS, VERSION, ExportWriter
from approvals.models import AuditCheckpoint, HumanTask
from workflows.models import WorkflowRun

CHUNK_SIZE = 2000
EXPORT_FORMATS = FORMATS
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "ndjson": "application/x-ndjson"}


class ExportFilterError(ValueError):
    """A filter's value cannot be used; the message names the filter and says why."""


@dataclass(frozen=True)
class ExportFilters:
    """Which entries to export: from `start` (inclusive) to `end` (exclusive), and of
    runs of one workflow type. None: no bound."""

    start: datetime | None = None
    end: datetime | None = None
    workflow_type: str | None = None

    @classmethod
    def parse(
        cls, *, start: str | None, end: str | None, workflow_type: str | None
    ) -> ExportFilters:
        """Read the filters as people type them; raise ExportFilterError saying which one
        is wrong. A date is midnight at its start, in TIME_ZONE; a date and time without an
        offset is in TIME_ZONE too."""
        filters = cls(
            start=_moment(start, name="from"),
            end=_moment(end, name="to"),
            workflow_type=(workflow_type or "").strip() or None,
        )
        if filters.start and filters.end and filters.start >= filters.end:
            raise ExportFilterError(
                _(
                    "“from” (%(start)s) must come before “to” (%(end)s):"
                    " “from” is included, “to” is not."
                )
                % {"start": filters.start.isoformat(), "end": filters.end.isoformat()}
            )
        return filters

    def as_dict(self) -> dict[str, str | None]:
        return {
            "from": self.start.isoformat() if self.start else None,
            "to": self.end.isoformat() if self.end else None,
            "type": self.workflow_type,
        }


def _moment(text: str | None, *, name: str) -> datetime | None:
    text = (text or "").strip()
    if not text:
        return None
    try:
        if len(text) == 10:
            moment = datetime.combine(date.fromisoformat(text), time())
        else:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ExportFilterError(
            _(
                "“%(name)s” is %(text)s: give a date (2025-01-31) or an ISO 8601 date and time "
                "(2025-01-31T09:30, 2025-01-31T09:30+01:00)."
            )
            % {"name": name, "text": repr(text)}
        ) from None
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return moment


@dataclass
class AuditExport:
    """An export ready to stream: its filters, format, checkpoint and the entry it ends at."""

    filters: ExportFilters
    format: str
    exported_at: datetime
    checkpoint: Checkpoint | None
    chunk_size: int = CHUNK_SIZE
    entries: int = 0  # written so far

    @property
    def filename(self) -> str:
        return f"baton-audit-{self.exported_at:%Y%m%d-%H%M%S}.{self.format}"

    @property
    def media_type(self) -> str:
        return MEDIA_TYPES[self.format]

    def chunks(self) -> Iterator[str]:
        """Yield the file's text: the export record, then a page of entries at a time,
        then the end record."""
        writer = ExportWriter(format=self.format, key=chain_key())
        checkpoint = self.checkpoint
        anchor = None
        if checkpoint is not None:
            anchor = _fields(_selected(ExportFilters()).get(pk=checkpoint.entry_id))
        yield writer.start(
            {
                "version": VERSION,
                "exported_at": self.exported_at.isoformat(),
                "filters": self.filters.as_dict(),
                "through_entry": checkpoint.entry_id if checkpoint else None,
                "checkpoint": _checkpoint_fields(checkpoint) if checkpoint else None,
                "anchor": anchor,
            }
        )
        if checkpoint is not None:
            selected = _selected(self.filters).filter(pk__lte=checkpoint.entry_id)
            last_id = 0
            while True:
                page = list(selected.filter(pk__gt=last_id)[: self.chunk_size])
                if not page:
                    break
                yield "".join(writer.entry(_fields(row)) for row in page)
                self.entries = writer.entries
                last_id = page[-1]["id"]
                if len(page) < self.chunk_size:
                    break
        yield writer.end()


def start_export(
    *, filters: ExportFilters, format: str, now: datetime, chunk_size: int = CHUNK_SIZE
) -> AuditExport:
    """Anchor the chain's head and return the export of the entries `filters` select, up
    to it. Raise ExportFilterError for an unknown format, and AuditChainBroken (from
    `write_checkpoint`) when the entries since the newest checkpoint do not verify."""
    if format not in FORMATS:
        raise ExportFilterError(
            _("“format” is %(format)s: choose %(formats)s.")
            % {"format": repr(format), "formats": " or ".join(FORMATS)}
        )
    return AuditExport(
        filters=filters,
        format=format,
        exported_at=now,
        checkpoint=_head_checkpoint(now=now),
        chunk_size=chunk_size,
    )


def _head_checkpoint(*, now: datetime) -> Checkpoint | None:
    """Return a signed checkpoint naming the chain's newest entry: the newest stored one
    if it does, else a new one. None when the log has no chained entry."""
    head = _entries().order_by("-id").values_list("id", flat=True).first()
    if head is None:
        return None
    newest = AuditCheckpoint.objects.order_by("-entry_id", "-id").first()
    if newest is not None and newest.entry_id == head:
        checkpoint = Checkpoint.of(newest)
        if checkpoint.is_signed_with(chain_key()):
            return checkpoint
    return write_checkpoint(now=now)


def _entries() -> QuerySet[LogEntry]:
    return LogEntry.objects.filter(additional_data__has_key="chain")


def _selected(filters: ExportFilters) -> QuerySet[Any]:
    """Return the chained entries `filters` select, as plain values, oldest first."""
    entries = _entries().annotate(workflow_type=_workflow_type())
    if filters.start is not None:
        entries = entries.filter(timestamp__gte=filters.start)
    if filters.end is not None:
        entries = entries.filter(timestamp__lt=filters.end)
    if filters.workflow_type is not None:
        entries = entries.filter(workflow_type=filters.workflow_type)
    return entries.order_by("id").values(*_VALUES, "workflow_type")


_VALUES = (
    "id",
    "timestamp",
    "content_type_id",
    "object_pk",
    "object_repr",
    "actor_id",
    "actor__username",
    "remote_addr",
    "changes",
    "additional_data",
)


def _workflow_type() -> Case:
    """The workflow type of the run an entry is about: its human task's, or its run's.
    None for other entries (lockouts), and for runs pruned since (`prune_runs`)."""

    def type_of(model: Any) -> Subquery:
        pk = Cast(OuterRef("object_pk"), UUIDField())
        return Subquery(model.objects.filter(pk=pk).values("workflow_type")[:1])

    return Case(
        When(
            content_type_id=ContentType.objects.get_for_model(HumanTask).pk,
            then=type_of(HumanTask),
        ),
        When(
            content_type_id=ContentType.objects.get_for_model(WorkflowRun).pk,
            then=type_of(WorkflowRun),
        ),
        default=None,
        output_field=CharField(),
    )


def _fields(row: dict[str, Any]) -> dict[str, Any]:
    """Return an entry record's fields from a row of `_selected`."""
    data = row["additional_data"] or {}
    chain = data.get("chain") or {}
    content_type = ContentType.objects.get_for_id(row["content_type_id"])
    return {
        "id": row["id"],
        "timestamp": row["timestamp"].isoformat(),
        "workflow_type": row["workflow_type"],
        "object_type": f"{content_type.app_label}.{content_type.model}",
        "content_type": row["content_type_id"],
        "object_pk": row["object_pk"],
        "object_repr": row["object_repr"],
        "event": data.get("event"),
        "actor": row["actor_id"],
        "actor_username": row["actor__username"],
        "channel": data.get("channel"),
        "comment": data.get("comment"),
        "comment_digest": data.get("comment_digest"),
        "remote_addr": row["remote_addr"],
        "changes": row["changes"] or {},
        "previous": chain.get("previous"),
        "hash": chain.get("hash"),
    }


def _checkpoint_fields(checkpoint: Checkpoint) -> dict[str, Any]:
    return {
        "checkpoint": checkpoint.number,
        **checkpoint.payload(),
        "signature": checkpoint.signature,
    }
