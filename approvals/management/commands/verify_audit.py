"""Check the audit trail's keyed hash chain and name the first entry that no longer fits."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from approvals.audit import key_source, verify_audit_chain


class Command(BaseCommand):
    help = "Verify the audit log's hash chain; exit non-zero naming the first broken entry."

    def handle(self, *args: Any, **options: Any) -> None:
        broken = verify_audit_chain()
        if broken is not None:
            raise CommandError(
                f"Audit entry {broken.pk} ({broken.timestamp:%Y-%m-%d %H:%M:%S}, "
                f"{broken.additional_data.get('event')} on {broken.object_repr}) does not fit "
                "the chain: it, or an entry before it, was changed or deleted."
            )
        self.stdout.write(
            self.style.SUCCESS(f"The audit chain is intact (keyed with {key_source()}).")
        )
