"""Drop the audit log's months older than an age, anchoring the chain first."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from approvals import audit
from approvals.audit import retention
from workflows.retention import parse_age


class Command(BaseCommand):
    help = (
        "Drop the audit log's months wholly older than --older-than (PostgreSQL only), after "
        "verifying the entries that go and anchoring the chain at the last of them with a "
        "signed checkpoint, so verify_audit still verifies what stays."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than", required=True, metavar="AGE", help="such as 2555d (seven years)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            age = parse_age(options["older_than"])
        except ValueError as error:
            raise CommandError(f"--older-than: {error}.") from None
        now = timezone.now()
        try:
            pruned = retention.prune_audit(before=now - age, now=now)
        except audit.AuditChainBroken as error:
            raise CommandError(f"Nothing was pruned: {error}") from None
        if pruned.checkpoint is None and not pruned.months:
            self.stdout.write("Nothing to prune.")
            return
        anchored = f", anchored by {pruned.checkpoint.label}" if pruned.checkpoint else ""
        self.stdout.write(
            f"Pruned {pruned.entries} audit entries in {len(pruned.months)} month(s){anchored}."
        )
