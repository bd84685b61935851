"""Print the demo services' ledger: one line (or JSON object) per effect."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from workflows.examples.models import ServiceEffect


class Command(BaseCommand):
    help = "Print every effect the demo services applied and every request they saw."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--run", help="only this run's effects (a run id)")
        parser.add_argument("--json", action="store_true", help="print a JSON array")

    def handle(self, *args: Any, **options: Any) -> None:
        effects = ServiceEffect.objects.all()
        if options["run"]:
            effects = effects.filter(run_id=options["run"])
        rows = [effect.as_dict() for effect in effects]
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        for row in rows:
            applied = row["applied_at"] or "not applied"
            self.stdout.write(
                f"{row['service']:<14} {row['action']:<8} {row['idempotency_key']:<60} "
                f"requests={row['requests_seen']} applied={applied}"
            )
