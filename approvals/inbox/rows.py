"""The inbox's rows: what each one shows, and its HTML, drawn once per shape and filled in.

The `task-row` partial of approvals/inbox/inbox.html draws a row from an `InboxRow`
alone: the values the row shows, with nothing else in its context (no request,
no user, no task object, no CSRF token). A row holds no form of its own: its
actions are buttons of the one form around the table (`formaction`, and `hx-post`
for htmx), which carries the page's one CSRF token and the shared snooze choice.

Drawing 25 rows through the template took most of a page whose rows were not
kept from an earlier answer. So a row is drawn the way approvals.inbox.compiled_queries
compiles SQL: each value the template prints is replaced by a stand-in, the
row's shape (what its conditions read: its state, kind, which actions it offers,
which values are empty) is drawn once per process and language, and each row
fills its own escaped values into its shape's HTML, in one pass.

On top of that, each process keeps the HTML of the rows it filled lately, keyed
on the row and the active time zone and language, as an open inbox asks for the
same rows on every poll. A kept row is never stale nor someone else's: its key
holds every value its template can read. BATON_INBOX_ROW_CACHE turns the keeping
off, and a page then costs the same queries and little more time.
"""

from __future__ import annotations

import dataclasses
import functools
import html as html_text
import operator
import re
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any, NamedTuple
from uuid import UUID

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.template.loader import get_template
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils import formats, timezone, translation
from django.utils.dates import MONTHS_3
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import capfirst

from approvals import task_forms
from approvals.escalation import sla
from approvals.inbox.selectors import PageTask
from approvals.states import Priority, Sla, TaskKind, TaskState
from workflows import starting

TEMPLATE = "approvals/inbox/inbox.html#task-row"
# The values the template prints, each drawn as a stand-in when not empty (whether one is
# empty is part of the shape: the template tests it). The due time's two texts are two more.
_PRINTED = (
    "task_id",
    "title",
    "workflow_type",
    "priority_label",
    "state_label",
    "assignee",
    "owner",
    "substitute_for",
    "barred",
    "task_url",
    "claim_url",
    "approve_url",
    "snooze_url",
    # Last: the one value that is not text (approvals.inbox.rows._escaped).
    "version",
)
# A stand-in is its name between NULs, which escaping leaves as they are and the template's
# own text never holds. A shape's HTML is cut at its stand-ins once, and each row's values
# are put between the pieces, never looked into again: a value that reads like a
# stand-in is shown as it is.
_STAND_IN = re.compile("\x00([a-z_]+)\x00")
# More shapes than a page could show: a few dozen occur.
SHAPES = 512
# About a hundred pages of 25 rows: a few MB per process (1 kB of HTML and its key a row).
KEPT_ROWS = 2500

_LINKS = ("task", "claim", "approve", "snooze")
_ANY_TASK = UUID(int=0)


@dataclass(frozen=True)
class InboxRow:
    """Everything a row of the inbox shows, and all its template may read."""

    task_id: str
    version: int
    title: str
    kind: str
    state: str
    state_label: str
    is_live: bool
    outcome: str
    # The task's type in the reader's words (its title), not its name.
    workflow_type: str
    priority_label: str
    due_at: datetime | None
    sla: Sla
    assignee: str
    owner: str
    substitute_for: str
    # Whether the viewer is the one who decides it (approvals.inbox.selectors.decides_in_tab).
    decides: bool
    # Why separation of duties keeps the viewer from deciding it ("" if it does not).
    barred: str
    # Approving needs its form filled in on the task's page, not a one-click row.
    needs_form: bool
    task_url: str
    claim_url: str
    approve_url: str
    snooze_url: str

    # What the template decides from the values above, decided here once per row: a row
    # drawn afresh spent most of its time in the template's conditions and lookups.
    @functools.cached_property
    def actions(self) -> str:
        """Which actions the row offers: "decide", "complete" (a data-entry task the viewer
        fills in), "revision" (the requester's), "barred", "watch" (someone else decides
        it), or "" once it is finished."""
        if not self.is_live:
            return ""
        if self.kind == TaskKind.REVISION:
            return "revision"
        if self.barred:
            return "barred"
        if not self.decides:
            return "watch"
        return "complete" if self.kind == TaskKind.ENTRY else "decide"

    @functools.cached_property
    def selectable(self) -> bool:
        """Whether bulk approval may take it: the viewer decides it in one click."""
        return self.actions == "decide" and not self.needs_form


