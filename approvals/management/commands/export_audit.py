"""Export audit entries with their chain values, as CSV or NDJSON, for offline verification."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from approvals import audit


class Command(BaseCommand):
    help = (
        "Stream the audit entries the filters select, oldest first, each with its chain "
        "values, then a count, every line sealed with the audit key; the file starts with "
        "the signed checkpoint of the chain's head (written now if the newest does not name "
        "it). Verify it anywhere with `python -m approvals.audit.verify_export FILE KEYFILE`."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--from",
            dest="start",
            metavar="WHEN",
            help="Entries at or after this date (midnight) or ISO 8601 date and time; "
            "without an offset, in TIME_ZONE.",
        )
        parser.add_argument(
            "--to",
            dest="end",
            metavar="WHEN",
            help="Entries before this date (midnight) or date and time (not included): "
            "--from 2025-01-01 --to 2025-02-01 is January.",
        )
        parser.add_argument(
            "--type",
            dest="workflow_type",
            metavar="TYPE",
            help="Only entries about runs of this workflow type, or their human tasks.",
        )
        parser.add_argument(
            "--format", choices=audit.EXPORT_FORMATS, default="csv", help="Default: csv."
        )
        parser.add_argument(
            "--output",
            metavar="FILE",
            help="Write here (the file appears only once whole) instead of to stdout.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            filters = audit.ExportFilters.parse(
                start=options["start"], end=options["end"], workflow_type=options["workflow_type"]
            )
            export = audit.start_export(
                filters=filters, format=options["format"], now=timezone.now()
            )
        except audit.ExportFilterError as error:
            raise CommandError(str(error)) from None
        except audit.AuditChainBroken as error:
            raise CommandError(f"Nothing was exported. {error}") from None
        except OSError as error:
            raise CommandError(
                f"Nothing was exported: cannot write the checkpoint to {error.filename} "
                f"({error.strerror})."
            ) from None
        output = options["output"]
        if output:
            self._write_file(export.chunks(), Path(output))
        else:
            for chunk in export.chunks():
                self.stdout.write(chunk, ending="")
            self.stdout.flush()
        where = output or "stdout"
        checkpoint = export.checkpoint
        anchored = (
            f"up to {checkpoint.label} (entry {checkpoint.entry_id})"
            if checkpoint
            else "(the audit log is empty)"
        )
        self.stderr.write(f"Exported {export.entries:,} entries to {where}, {anchored}.")
        if not settings.BATON_AUDIT_KEY:
            self.stderr.write(
                "BATON_AUDIT_KEY is not set: the export is sealed with a key derived from "
                "DJANGO_SECRET_KEY, which cannot be handed to verify_export. Set "
                "BATON_AUDIT_KEY to verify exports offline."
            )

    def _write_file(self, chunks: Iterable[str], path: Path) -> None:
        partial = path.with_name(path.name + ".partial")
        try:
            with open(partial, "w", encoding="utf-8", newline="") as file:
                for chunk in chunks:
                    file.write(chunk)
                file.flush()
                os.fsync(file.fileno())
            os.replace(partial, path)
        except OSError as error:
            partial.unlink(missing_ok=True)
            raise CommandError(
                f"The export was not written: cannot write {error.filename} ({error.strerror})."
            ) from None
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
