"""Check the audit trail's keyed hash chain against its checkpoints, and say what no longer fits."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals import audit
from approvals.human_tasks import attachments


class Command(BaseCommand):
    help = (
        "Verify the audit log's keyed hash chain and its checkpoints (those in the database, "
        "and those exported to BATON_AUDIT_CHECKPOINT_FILE or --checkpoints); exit non-zero "
        "naming the first entry that does not fit, or the checkpoint whose entries were "
        "deleted or rewritten, and since which checkpoint the chain still holds."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--checkpoints",
            metavar="PATH",
            action="append",
            default=[],
            help="A file of exported checkpoints (JSON lines); may be given more than once.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        paths = options["checkpoints"] or (
            [settings.BATON_AUDIT_CHECKPOINT_FILE] if settings.BATON_AUDIT_CHECKPOINT_FILE else []
        )
        checkpoints = audit.stored_checkpoints()
        try:
            for path in paths:
                checkpoints += audit.exported_checkpoints(path)
        except audit.CheckpointFileError as error:
            raise CommandError(str(error)) from None
        report = audit.verify_audit_chain(checkpoints=checkpoints)
        if not report.intact:
            raise CommandError(report.problem)
        swapped = [
            f"Attachment {found.attachment.pk} (“{found.attachment.name}”, request "
            f"{found.attachment.run_id}) {found.problem}."
            for found in attachments.verify_attachments()
        ]
        if swapped:
            raise CommandError(
                "The audit chain is intact, but not every attached file is as it was "
                "attached:\n" + "\n".join(swapped)
            )
        self.stdout.write(
            self.style.SUCCESS(
                f"The audit chain is intact: {report.entries} entries, keyed with "
                f"{audit.key_source()}."
            )
        )
        if report.pruned_through is not None:
            base = report.pruned_through
            self.stdout.write(
                f"Entries up to entry {base.entry_id} were pruned; verified from "
                f"{base.label}, which anchored them ({base.entries} entries)."
            )
        if report.holding is None:
            self.stdout.write(
                "No checkpoint yet, so deleting the newest entries would not show: "
                "run `manage.py audit_checkpoint` (beat runs it periodically)."
            )
        else:
            self.stdout.write(
                f"{report.checkpoints} checkpoint(s) hold; the newest, {report.holding.label}, "
                f"covers {report.holding.entries} entries up to entry "
                f"{report.holding.entry_id}. Entries after it rest on the chain alone."
            )