def rows_for(
    tasks: list[PageTask], *, now: datetime, barred: dict[UUID, str], decides: dict[UUID, bool]
) -> list[InboxRow]:
    """Return the row of each task (plain values, approvals.inbox.selectors.PageTask).
    `barred` says why separation of duties keeps the viewer from deciding a task ("" if
    it does not), `decides` whether the viewer is the one who decides it at all.

    URLs are reversed once per process (and URL configuration and script prefix) and
    filled in per row: six {% url %} tags in each of 25 rows took a fifth of the page."""
    task_link, claim_link, approve_link, snooze_link = (
        _links(get_urlconf(), get_script_prefix())[name] for name in _LINKS
    )
    any_task = str(_ANY_TASK)
    state_labels, priority_labels = _labels(translation.get_language())
    # A type's title in the reader's words, as the other lists name it, and whether a
    # node's approval needs its form: a few types and nodes a page, each read once.
    kinds: dict[tuple[str, int], str] = {}
    forms: dict[tuple[str, int, str], bool] = {}
    rows = []
    for task in tasks:
        kind = (task.run_workflow_type, task.workflow_version)
        if kind not in kinds:
            kinds[kind] = capfirst(starting.kind_named(*kind))
        node = (*kind, task.node)
        if node not in forms:
            forms[node] = _needs_form(task)
        task_id = str(task.id)
        rows.append(
            InboxRow(
                task_id=task_id,
                version=task.version,
                title=task.title,
                kind=task.kind,
                state=task.state,
                state_label=state_labels.get(task.state, task.state),
                is_live=task.is_live,
                outcome=task.outcome,
                workflow_type=kinds[kind],
                priority_label=priority_labels.get(task.priority, str(task.priority)),
                due_at=task.due_at,
                sla=sla(due_at=task.due_at, now=now),
                assignee=task.assignee,
                owner=task.owner,
                substitute_for=task.substitute_for,
                decides=decides.get(task.id, False),
                barred=barred.get(task.id, ""),
                needs_form=forms[node],
                task_url=task_link.replace(any_task, task_id),
                claim_url=claim_link.replace(any_task, task_id),
                approve_url=approve_link.replace(any_task, task_id),
                snooze_url=snooze_link.replace(any_task, task_id),
            )
        )
    return rows


@functools.lru_cache(maxsize=16)
def _links(urlconf: Any, prefix: str) -> dict[str, str]:
    # A row's links for the task _ANY_TASK. The prefix is the current one: it is in the
    # key because reverse() reads it (as approvals.templatetags.fixed_urls does).
    return {
        name: reverse(f"approvals:{name}", args=[_ANY_TASK], urlconf=urlconf) for name in _LINKS
    }


@functools.lru_cache(maxsize=16)
def _labels(language: str | None) -> tuple[dict[Any, str], dict[Any, str]]:
    """What get_state_display and get_priority_display say in `language` (the active
    one), as text: translated once, rather than a lazy label per row that each
    comparison, hash and print of the row translated again."""
    return (
        {value: str(label) for value, label in TaskState.choices},
        {value: str(label) for value, label in Priority.choices},
    )


def html(rows: list[InboxRow]) -> SafeString:
    """Return the rows' HTML: each row's values filled into its shape's, unless this
    process filled the same row lately (and BATON_INBOX_ROW_CACHE is on)."""
    language = translation.get_language()
    time_zone = timezone.get_current_timezone()
    if not settings.BATON_INBOX_ROW_CACHE:
        return mark_safe("".join(_filled(row, language, time_zone) for row in rows))  # nosec B308 B703 # escaped
    return mark_safe("".join(_kept(row, time_zone, language) for row in rows))  # nosec B308 B703 # escaped


def html_of_one(row: InboxRow, *, error: str, done: str) -> SafeString:
    """Return one row's HTML with a message in it (after an action), drawn afresh."""
    return _draw(row, due=_due(row.due_at), error=error, done=done)


@functools.lru_cache(maxsize=KEPT_ROWS)
def _kept(row: InboxRow, time_zone: tzinfo, language: str) -> str:
    # The time zone is the active one: it is in the key because the due time's text follows it.
    return _filled(row, language, time_zone)


def _filled(row: InboxRow, language: str, time_zone: tzinfo) -> str:
    """The row's HTML: its shape's, drawn once, with the row's own values put in.

    The shape is read off the row as tuples, and a row of stand-ins is built only
    once per shape (in _drawn_shape): building, hashing and comparing one per row,
    then parsing a format string, took most of a row's time. The row's texts are
    escaped together, in one pass (_escaped), and put in by their places, which the
    shape notes as numbers: escaping them one by one into a dict by name took about a
    sixth of the rows' time on a page drawn afresh."""
    printed = _printed_values(row)
    due = _due(row.due_at, time_zone=time_zone, language=language)
    pieces, places = _drawn_shape(
        _Shape(
            kept=_kept_values(row),
            empty=tuple(map(operator.eq, printed, _NOTHING)),
            has_due=due is not None,
            language=language,
        )
    )
    values = _escaped(printed if due is None else (*printed, *due))
    filled = list(pieces)
    filled[1::2] = map(values.__getitem__, places)
    return "".join(filled)


