"""Start a request from its type's form: the requester's use case behind the start page.

`start_form` says whether this person may start the type at all, and with which form;
`start_request` reads what they posted and starts the run through
`workflows.starting.start_for` (shared with the API), or hands the form back with each
error beside its box and everything typed kept. The page only draws what comes back.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.utils import timezone
from django.utils.translation import gettext as _

from approvals import start_forms
from approvals.human_tasks import InvalidRequest, attachments
from approvals.states import Channel
from workflows import registry, starting
from workflows.dsl import InvalidInput, Workflow
from workflows.models import WorkflowRun
from workflows.registry import UnknownWorkflow

# The hidden key each rendering of a start form carries: submitting that form twice
# (a double click, or back and submit again) starts one run.
FORM_KEY = re.compile(r"[A-Za-z0-9_-]{16,64}")


class CannotStart(Exception):
    """This person cannot start this type from a form; the message says why."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class StartForm:
    """The type a person may start, and the form they fill in to start it."""

    definition: Workflow
    starter: starting.Starter
    spec: start_forms.FormSpec


@dataclass(frozen=True)
class FormToFill:
    """The form to draw (again): blank, with a row added or removed, or with its errors."""

    start: StartForm
    form: start_forms.Form
    key: str
    status: int = 200
    # The list field whose rows changed, so htmx may redraw only that list ("" if none).
    edited: str = ""


@dataclass(frozen=True)
class Started:
    run: WorkflowRun
    created: bool


def start_form(*, user: Any, workflow_type: str) -> StartForm:
    """Return the form `user` fills in to start `workflow_type`; raise CannotStart (404,
    403 or 422) saying why there is none for them."""
    try:
        definition = registry.get(workflow_type)
    except UnknownWorkflow:
        raise CannotStart(_("There is no such type of request."), status=404) from None
    starter = starting.starter_for(user)
    if not starting.may_start(definition, starter):
        raise CannotStart(starting.why_not_starter(definition), status=403)
    spec = form_spec(definition, starter)
    if not spec.usable:
        fields = ", ".join(spec.cannot_fill)
        raise CannotStart(
            _("This type needs fields a form cannot fill (%(fields)s); start it through the API.")
            % {"fields": fields},
            status=422,
        )
    return StartForm(definition=definition, starter=starter, spec=spec)


def blank(start: StartForm) -> FormToFill:
    """Return the empty form, with a new key."""
    return FormToFill(start=start, form=start_forms.blank(start.spec), key=new_key())


def start_request(
    start: StartForm,
    *,
    user: Any,
    posted: Mapping[str, str],
    remote_addr: str | None,
    files: Sequence[UploadedFile] = (),
) -> Started | FormToFill:
    """Start the run the posted form asks for, once per form key, with the files posted
    beside it; or return the form to fill again: a row added or removed, each error beside
    its box, or a file refused (checked before anything starts, so nothing is lost)."""
    data, form = start_forms.read(start.spec, posted)
    key = posted.get("key", "")
    if "add" in posted or "remove" in posted:
        added, removed = posted.get("add", ""), posted.get("remove", "")
        form = start_forms.with_rows(form, add=added, remove=removed)
        changed = added or removed.rsplit("-", 1)[0]
        listed = any(item.name == changed for item in start.spec.fields)
        return FormToFill(start=start, form=form, key=key, edited=changed if listed else "")
    if form.has_errors:  # text workflows.cleaning refused: said beside its box
        return FormToFill(start=start, form=form, key=key, status=422)
    if not FORM_KEY.fullmatch(key):
        form = replace(form, form_errors=("This form was incomplete: check it and send it again.",))
        return FormToFill(start=start, form=form, key=new_key(), status=400)
    try:
        checked = attachments.check(files)
    except InvalidRequest as refused:
        form = replace(form, form_errors=(f"{refused} Choose the files again.",))
        return FormToFill(start=start, form=form, key=key, status=refused.status)
    try:
        run, created = starting.start_for(
            user=user,
            workflow_type=start.definition.name,
            input=data,
            channel=Channel.INBOX,
            # Per person, so nobody's key can ever return someone else's run.
            idempotency_key=f"form:{user.pk}:{key}",
            remote_addr=remote_addr,
        )
    except InvalidInput as invalid:
        form = start_forms.with_errors(form, invalid.errors)
        return FormToFill(start=start, form=form, key=key, status=422)
    except (starting.StartRefused, starting.KeyTaken) as refused:
        form = replace(form, form_errors=(str(refused),))
        return FormToFill(start=start, form=form, key=key, status=refused.status)
    if created and checked:
        attachments.keep(
            checked=checked,
            run_id=run.pk,
            task_id=None,
            user=user,
            channel=Channel.INBOX,
            now=timezone.now(),
            remote_addr=remote_addr,
        )
    return Started(run=run, created=created)


def new_key() -> str:
    return secrets.token_urlsafe(24)


def form_spec(definition: Workflow, starter: starting.Starter) -> start_forms.FormSpec:
    """The type's form for this person: a requester field only for operators, who may
    leave it blank (their own request) or name whom they act for."""
    field = definition.requester_field
    if not field or not starter.is_operator:
        return start_forms.spec_for(definition.input_schema, leave_out=(field,) if field else ())
    spec = start_forms.spec_for(definition.input_schema)
    fields = tuple(
        replace(
            item,
            label=_("On behalf of"),
            help=_(
                "Leave it blank for your own request, or give the username of whom you "
                "act for (this is audited)."
            ),
            required=False,
        )
        if item.name == field and isinstance(item, start_forms.FieldSpec)
        else item
        for item in spec.fields
    )
    return replace(spec, fields=fields)
