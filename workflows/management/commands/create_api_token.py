"""Issue an API token for a user and print it (it is stored only as a digest)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from workflows.tokens import issue_token


class Command(BaseCommand):
    help = "Create an API token for USERNAME and print it once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="what the token is for")

    def handle(self, *args: Any, username: str, name: str, **options: Any) -> None:
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"There is no active user called {username!r}.")
        _, secret = issue_token(user=user, name=name)
        self.stdout.write(secret)
