"""Who acts: the one small value every use case of approvals is handed.

A page, the API, the admin or an email link builds it once from the request, so a use
case's signature says what it does, not where the person came from. The use case checks
whether this person may act; `Act` only carries who they are, through which channel,
from which address, why, when, and which version of a task they saw.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone


@dataclass(frozen=True)
class Act:
    """Who acts (`user`), through which channel, from where, why and when."""

    user: Any
    channel: str
    now: datetime = field(default_factory=timezone.now)
    remote_addr: str | None = None
    # Why, in the person's words, when the use case keeps a reason (the console's actions).
    reason: str = ""
    # The version of the task the person saw, so a decision on a changed task is refused.
    expected_version: int | None = None
