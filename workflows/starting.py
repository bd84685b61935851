"""Starting a run for a person: who may start which type, and whose request it is.

The rules are pure functions over plain facts (a `Starter`); `start_for` applies
them and makes the one engine call, for the API and the New request page alike.
Whoever starts a run is recorded as its requester (`started_by`). A type whose
input names its requester (`Workflow.requester_field`, the expense's
`requester`) takes that name from whoever starts it: only an operator may name
someone else, and the apps listening through `registry.register_on_behalf_hook`
(approvals: the audit trail) record that they did, in the start's transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from workflows import engine, registry
from workflows.dsl import ANYONE, Workflow
from workflows.models import WorkflowRun

OPERATE_PERMISSION = "workflows.operate_workflowrun"


class StartRefused(Exception):
    """This person may not start this run; the message says why (HTTP 403)."""

    status = 403


class KeyTaken(Exception):
    """The idempotency key already started someone else's run (HTTP 409)."""

    status = 409

    def __init__(self) -> None:
        super().__init__(
            "This idempotency key already started someone else's run; use a key of your own."
        )


@dataclass(frozen=True)
class Starter:
    """What the rules need to know about the person starting a run."""

    username: str
    group_names: frozenset[str]
    is_operator: bool


def is_operator(user: Any) -> bool:
    """Operators run the system: staff, and holders of `workflows.operate_workflowrun`."""
    return bool(user.is_staff or user.has_perm(OPERATE_PERMISSION))


def starter_for(user: Any) -> Starter:
    return Starter(
        username=user.get_username(),
        group_names=frozenset(user.groups.values_list("name", flat=True)),
        is_operator=is_operator(user),
    )


# ---------------------------------------------------------------------------
# The rules (pure)
# ---------------------------------------------------------------------------


def may_start(workflow: Workflow, starter: Starter) -> bool:
    """Operators start every type; others, a type open to ANYONE or to a group of theirs."""
    if starter.is_operator or workflow.starters == ANYONE:
        return True
    return bool(starter.group_names & set(workflow.starters))


def why_not_starter(workflow: Workflow) -> str:
    """Say who may start `workflow`, for someone who may not."""
    words = {"a_kind": a_kind_of(workflow)}
    if workflow.starters == ANYONE or not workflow.starters:
        return _("Only operators may start %(a_kind)s.") % words
    groups = f" {_('or')} ".join(sorted(workflow.starters))
    return _("Only members of %(groups)s, or operators, may start %(a_kind)s.") % {
        **words,
        "groups": groups,
    }


def requester_input(workflow: Workflow, input: Any, starter: Starter) -> tuple[Any, str | None]:
    """Return the input with its requester filled in from the starter, and whom the run
    is for when an operator names someone else (None when it is the starter's own).

    Raise StartRefused when someone who is not an operator names another person:
    nobody files a request in another's name. A requester that is not text is left
    for the input schema to refuse.
    """
    field = workflow.requester_field
    if not field or not isinstance(input, Mapping):
        return input, None
    named = input.get(field)
    if named is None or named == "":
        return {**input, field: starter.username}, None
    if not isinstance(named, str) or named == starter.username:
        return input, None
    if not starter.is_operator:
        raise StartRefused(
            _(
                "You can only request %(a_kind)s for yourself (%(you)s); "
                "only an operator may request one for %(named)s."
            )
            % {
                "a_kind": a_kind_of(workflow),
                "you": starter.username,
                "named": named,
            }
        )
    return input, named


def kind_of(workflow: Workflow) -> str:
    """The type's name in words, in the reader's language: "vendor onboarding"."""
    return str(workflow.title) if workflow.title else workflow.name.replace("_", " ")


def kind_named(name: str, version: int | None = None) -> str:
    """The type `name` in words, in the reader's language ("Ausgabe" for `expense`): its
    title at `version` (or its latest version's, also when `version` is no longer
    registered), or its name with spaces when the type is not registered. Lists show
    this; filters, URLs and the API keep the name."""
    for wanted in (version, None):  # a version no longer registered: the latest's title
        try:
            return kind_of(registry.get(name, wanted))
        except registry.UnknownWorkflow:
            continue
    return name.replace("_", " ")


def a_kind_of(workflow: Workflow) -> str:
    """The type's name with its article: "an expense", "a vendor onboarding" (in German,
    "einen Antrag vom Typ „expense“": each language says it its own way)."""
    kind = kind_of(workflow)
    article = _("an %(kind)s") if kind[:1] in set("aeiou") else _("a %(kind)s")
    return article % {"kind": kind}


def startable(starter: Starter) -> list[Workflow]:
    """The latest version of each type `starter` may start, by name."""
    latest = {workflow.name: registry.get(workflow.name) for workflow in registry.all_definitions()}
    return [latest[name] for name in sorted(latest) if may_start(latest[name], starter)]


# ---------------------------------------------------------------------------
# The use case
# ---------------------------------------------------------------------------


def start_for(
    *,
    user: Any,
    workflow_type: str,
    input: Any,
    channel: str,
    idempotency_key: str = "",
    correlation_id: str = "",
    remote_addr: str | None = None,
    now: datetime | None = None,
) -> tuple[WorkflowRun, bool]:
    """Start a run of `workflow_type` as `user`, its requester, in one transaction.

    Return the run and whether it was created: the same idempotency key again
    returns the first run and starts nothing. Raise UnknownWorkflow, StartRefused
    (not a starter of the type, or naming someone else as requester), KeyTaken or
    InvalidInput; nothing is written then.
    """
    definition = registry.get(workflow_type)
    starter = starter_for(user)
    if not may_start(definition, starter):
        raise StartRefused(why_not_starter(definition))
    data, acting_for = requester_input(definition, input, starter)
    now = now or timezone.now()
    with transaction.atomic():
        run, created = engine.start_workflow(
            workflow_type=definition.name,
            input=data,
            idempotency_key=idempotency_key,
            correlation_id=correlation_id,
            started_by=user,
            now=now,
        )
        if not created and run.started_by_id != user.pk:
            raise KeyTaken()
        if created and acting_for:
            for hook in registry.on_behalf_hooks():
                hook(
                    run=run,
                    actor=user,
                    requester=acting_for,
                    channel=channel,
                    remote_addr=remote_addr,
                    now=now,
                )
    return run, created
