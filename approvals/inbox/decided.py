"""The inbox's archive: the tasks a reviewer decided, newest decision first, paged by keyset.

A page is one short range of `task_decided_by_idx` (decider, decision time, id),
read backwards from the cursor, whatever the number of tasks or the depth of the
page; each row comes with its outcome and its run's state now (one join), and
the people it names (their usernames, in the same query).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db.models.fields.tuple_lookups import Tuple, TupleLessThan

from approvals.models import HumanTask
from approvals.states import TaskState
from workflows import replica
from workflows.cleaning import clean_datetime

TAB = "decided"
LABEL = "Decided by me"
PAGE_SIZE = 25
# Longer than any cursor `decided_by` gives out (about 90 characters).
MAX_CURSOR = 300


class BadCursor(ValueError):
    """A cursor `decided_by` did not give out, or one damaged on its way back."""


@dataclass(frozen=True)
class DecidedPage:
    # Each task's `run` is loaded (its state is the run's state now).
    tasks: list[HumanTask]
    next_cursor: str = ""
    cursor: str = ""


@replica.reads_replica
def decided_by(*, user: Any, cursor: str = "", limit: int = PAGE_SIZE) -> DecidedPage:
    """Return one page of the tasks `user` decided, newest decision first, after `cursor`;
    raise BadCursor if the cursor is not one this function gave out."""
    tasks = HumanTask.objects.filter(decided_by=user, state=TaskState.COMPLETED)
    after = _decode(cursor)
    if after is not None:
        # A row comparison, so the cursor is where the index scan starts (an OR of two
        # conditions would only filter what the scan reads); on the index's columns
        # after the decider, so PostgreSQL estimates it from the decision times.
        tasks = tasks.filter(TupleLessThan(Tuple("decided_at", "id"), after))
    page = list(
        tasks.select_related("run", "assignee", "owner", "substitute_for", "decided_by").order_by(
            "-decided_at", "-id"
        )[: limit + 1]
    )
    next_cursor = ""
    if len(page) > limit:
        page = page[:limit]
        last = page[-1]
        next_cursor = _encode([last.decided_at.isoformat(), str(last.pk)])
    return DecidedPage(tasks=page, next_cursor=next_cursor, cursor=cursor)


def _encode(value: list[str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


def _decode(cursor: str) -> tuple[Any, UUID] | None:
    """Read a cursor made by `decided_by` (None for the first page); raise BadCursor for
    any other text. Its time goes through workflows.cleaning."""
    if not cursor:
        return None
    if len(cursor) > MAX_CURSOR:  # also keeps json from recursing past Python's limit
        raise BadCursor(cursor[:MAX_CURSOR])
    try:
        decided_at, task_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return clean_datetime(decided_at), UUID(task_id)
    except (ValueError, TypeError, AttributeError):  # Refused is a ValueError
        raise BadCursor(cursor) from None
