"""The requesters' pages: start a request from a form, follow it, withdraw it.

Like the inbox, each view reads top to bottom: translate the request, make one
call (`approvals.requests.start`, a selector or a request service), then
redirect (post/redirect/get) or render the page, or only the named partial htmx
asked for. A refusal is shown where the person acted, in plain words, with the
status the API would answer; a refused form keeps everything that was typed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_POST

from approvals import request_pages, start_forms
from approvals.human_tasks import InvalidRequest, TaskError, attachments, revisions
from approvals.request_pages import RequestFilters, RequestNotFound
from approvals.requests import services, start
from approvals.states import Channel
from workflows import personal, registry, starting
from workflows.client_address import client_address


def _problem(request: HttpRequest, message: str, status: int) -> HttpResponse:
    return render(request, "approvals/problem.html", {"message": message}, status=status)


# ---------------------------------------------------------------------------
# New request
# ---------------------------------------------------------------------------


@login_required
@require_GET
def new_request(request: HttpRequest) -> HttpResponse:
    """The workflow types the signed-in person may start, each with its form's link."""
    starter = starting.starter_for(request.user)
    types = [
        {
            "definition": definition,
            "kind": starting.kind_of(definition),
            "form": start.form_spec(definition, starter),
        }
        for definition in starting.startable(starter)
    ]
    return render(request, "approvals/requests/new.html", {"types": types})


@login_required
def start_request(request: HttpRequest, workflow_type: str) -> HttpResponse:
    """GET shows the type's form; POST starts the run, or shows the form again with each
    error beside its field. "Add a row" and "Remove" post the form too, and only
    redraw it (htmx: only the list they changed)."""
    try:
        form = start.start_form(user=request.user, workflow_type=workflow_type)
    except start.CannotStart as refused:
        return _problem(request, str(refused), status=refused.status)
    if request.method == "GET":
        return _start_page(request, start.blank(form))
    if request.method != "POST":
        return HttpResponse(status=405, headers={"Allow": "GET, POST"})

    outcome = start.start_request(
        form,
        user=request.user,
        posted=request.POST,
        files=request.FILES.getlist("files"),
        remote_addr=client_address(request),
    )
    if isinstance(outcome, start.FormToFill):
        if outcome.edited and request.htmx:
            return _list_field(request, outcome.form, outcome.edited)
        return _start_page(request, outcome)
    if outcome.created:
        messages.success(request, _("Your request was sent."))
    else:
        messages.info(request, _("You had already sent this form: this is the request it started."))
    return redirect("requests:detail", run_id=outcome.run.pk)


def _start_page(request: HttpRequest, page: start.FormToFill) -> HttpResponse:
    definition, starter = page.start.definition, page.start.starter
    context: dict[str, Any] = {
        "definition": definition,
        "kind": starting.kind_of(definition),
        "form": page.form,
        "key": page.key,
        "action": request.path,
        "attachment_max_bytes": attachments.max_bytes(),
        "requester_note": (
            _("You are the requester (%(name)s).") % {"name": starter.username}
            if definition.requester_field and not starter.is_operator
            else ""
        ),
    }
    return render(request, "approvals/requests/start.html", context, status=page.status)


# ---------------------------------------------------------------------------
# Change and resubmit (a request sent back for changes)
# ---------------------------------------------------------------------------


