"""Erase a person's or a run's personal data (approvals.privacy), writing it to the audit chain."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from approvals import privacy


class Command(BaseCommand):
    help = (
        "Replace the personal data of a person's finished requests (--person USERNAME: the "
        "runs they started or that name them as requester), or of one finished run (--run "
        "ID), with a tombstone wherever Baton keeps it: inputs, results, form values, "
        "comments, notifications, webhook messages, inbox rows and attached files. Live "
        "runs are left (erase them once they end). Who erases (--by) is required and "
        "written to the audit chain, which still verifies afterwards. Safe to run again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        whose = parser.add_mutually_exclusive_group(required=True)
        whose.add_argument("--person", metavar="USERNAME", help="Whose requests to erase.")
        whose.add_argument("--run", metavar="RUN_ID", help="The one finished run to erase.")
        parser.add_argument("--by", help="Your username: who erases (required).")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["by"]:
            raise CommandError("Nothing was erased. Say who you are with --by USERNAME.")
        try:
            erasure = privacy.erase_personal_data(
                person=options["person"],
                run_id=options["run"],
                by=options["by"],
                now=timezone.now(),
            )
        except privacy.ErasureRefused as refused:
            raise CommandError(str(refused)) from None
        if erasure.runs:
            rows = ", ".join(f"{store} {count}" for store, count in sorted(erasure.rows.items()))
            self.stdout.write(
                f"Erased {erasure.values} personal value(s) in {len(erasure.runs)} run(s) "
                f"(rows changed: {rows}); the audit chain says so."
            )
        else:
            self.stdout.write("Nothing left to erase: it was erased already, or never held any.")
        for run_id in erasure.live:
            self.stderr.write(f"Left run {run_id}: it is still live; erase it once it has ended.")
