"""The operator a management command acts as (`--by USERNAME`), for the audit log."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

OPERATE = "workflows.operate_workflowrun"


def operator_named(username: str | None, *, what: str) -> Any:
    """Return the active operator `username` (None when no name is given: the audit
    entry then names no one); refuse, saying why, anyone else."""
    if username is None:
        return None
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise CommandError(f"No active user {username!r}.")
    if not user.has_perm(OPERATE):
        raise CommandError(f"{username} is not an operator: only operators may {what}.")
    return user