@login_required
def revise(request: HttpRequest, run_id: UUID) -> HttpResponse:
    """GET shows the start form filled in with the request as it stands, and why it was
    sent back; POST resubmits it, or shows the form again with each error beside its
    field and nothing changed. "Add a row" and "Remove" only redraw the form."""
    try:
        run = request_pages.visible_request(run_id=run_id, user=request.user)
    except RequestNotFound as error:
        return _problem(request, str(error), status=404)
    task = revisions.open_revision(run)
    if task is None:
        return _problem(
            request,
            _("This request is not waiting for changes: nothing to resubmit."),
            status=409,
        )
    refusal = revisions.why_not_answer(run=run, user=request.user)
    if refusal:
        return _problem(request, refusal, status=403)
    definition = registry.get(run.workflow_type, run.workflow_version)
    field = definition.requester_field
    spec = start_forms.spec_for(definition.input_schema, leave_out=(field,) if field else ())
    if request.method == "GET":
        filled = start_forms.filled(spec, personal.shown(run.input))
        return _revise_page(request, run, task, filled)
    if request.method != "POST":
        return HttpResponse(status=405, headers={"Allow": "GET, POST"})

    data, form = start_forms.read(spec, request.POST)
    note = request.POST.get("note", "")
    if "add" in request.POST or "remove" in request.POST:
        form, partial = _with_edited_rows(request, spec, form)
        return partial or _revise_page(request, run, task, form, note=note)
    if form.has_errors:  # text workflows.cleaning refused: said beside its box
        return _revise_page(request, run, task, form, note=note, status=422)
    version = request.POST.get("version", "")
    try:
        revisions.resubmit_request(
            task_id=task.pk,
            user=request.user,
            input=data,
            comment=note,
            channel=Channel.INBOX,
            remote_addr=client_address(request),
            expected_version=int(version) if version.isdigit() else None,
        )
    except revisions.InvalidResubmission as invalid:
        form = start_forms.with_errors(form, invalid.errors)
        return _revise_page(request, run, task, form, note=note, status=422)
    except TaskError as refused:
        form = replace(form, form_errors=(str(refused),))
        return _revise_page(request, run, task, form, note=note, status=refused.status)
    messages.success(request, _("Resubmitted: it is back with whoever asked for the changes."))
    return redirect("requests:detail", run_id=run.pk)


def _revise_page(
    request: HttpRequest,
    run: Any,
    task: Any,
    form: start_forms.Form,
    *,
    note: str = "",
    status: int = 200,
) -> HttpResponse:
    context: dict[str, Any] = {
        "run": run,
        "revision": task,
        "asked": revisions.changes_request_of(run),
        "kind": request_pages.kind_words(run),
        "form": form,
        "note": note,
        "action": request.path,
    }
    return render(request, "approvals/requests/start.html", context, status=status)


# ---------------------------------------------------------------------------
# My requests
# ---------------------------------------------------------------------------


@login_required
@require_GET
def my_requests(request: HttpRequest) -> HttpResponse:
    """The runs I started, newest first, filtered by state and type; htmx asks for the
    list alone when the filters change."""
    filters = RequestFilters.from_query(request.GET)
    page = request_pages.my_requests(user=request.user, filters=filters)
    query = urlencode(
        {key: value for key, value in request.GET.items() if key != "cursor" and value}
    )
    context = {
        "filters": filters,
        "page": page,
        "query": query,
        "states": request_pages.STATE_FILTERS,
        "types": request_pages.request_types(),
    }
    if request.htmx and request.htmx.target == "request-list":
        return render(request, "approvals/requests/mine.html#request-list", context)
    return render(request, "approvals/requests/mine.html", context)


# ---------------------------------------------------------------------------
# One request
# ---------------------------------------------------------------------------


@login_required
@require_GET
def request_detail(request: HttpRequest, run_id: UUID) -> HttpResponse:
    try:
        run = request_pages.visible_request(run_id=run_id, user=request.user)
    except RequestNotFound as error:
        return _problem(request, str(error), status=404)
    return render(request, "approvals/requests/request.html", _request_context(request, run))


def _request_context(
    request: HttpRequest, run: Any, *, confirm: bool = False, error: str = ""
) -> dict[str, Any]:
    page = request_pages.request_page(run)
    refusal = services.withdraw_refusal(run=run, user=request.user)
    revision = revisions.open_revision(run)
    return {
        # Sent back for changes: its requesters are offered the form to change it.
        "revision": revision,
        "asked": revisions.changes_request_of(run) if revision else None,
        "may_revise": bool(revision and not revisions.why_not_answer(run=run, user=request.user)),
        "page": page,
        "run": run,
        "state": request_pages.state_words(run.state),
        "headline": request_pages.headline(run),
        "requested_by": " and ".join(sorted(page.requesters)),
        # Withdrawing is offered to whoever may; others hear why not, once they ask.
        "may_withdraw": refusal is None,
        "withdraw_refusal": str(refusal) if refusal and confirm else "",
        "confirm": confirm and refusal is None,
        "may_comment": bool(page.tasks),
        "error": error,
        "attachments": attachments.of_request(run.pk),
        "attach_url": reverse("requests:attach", args=[run.pk]),
        "attachment_max_bytes": attachments.max_bytes(),
    }


