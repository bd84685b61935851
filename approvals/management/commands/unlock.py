"""Lift a lockout (approvals.throttling), writing who did it and why to the audit chain."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from approvals import throttling


class Command(BaseCommand):
    help = (
        "Forget the failed attempts counted against an account (--username), an address "
        "(--address), an account at an address (both), or an API token (--token, its "
        "public prefix), so they may try again now. Who unlocks (--by) and why (--reason) "
        "are required and written to the audit chain. Use this rather than axes' own "
        "axes_reset_* commands, which leave no trace."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", help="The account whose failures to forget.")
        parser.add_argument("--address", help="The client address whose failures to forget.")
        parser.add_argument("--token", metavar="PREFIX", help="The API token's public prefix.")
        parser.add_argument("--by", help="Your username: who lifts the lockout (required).")
        parser.add_argument("--reason", help="Why, for the audit log (required).")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["by"]:
            raise CommandError("Nothing was unlocked. Say who you are with --by USERNAME.")
        try:
            cleared = throttling.unlock(
                username=options["username"],
                address=options["address"],
                token=options["token"],
                by=options["by"],
                reason=options["reason"] or "",
                now=timezone.now(),
            )
        except throttling.UnlockRefused as refused:
            raise CommandError(f"Nothing was unlocked. {refused}") from None
        self.stdout.write(
            f"Unlocked: cleared {cleared} failure counter(s); the audit log says why."
        )
