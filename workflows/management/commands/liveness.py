"""Say whether the sweep, or this host's beat, showed a heartbeat recently: for healthchecks."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from workflows import heartbeats
from workflows.beat import beat_heartbeat_name


class Command(BaseCommand):
    help = (
        "Exit 0 if the named heartbeat is recent, else exit 1 saying why. `sweep`: a sweep "
        "ran (beat sends them, a worker on baton.sweep runs them). `beat`: the beat on this "
        "host (or --hostname) ticked."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("what", choices=["sweep", "beat"], help="whose heartbeat to check")
        parser.add_argument("--hostname", default=None, help="the beat's host (default: this one)")
        parser.add_argument(
            "--max-age",
            type=float,
            default=None,
            help="seconds a heartbeat stays fresh (default: BATON_SWEEP_STALE_AFTER)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["what"] == "beat":
            name = beat_heartbeat_name(options["hostname"])
        else:
            name = heartbeats.SWEEP
        max_age = options["max_age"] or settings.BATON_SWEEP_STALE_AFTER
        now = timezone.now()
        last = heartbeats.last_seen(name=name)
        reason = heartbeats.why_stale(
            name=name, last=last, now=now, stale_after=timedelta(seconds=max_age)
        )
        if reason:
            raise CommandError(f"Not alive: {reason}.")
        assert last is not None
        self.stdout.write(f"Alive: the last {name} was {(now - last).total_seconds():.1f} s ago.")