@login_required
def withdraw(request: HttpRequest, run_id: UUID) -> HttpResponse:
    """GET asks to confirm (htmx: only the withdraw panel changes); POST withdraws."""
    try:
        run = request_pages.visible_request(run_id=run_id, user=request.user)
    except RequestNotFound as error:
        return _problem(request, str(error), status=404)
    if request.method == "GET":
        context = _request_context(request, run, confirm=True)
        status = 403 if context["withdraw_refusal"] else 200
        if request.htmx:
            return render(
                request, "approvals/requests/request.html#withdraw-panel", context, status=status
            )
        return render(request, "approvals/requests/request.html", context, status=status)
    if request.method != "POST":
        return HttpResponse(status=405, headers={"Allow": "GET, POST"})
    try:
        services.withdraw_request(
            run_id=run.pk,
            user=request.user,
            reason=request.POST.get("reason", ""),
            channel=Channel.INBOX,
            remote_addr=client_address(request),
        )
    except RequestNotFound as error:
        return _problem(request, str(error), status=404)
    except services.RequestError as refused:
        run.refresh_from_db()
        context = _request_context(request, run, error=str(refused))
        return render(request, "approvals/requests/request.html", context, status=refused.status)
    messages.success(request, _("Withdrawn: whatever it had done is being undone."))
    return redirect("requests:detail", run_id=run.pk)


@login_required
@require_POST
def comment(request: HttpRequest, run_id: UUID) -> HttpResponse:
    try:
        services.comment_on_request(
            run_id=run_id,
            user=request.user,
            body=request.POST.get("body", ""),
            channel=Channel.INBOX,
            remote_addr=client_address(request),
        )
    except RequestNotFound as error:
        return _problem(request, str(error), status=404)
    except services.RequestError as refused:
        run = request_pages.visible_request(run_id=run_id, user=request.user)
        context = _request_context(request, run)
        context["comment_error"] = str(refused)
        context["comment_body"] = request.POST.get("body", "")
        return render(request, "approvals/requests/request.html", context, status=refused.status)
    messages.success(request, _("Comment added: whoever decides will read it."))
    return redirect("requests:detail", run_id=run_id)


@login_required
@require_POST
def attach(request: HttpRequest, run_id: UUID) -> HttpResponse:
    """Attach the posted files to the request: all of them, or none, saying why."""
    files = request.FILES.getlist("files")
    try:
        if not files:
            raise InvalidRequest(_("Choose the files to attach first."))
        attachments.attach(
            run_id=run_id,
            user=request.user,
            uploads=files,
            channel=Channel.INBOX,
            remote_addr=client_address(request),
        )
    except RequestNotFound as error:
        return _problem(request, str(error), status=404)
    except InvalidRequest as refused:
        run = request_pages.visible_request(run_id=run_id, user=request.user)
        context = _request_context(request, run)
        context["attach_error"] = str(refused)
        return render(request, "approvals/requests/request.html", context, status=refused.status)
    messages.success(
        request,
        ngettext("Attached %(count)d file.", "Attached %(count)d files.", len(files))
        % {"count": len(files)},
    )
    return redirect("requests:detail", run_id=run_id)


@login_required
@require_GET
def attachment(request: HttpRequest, attachment_id: UUID) -> HttpResponse:
    """The file, to whoever may see its request (attachments.download says how)."""
    try:
        found = attachments.for_download(attachment_id=attachment_id, user=request.user)
    except RequestNotFound as error:
        return _problem(request, str(error), status=404)
    return attachments.download(found)


def _with_edited_rows(
    request: HttpRequest, spec: Any, form: Any
) -> tuple[Any, HttpResponse | None]:
    """Add or remove a row of a list field of the revise form (without JavaScript the whole
    page comes back): return the form with the change, and the list's partial when htmx
    asked for only that list."""
    added = request.POST.get("add", "")
    removed = request.POST.get("remove", "")
    form = start_forms.with_rows(form, add=added, remove=removed)
    changed = added or removed.rsplit("-", 1)[0]
    if request.htmx and any(item.name == changed for item in spec.fields):
        return form, _list_field(request, form, changed)
    return form, None


def _list_field(request: HttpRequest, form: Any, name: str) -> HttpResponse:
    """Only the list field `name`, as htmx asked for after a row was added or removed."""
    context = {"group": form.group(name), "form": form, "action": request.path}
    return render(request, "approvals/requests/start.html#list-field", context)
