"""Words for the codes a run's timeline and a task's audit trail print: a step event's
kind, an audit entry's event and its channel, a node's and a type's names, in the reader's
language.

English keeps the words these pages always showed (the codes themselves, "completed",
"retry_scheduled"), so the msgids are the codes, with a context saying what they name.
A code with no entry here (a new kind) is shown as it is.
"""

from __future__ import annotations

from collections.abc import Iterable

from django import template
from django.utils import formats, timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext, pgettext_lazy

from approvals.states import Channel
from workflows import dsl, starting
from workflows.dsl import Workflow

register = template.Library()

_EVENTS = {
    "started": pgettext_lazy("step event", "started"),
    "completed": pgettext_lazy("step event", "completed"),
    "errored": pgettext_lazy("step event", "errored"),
    "retry_scheduled": pgettext_lazy("step event", "retry_scheduled"),
    "failed": pgettext_lazy("step event", "failed"),
    "compensating": pgettext_lazy("step event", "compensating"),
    "compensated": pgettext_lazy("step event", "compensated"),
    "waiting": pgettext_lazy("step event", "waiting"),
    "signalled": pgettext_lazy("step event", "signalled"),
    "timed_out": pgettext_lazy("step event", "timed_out"),
    "cancelled": pgettext_lazy("step event", "cancelled"),
    "lease_expired": pgettext_lazy("step event", "lease_expired"),
    "late_result_discarded": pgettext_lazy("step event", "late_result_discarded"),
    "redispatched": pgettext_lazy("step event", "redispatched"),
    "dead_lettered": pgettext_lazy("step event", "dead_lettered"),
    "operator": pgettext_lazy("step event", "operator"),
    "warning": pgettext_lazy("step event", "warning"),
    "caught": pgettext_lazy("step event", "caught"),
    "deadline_passed": pgettext_lazy("step event", "deadline_passed"),
    "held": pgettext_lazy("step event", "held"),
}
_AUDITED = {
    "created": pgettext_lazy("audit event", "created"),
    "claimed": pgettext_lazy("audit event", "claimed"),
    "released": pgettext_lazy("audit event", "released"),
    "delegated": pgettext_lazy("audit event", "delegated"),
    "reassigned": pgettext_lazy("audit event", "reassigned"),
    "approved": pgettext_lazy("audit event", "approved"),
    "rejected": pgettext_lazy("audit event", "rejected"),
    "changes_requested": pgettext_lazy("audit event", "changes_requested"),
    "resubmitted": pgettext_lazy("audit event", "resubmitted"),
    "commented": pgettext_lazy("audit event", "commented"),
    "escalated": pgettext_lazy("audit event", "escalated"),
    "expired": pgettext_lazy("audit event", "expired"),
    "cancelled": pgettext_lazy("audit event", "cancelled"),
    "withdrawn": pgettext_lazy("audit event", "withdrawn"),
    "deadline_extended": pgettext_lazy("audit event", "deadline_extended"),
    "quorum_unreachable": pgettext_lazy("audit event", "quorum_unreachable"),
    "started_on_behalf": pgettext_lazy("audit event", "started_on_behalf"),
    "attached": pgettext_lazy("audit event", "attached"),
}


@register.filter
def event_words(code: str) -> str:
    """A step event's kind in the reader's words."""
    return str(_EVENTS.get(code, code))


@register.filter
def audit_words(code: str) -> str:
    """An audit entry's event in the reader's words."""
    return str(_AUDITED.get(code, code))


@register.filter
def channel_words(code: str) -> str:
    """A decision's channel (inbox, email, api, admin, system) in the reader's words."""
    return str(Channel(code).label) if code in Channel.values else code


@register.filter
def type_words(name: str, version: int | None = None) -> str:
    """A workflow type in the reader's words ("Ausgabe" for `expense`): its title at
    `version`, or its latest version's (workflows.starting.kind_named)."""
    return starting.kind_named(name, version)


@register.filter
def node_words(name: str, definition: Workflow | None) -> str:
    """A run's node in the reader's words: its label in `definition` (workflows.dsl)."""
    return dsl.node_words(definition, name)


@register.filter
def node_list_words(names: Iterable[str], definition: Workflow | None) -> str:
    """Several nodes in the reader's words, joined by commas ("Manager approval, pay")."""
    return ", ".join(dsl.node_words(definition, name) for name in names)


@register.filter
def held_words(detail: object) -> str:
    """What a "held" step event says (workflows.engine.limits.held_detail), in the reader's
    words: which limit holds the step back and until when. An event written before the
    detail named its limit keeps the English it was written with."""
    if not isinstance(detail, dict):
        return ""
    limit = detail.get("limit")
    if limit is None:
        return str(detail.get("message", ""))
    if detail.get("reason") != "rate":
        return gettext("waits for its concurrency limit (%(count)s at once)") % {"count": limit}
    until = parse_datetime(str(detail.get("until") or ""))
    if until is None:
        return gettext("waits for its rate limit (%(limit)s)") % {"limit": limit}
    return gettext("waits for its rate limit (%(limit)s), until the next window at %(when)s") % {
        "limit": limit,
        "when": formats.date_format(timezone.localtime(until), "H:i:s T"),
    }
