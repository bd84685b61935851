"""The read side of the console's task list: every human task, open or decided,
filtered and paged newest first by keyset.

The SLA dashboard's numbers link here, so a filter means what the dashboard's
heading means, by the dashboard's own rules: a task's SLA state is
`sla_selectors.sla_condition` (and only a live task has one), a group manager sees
the tasks offered to the groups they manage (`sla_selectors.scoped`), a group's
queue is its open (unclaimed) tasks, a person's live tasks are those they hold
(the assignee, as in their inbox's "mine"), their completed tasks those they
decided, and a day's decisions the tasks completed that UTC day.

A page is the tasks matching, newest first, (created_at, id) descending, after the
cursor: one query for the page with its holders and deciders, one for their
candidate groups. Reading the filters costs one more (the groups the viewer may
filter by, which the form offers and a group filter is checked against) and one
for a person named. Live tasks are read through `task_live_created_idx`, so a list
of them costs what the live tasks cost whatever the history; other lists read
`task_created_idx` backwards, a day's decisions `task_decided_at_idx`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Prefetch, Q, QuerySet
from django.db.models.fields.tuple_lookups import Tuple, TupleLessThan
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from approvals import escalation, request_pages
from approvals.console.selectors import query_date, query_text, start_of
from approvals.console.sla import offered_to, scoped, sla_condition
from approvals.models import HumanTask
from approvals.states import LIVE_TASK_STATES, Sla, TaskState, outcome_words
from workflows import replica

PAGE_SIZE = 25
LIVE = "live"
# What the state filter offers: the live states together, then each of the model's.
STATES: dict[str, str] = {
    LIVE: gettext_lazy("live (open, claimed or delegated)"),
    **dict(TaskState.choices),
}
_STATE_SETS: dict[str, tuple[str, ...]] = {
    LIVE: tuple(LIVE_TASK_STATES),
    **{state: (state,) for state in TaskState.values},
}


# ---------------------------------------------------------------------------
# Filters
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskFilters:
    state: str = ""
    workflow_type: str = ""
    # A group's name and a person's username, as given, and who they are (None: not
    # given, or nobody the viewer may filter by).
    group: str = ""
    group_id: int | None = None
    person: str = ""
    person_id: int | None = None
    sla: str = ""
    # Decided between (the dashboard's decisions per day link here), UTC days inclusive.
    decided_from: date | None = None
    decided_to: date | None = None
    cursor: str = ""
    # The groups the viewer may filter by, by name: every group, or those they manage.
    groups: tuple[str, ...] = ()
    # What was given but could not be read, in words; the filter is left out.
    problems: tuple[str, ...] = ()

    @property
    def states(self) -> tuple[str, ...] | None:
        """The task states the filters allow together (None: any), in the model's order.

        An SLA state is a live task's, a decision day a completed task's: with a state
        filter, they narrow it, and may leave no state at all."""
        allowed = set(TaskState.values)
        if self.state:
            allowed &= set(_STATE_SETS[self.state])
        if self.sla:
            allowed &= set(LIVE_TASK_STATES)
        if self.decided_from or self.decided_to:
            allowed &= {TaskState.COMPLETED}
        if allowed == set(TaskState.values):
            return None
        return tuple(state for state in TaskState.values if state in allowed)


def read_filters(query: Mapping[str, str], *, group_ids: Collection[int] | None) -> TaskFilters:
    """Read filters from a query string for a viewer who sees the tasks of `group_ids`
    (None: every task); say what was left out, and why."""
    problems: list[str] = []
    state = query.get("state", "").strip()
    if state and state not in STATES:
        problems.append(
            _("There is no task state %(state)s; showing every state.") % {"state": repr(state)}
        )
        state = ""
    sla = query.get("sla", "").strip()
    if sla and sla not in Sla.values:
        words = ", ".join(Sla.values)
        problems.append(
            _("There is no SLA state %(sla)s (only %(words)s); showing every task.")
            % {"sla": repr(sla), "words": words}
        )
        sla = ""
    workflow_type = query_text(
        query, key="type", label=_("A workflow type"), max_length=100, problems=problems
    )
    decided_from = query_date(query, key="decided_from", label=_("Decided from"), problems=problems)
    decided_to = query_date(query, key="decided_to", label=_("Decided until"), problems=problems)
    if decided_from and decided_to and decided_from > decided_to:
        problems.append(_("Decided from is after decided until, so no day is between them."))

    groups = dict(_groups(group_ids))
    group = query_text(query, key="group", label=_("A group"), max_length=150, problems=problems)
    if group and group not in groups:
        problems.append(
            (
                _("There is no group %(group)s; showing every group.")
                if group_ids is None
                else _("You manage no group %(group)s; showing your groups' tasks.")
            )
            % {"group": repr(group)}
        )
    person = query_text(query, key="person", label=_("A person"), max_length=150, problems=problems)
    person_id = _user_id(person) if person else None
    if person and person_id is None:
        problems.append(
            _("There is no user %(person)s; showing everyone's tasks.") % {"person": repr(person)}
        )

    filters = TaskFilters(
        state=state,
        workflow_type=workflow_type,
        group=group,
        group_id=groups.get(group),
        person=person,
        person_id=person_id,
        sla=sla,
        decided_from=decided_from,
        decided_to=decided_to,
        cursor=_cursor(query.get("cursor", "")),
        groups=tuple(groups),
        problems=tuple(problems),
    )
    if filters.states == ():
        leave_none = _(
            "These filters leave no task: an SLA state is a live task's, and a decision "
            "day a completed task's."
        )
        return replace(filters, problems=(*filters.problems, leave_none))
    return filters


def _groups(group_ids: Collection[int] | None) -> list[tuple[str, int]]:
    groups = Group.objects.order_by("name")
    if group_ids is not None:
        groups = groups.filter(pk__in=group_ids)
    return list(groups.values_list("name", "pk"))


def _user_id(username: str) -> int | None:
    User = get_user_model()
    return (
        User.objects.filter(**{User.USERNAME_FIELD: username}).values_list("pk", flat=True).first()
    )


def _cursor(raw: str) -> str:
    return raw if len(raw) <= request_pages.CURSOR_MAX_LENGTH else ""


# ---------------------------------------------------------------------------
# The list
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskRow:
    task: HumanTask
    # The names of the groups it is offered to, in order.
    groups: list[str]
    # Its SLA state now (an `Sla` value) if it is live, else "".
    sla: str

    @property
    def sla_label(self) -> str:
        return Sla(self.sla).label if self.sla else ""

    @property
    def decision(self) -> str:
        """How it was decided, as a verb ("approved", "sent back"), if it was."""
        return outcome_words(self.task.outcome) if self.task.outcome else ""


@dataclass
class TasksPage:
    rows: list[TaskRow] = field(default_factory=list)
    next_cursor: str = ""


@replica.reads_replica
def tasks_page(
    *,
    filters: TaskFilters,
    group_ids: Collection[int] | None,
    now: datetime,
    limit: int = PAGE_SIZE,
) -> TasksPage:
    """Return one page of the tasks matching `filters` that a viewer who sees the tasks
    of `group_ids` (None: all) may see, newest first, after `filters.cursor`."""
    tasks = filtered_tasks(filters=filters, group_ids=group_ids, now=now)
    after = request_pages.decode_cursor(filters.cursor)
    if after is not None:
        tasks = tasks.filter(TupleLessThan(Tuple("created_at", "id"), after))
    page = list(
        tasks.select_related("assignee", "owner", "decided_by")
        .prefetch_related(
            Prefetch("candidate_groups", queryset=Group.objects.order_by("name").only("name"))
        )
        .order_by("-created_at", "-id")[: limit + 1]
    )
    next_cursor = ""
    if len(page) > limit:
        page = page[:limit]
        next_cursor = request_pages.encode_cursor(page[-1])
    return TasksPage(
        rows=[
            TaskRow(
                task=task,
                groups=[group.name for group in task.candidate_groups.all()],
                sla=escalation.sla(due_at=task.due_at, now=now) if task.is_live else "",
            )
            for task in page
        ],
        next_cursor=next_cursor,
    )


def filtered_tasks(
    *, filters: TaskFilters, group_ids: Collection[int] | None, now: datetime
) -> QuerySet[HumanTask]:
    """The tasks matching `filters` among those offered to `group_ids` (None: all)."""
    tasks = scoped(HumanTask.objects.all(), group_ids=group_ids)
    states = filters.states
    if states is not None:
        tasks = tasks.filter(state__in=states)
    if filters.workflow_type:
        tasks = tasks.filter(workflow_type=filters.workflow_type)
    if filters.group_id is not None:
        tasks = tasks.filter(offered_to(group_ids=[filters.group_id]))
    if filters.person_id is not None:
        tasks = tasks.filter(_with_or_decided_by(filters.person_id, states))
    if filters.sla:
        tasks = tasks.filter(sla_condition(sla=filters.sla, now=now))
    if filters.decided_from:
        tasks = tasks.filter(decided_at__gte=start_of(filters.decided_from))
    if filters.decided_to:
        tasks = tasks.filter(decided_at__lt=start_of(filters.decided_to + timedelta(days=1)))
    return tasks


def _with_or_decided_by(person_id: int, states: tuple[str, ...] | None) -> Q:
    """A person's tasks: those they decided if completed, else those they hold or held
    (the assignee). Said as simply as `states` allows, so an index can serve it."""
    decided = Q(decided_by_id=person_id)
    held = Q(assignee_id=person_id)
    if states is not None and TaskState.COMPLETED not in states:
        return held
    if states == (TaskState.COMPLETED,):
        return decided
    return (decided & Q(state=TaskState.COMPLETED)) | (held & ~Q(state=TaskState.COMPLETED))
