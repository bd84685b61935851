"""Rewrite every live task's inbox entries from the task itself (human_tasks.inbox_entries).

An entry carries what its task's row shows, written whenever the task changes. An entry
written by processes of an earlier release during a rolling upgrade (after `migrate`,
before the last of them stopped) lacks those values until its task next changes; this
puts every live task's entries in step now, with the running code's one rule.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from approvals.human_tasks import inbox_entries


class Command(BaseCommand):
    help = (
        "Rewrite the inbox entries of every open, claimed or delegated task from the task "
        "itself, a batch of tasks at a time, each batch locked as the task services lock "
        "them. Run it after a rolling upgrade; running it again changes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch", type=int, default=500, help="Tasks rewritten per transaction (500)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        count = inbox_entries.refresh_all(batch=max(1, options["batch"]))
        self.stdout.write(f"Rewrote the inbox entries of {count} live task(s).")
