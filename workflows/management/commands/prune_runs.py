"""Delete finished runs past an age, with their steps, events, signals and human tasks."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from workflows import retention


class Command(BaseCommand):
    help = (
        "Delete runs that finished (succeeded, failed, compensated or cancelled) more than "
        "--finished-before ago, with their steps, events, signals and human tasks, in batches. "
        "Live and dead-lettered runs are never deleted; the audit log is kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--finished-before",
            required=True,
            metavar="AGE",
            help="how long ago a run must have finished: 90d, 12h, 30m or 45s",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would be deleted; delete nothing"
        )
        parser.add_argument(
            "--batch", type=int, default=10_000, help="runs per transaction (default 10,000)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            age = retention.parse_age(options["finished_before"])
        except ValueError as error:
            raise CommandError(f"--finished-before: {error}.") from None
        if options["batch"] < 1:
            raise CommandError("--batch must be at least 1 run per transaction.")
        cutoff = timezone.now() - age
        if options["dry_run"]:
            report = retention.count_prunable(finished_before=cutoff)
            verb = "Would delete"
        else:
            report = retention.prune_runs(finished_before=cutoff, batch=options["batch"])
            verb = "Deleted"
        self.stdout.write(
            f"{verb} {report.count('runs')} runs that finished before "
            f"{cutoff:%Y-%m-%d %H:%M:%S %Z}, with {report.count('steps')} steps, "
            f"{report.count('events')} events, {report.count('signals')} signals and "
            f"{report.count('human tasks')} human tasks. The audit log is kept."
        )
