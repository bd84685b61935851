"""Anchor the audit chain's head: a signed checkpoint, saved and exported as a JSON line."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from approvals import audit


class Command(BaseCommand):
    help = (
        "Verify the audit entries since the last checkpoint, then save a signed checkpoint of "
        "the chain's head and print it as one JSON line (appended to --export, or to "
        "BATON_AUDIT_CHECKPOINT_FILE, if given). Keep those lines where the database's "
        "writers cannot change them; verify_audit --checkpoints reads them back."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--export",
            metavar="PATH",
            help="Append the checkpoint's JSON line to this file.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            checkpoint = audit.write_checkpoint(now=timezone.now(), export_to=options["export"])
        except audit.AuditChainBroken as error:
            raise CommandError(f"Nothing was anchored. {error}") from None
        except OSError as error:
            raise CommandError(
                f"Nothing was anchored: cannot write {error.filename} ({error.strerror})."
            ) from None
        if checkpoint is None:
            self.stderr.write("The audit log has no entry yet: nothing to anchor.")
            return
        self.stdout.write(checkpoint.line())
