"""The inbox's archive: the tasks a reviewer decided, newest decision first, paged by keyset.

A page is one short range of `task_decided_by_idx` (decider, decision time, id),
read backwards from the cursor, whatever the number of tasks or the depth of the
page; each row comes with its outcome and its run's state now (one join), and
the people it names (their usernames, in the same query).

It takes the subset of the other tabs' filters that means something for decisions
made (`DecidedFilters`): the workflow type, the outcome, and text of the title. They
filter the rows as the index range is read, so a filtered page reads further down
the same range, never another plan.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db.models import F, Lookup
from django.db.models.fields.tuple_lookups import Tuple, TupleLessThan
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from approvals.models import HumanTask
from approvals.states import Outcome, TaskState
from workflows import replica
from workflows.cleaning import Refused, clean_datetime, clean_text

TAB = "decided"
LABEL = gettext_lazy("Decided by me")
PAGE_SIZE = 25
# Longer than any cursor `decided_by` gives out (about 90 characters).
MAX_CURSOR = 300


class BadCursor(ValueError):
    """A cursor `decided_by` did not give out, or one damaged on its way back."""


@dataclass(frozen=True)
class DecidedFilters:
    """What the archive may be narrowed to: a workflow type, an outcome, text of the title."""

    workflow_type: str = ""
    outcome: str = ""
    search: str = ""
    # Why values of the query were left out: the cleaning layer refused them.
    problems: tuple[str, ...] = ()

    @classmethod
    def from_query(cls, query: Any) -> DecidedFilters:
        """Read the filters from a QueryDict (`type`, `outcome`, `q`). An outcome that is
        not one is ignored; text workflows.cleaning refuses is left out, and `problems`
        says why (as the other tabs' filters do)."""
        problems: list[str] = []

        def text(name: str, label: str, max_length: int) -> str:
            try:
                return clean_text((query.get(name) or "").strip(), max_length=max_length)
            except Refused as error:
                problems.append(
                    _("%(label)s %(error)s, so it was left out.") % {"label": label, "error": error}
                )
                return ""

        outcome = query.get("outcome") or ""
        return cls(
            workflow_type=text("type", _("The workflow type"), 100),
            outcome=outcome if outcome in Outcome.values else "",
            search=text("q", _("The search"), 200),
            problems=tuple(problems),
        )

    @property
    def active(self) -> bool:
        return bool(self.workflow_type or self.outcome or self.search)


@dataclass(frozen=True)
class DecidedPage:
    # Each task's `run` is loaded (its state is the run's state now).
    tasks: list[HumanTask]
    next_cursor: str = ""
    cursor: str = ""


@replica.reads_replica
def decided_by(
    *,
    user: Any,
    cursor: str = "",
    limit: int = PAGE_SIZE,
    filters: DecidedFilters | None = None,
) -> DecidedPage:
    """Return one page of the tasks `user` decided, newest decision first, after `cursor`,
    narrowed by `filters`; raise BadCursor if the cursor is not one this function gave out
    (a cursor is a position in the list, so it holds whatever the filters)."""
    tasks = HumanTask.objects.filter(decided_by=user, state=TaskState.COMPLETED)
    if filters is not None:
        tasks = _filtered(tasks, filters)
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


def _filtered(tasks: Any, filters: DecidedFilters) -> Any:
    if filters.workflow_type:
        tasks = tasks.filter(workflow_type=filters.workflow_type)
    if filters.outcome:
        tasks = tasks.filter(outcome=filters.outcome)
    if filters.search:
        # Text of the title, case aside, as a plain ILIKE on the column: PostgreSQL
        # estimates it from the titles' statistics, so a common word keeps the page on
        # its index range. Django's icontains (UPPER(title) LIKE ...) and a full-text
        # match are both estimated at a row or so, and would read and sort every decision.
        pattern = "%" + re.sub(r"([\\%_])", r"\\\1", filters.search) + "%"
        tasks = tasks.filter(_ILike(F("title"), pattern))
    return tasks


class _ILike(Lookup):
    """`lhs ILIKE rhs`, PostgreSQL's case-insensitive LIKE, estimated from the column's
    statistics (used here only, so not registered on a field)."""

    lookup_name = "ilike"

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} ILIKE {rhs}", [*lhs_params, *rhs_params]

    def as_sqlite(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        """SQLite (the demo) has no ILIKE: its LIKE ignores case (of ASCII letters, as
        Django's icontains there), with the backslash the pattern escapes by."""
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} LIKE {rhs} ESCAPE '\\'", [*lhs_params, *rhs_params]


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