def _escaped(values: tuple[Any, ...]) -> list[str]:
    """Each of `values` as the template prints it (`_printed`). Plain text, which is all
    a row holds but its version, is escaped in one pass over the texts joined by NULs,
    which escaping leaves as they are, and cut at them again; a text that holds a NUL
    itself, or a value of another type, has each value printed on its own."""
    *texts, version = values[: len(_PRINTED)]
    texts.extend(values[len(_PRINTED) :])
    if _ONLY_TEXT.issuperset(map(type, texts)):
        joined = "\x00".join(texts)
        if joined.count("\x00") == len(texts) - 1:
            escaped = html_text.escape(joined).split("\x00")
            escaped.insert(_VERSION, _printed(version))
            return escaped
    return [_printed(value) for value in values]


# A shape holds every field of InboxRow: the printed ones as whether they are empty, the
# due time as whether there is one, and all the others (what the template's conditions
# read) as they are. So two rows of one shape draw the same HTML around their values.
_KEPT = tuple(
    field.name for field in dataclasses.fields(InboxRow) if field.name not in {*_PRINTED, "due_at"}
)
_printed_values = operator.attrgetter(*_PRINTED)
_kept_values = operator.attrgetter(*_KEPT)
_NOTHING = ("",) * len(_PRINTED)
_VERSION = _PRINTED.index("version")
_ONLY_TEXT = frozenset({str})
# Where each value goes in a row's values, as _filled lists them: the printed ones, then
# the due time's two texts.
_PLACES = {name: place for place, name in enumerate((*_PRINTED, "due_iso", "due_text"))}


class _Shape(NamedTuple):
    kept: tuple[Any, ...]
    empty: tuple[bool, ...]
    has_due: bool
    # The active language: the template's own words could follow it.
    language: str


@functools.lru_cache(maxsize=SHAPES)
def _drawn_shape(shape: _Shape) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The shape's HTML cut at its stand-ins: the text around them, and the place (in
    _PLACES) of the value that goes in each."""
    stand_ins = {
        name: "" if empty else f"\x00{name}\x00"
        for name, empty in zip(_PRINTED, shape.empty, strict=True)
    }
    row = InboxRow(**dict(zip(_KEPT, shape.kept, strict=True)), **stand_ins, due_at=None)
    due = ("\x00due_iso\x00", "\x00due_text\x00") if shape.has_due else None
    pieces = _STAND_IN.split(_draw(row, due=due, error="", done=""))
    return tuple(pieces), tuple(_PLACES[name] for name in pieces[1::2])


def _printed(value: Any) -> str:
    """`value` as the template prints it: localized, then escaped (render_value_in_context);
    text is its own localized form, and escaped as conditional_escape escapes plain text."""
    if type(value) is str:
        return html_text.escape(value)
    if type(value) is int and not settings.USE_THOUSAND_SEPARATOR:
        return str(value)  # what localize gives an int when it groups no digits
    return conditional_escape(value if isinstance(value, str) else str(formats.localize(value)))


def _draw(row: InboxRow, *, due: tuple[str, str] | None, error: str, done: str) -> SafeString:
    # No request: a plain context, without context processors, holding only these.
    context: dict[str, Any] = {"row": row, "due": due, "error": error, "done": done}
    return get_template(TEMPLATE).render(context)


def _due(
    due_at: datetime | None, *, time_zone: tzinfo | None = None, language: str | None = None
) -> tuple[str, str] | None:
    """The due time as the row shows it, in the active time zone: ISO 8601 for the
    machine, short for the reader, as the `date` filter writes them with "M j, H:i"
    (its month's name translated once per language). A page passes the active time
    zone and language, read once for all its rows."""
    if due_at is None:
        return None
    local = timezone.localtime(due_at, time_zone)
    month = _short_months(language or translation.get_language())[local.month]
    return local.isoformat(), f"{month} {local.day}, {local.hour:02d}:{local.minute:02d}"


@functools.lru_cache(maxsize=16)
def _short_months(language: str | None) -> dict[int, str]:
    # What dateformat's "M" prints, in `language` (the active one).
    return {number: str(name).title() for number, name in MONTHS_3.items()}


@receiver(setting_changed)
def _forget_drawn_shapes(**kwargs: Any) -> None:
    """Settings change in tests only, and some (USE_THOUSAND_SEPARATOR, TEMPLATES) change
    how a row is drawn: drop the shapes drawn and the rows kept."""
    _drawn_shape.cache_clear()
    _kept.cache_clear()
    _links.cache_clear()
    _labels.cache_clear()
    _short_months.cache_clear()


def _needs_form(task: PageTask) -> bool:
    node = task_forms.approval_node(
        workflow_type=task.run_workflow_type, workflow_version=task.workflow_version, node=task.node
    )
    return bool(node and node.form_is_required)
