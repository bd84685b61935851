"""The reviewers' inbox: pages that work without htmx, and small htmx branches that swap parts.

Each view translates one request into one call of `approvals.human_tasks` (or a
selector), then renders the page, or just the named partial it replaces. Errors
come back in plain words, inline, with the status the API would answer.
"""

from __future__ import annotations

import contextlib
import functools
import re
from dataclasses import replace
from datetime import datetime
from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.template.loader import get_template
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils import formats, timezone, translation
from django.utils.crypto import constant_time_compare, salted_hmac
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeString
from django.utils.text import capfirst
from django.utils.translation import gettext, ngettext
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import reswap, trigger_client_event

from approvals import (
    audit,
    human_tasks,
    permissions,
    request_pages,
    rework_rounds,
    start_forms,
    task_forms,
    throttling,
)
from approvals.escalation import sla
from approvals.human_tasks import attachments
from approvals.inbox import decided, selectors
from approvals.inbox import rows as inbox_rows
from approvals.models import HumanTask
from approvals.notify import links
from approvals.states import Channel, Outcome, Priority, Sla, TaskKind
from workflows import personal, registry, starting
from workflows.cleaning import Refused, clean_datetime, clean_text
from workflows.client_address import client_address
from workflows.diagram import draw

INBOX_CHANGED = "inbox-changed"


_NUMBER = re.compile(r"[0-9]{1,9}")  # str.isdigit() would let "²" through to int()


def _version(request: HttpRequest) -> int | None:
    raw = request.POST.get("version", "")
    return int(raw) if _NUMBER.fullmatch(raw) else None


# ---------------------------------------------------------------------------
# The inbox
# ---------------------------------------------------------------------------


@login_required
@require_GET
def inbox(request: HttpRequest) -> HttpResponse:
    """The inbox; htmx asks for just the list (polling) or just the tab counts (after a change),
    and gets only what that part needs: one query for the list, one for the counts. The
    whole page reads both, in one round trip on PostgreSQL."""
    now = timezone.now()
    if request.GET.get("tab") == decided.TAB:
        return _decided_tab(request, now=now)
    filters = selectors.InboxFilters.from_query(request.GET)
    target = request.htmx.target if request.htmx else None
    context: dict[str, Any] = {
        "filters": filters,
        "query": _query_without(request.GET, "cursor"),
        "tab_query": _query_without(request.GET, "cursor", "tab"),
        "problems": filters.problems,
    }
    # A refused filter is a bad request; the page still shows the list without it.
    status = 400 if filters.problems else 200
    header = None
    if target != "tab-counts":
        with_header = target != "task-list"
        try:
            page, header = _page_and_header(request, filters, now=now, with_header=with_header)
        except selectors.BadCursor:
            # A stale or mangled "next page" link: start again rather than refuse.
            filters = replace(filters, cursor="")
            page, header = _page_and_header(request, filters, now=now, with_header=with_header)
            context["notice"] = gettext(
                "That page link no longer works, so here is the first page."
            )
        barred = human_tasks.barred_on_page(tasks=page.tasks, user=request.user)
        decides = selectors.decides_in_tab(filters.tab)
        rows = inbox_rows.rows_for(
            page.tasks, now=now, barred=barred, decides={task.pk: decides for task in page.tasks}
        )
        context.update(
            page=page,
            decides=decides,
            rows=rows,
            rows_html=inbox_rows.html(rows),
            snooze_choices=tuple(selectors.snooze_choices(now)),
            tab_label=selectors.TABS[filters.tab],
            poll_seconds=settings.BATON_INBOX_POLL_SECONDS,
        )
    if target == "task-list":
        return render(request, "approvals/inbox/inbox.html#task-list", context, status=status)
    if header is None:
        header = selectors.inbox_header(user=request.user, now=now)
    context["tabs"] = _tabs(header)
    if target == "tab-counts":
        return render(request, "approvals/inbox/inbox.html#tab-counts", context, status=status)
    context.update(
        manages_a_group=header.manages_a_group,
        saved_filters=header.saved_filters,
        filters_form=_filters_form(filters),
    )
    return render(request, "approvals/inbox/inbox.html", context, status=status)


def _page_and_header(
    request: HttpRequest, filters: selectors.InboxFilters, *, now: datetime, with_header: bool
) -> tuple[selectors.Page, selectors.Header | None]:
    """The page of `filters`, and, `with_header`, the header above it, read together."""
    if with_header:
        return selectors.inbox_with_header(user=request.user, filters=filters, now=now)
    return selectors.inbox(user=request.user, filters=filters, now=now), None


def _filters_form(filters: selectors.InboxFilters) -> SafeString:
    """The filters' form of the inbox page (the template's filters-form partial), as
    `filters` set it, in the active language: drawn once per process for each of these."""
    language = translation.get_language()
    return _drawn_filters_form(
        (
            filters.tab,
            filters.search,
            filters.workflow_type,
            filters.priority,
            filters.sla,
            filters.where_text,
            filters.sort,
        ),
        _type_titles(registry.changes(), language),
        language,
        get_urlconf(),
        get_script_prefix(),
    )


@functools.lru_cache(maxsize=16)
def _type_titles(changes: int, language: str | None) -> tuple[tuple[str, str], ...]:
    """Each type the filter offers, and its title in `language` (the active one), for the
    registered definitions as they stand after `changes` (registry.changes()): looked
    up once, rather than through every definition on every page."""
    return tuple((name, capfirst(starting.kind_named(name))) for name in selectors.workflow_types())


@functools.lru_cache(maxsize=256)
def _drawn_filters_form(
    shown: tuple[Any, ...],
    type_titles: tuple[tuple[str, str], ...],
    language: str | None,
    urlconf: Any,
    prefix: str,
) -> SafeString:
    # The key holds all the partial reads: the filters it shows, the types' titles, and
    # what its own words and its {% fixed_url %} follow (the language, the URL
    # configuration and prefix). The filters of the page with their own values: 256
    # sets of them are a few hundred kB.
    tab, search, workflow_type, priority, sla, where_text, sort = shown
    filters = selectors.InboxFilters(
        tab=tab,
        search=search,
        workflow_type=workflow_type,
        priority=priority,
        sla=sla,
        where_text=where_text,
        sort=sort,
    )
    context = {
        "filters": filters,
        "type_titles": type_titles,
        "priorities": Priority.choices,
        "slas": Sla.choices,
        "sorts": selectors.SORTS,
    }
    return get_template("approvals/inbox/inbox.html#filters-form").render(context)


@receiver(setting_changed)
def _forget_filters_forms(**kwargs: Any) -> None:
    """Settings change in tests only, and some (TEMPLATES, the number formats) change the
    form as drawn."""
    _drawn_filters_form.cache_clear()
    _type_titles.cache_clear()


def _tabs(header: selectors.Header) -> list[tuple[str, str, str | None]]:
    """Each tab's name, label and count as shown; the archive of decisions has no count."""
    return [
        *(
            (name, label, _count_label(header.counts[name]))
            for name, label in selectors.TABS.items()
        ),
        (decided.TAB, decided.LABEL, None),
    ]


def _decided_tab(request: HttpRequest, *, now: datetime) -> HttpResponse:
    """The archive tab: the tasks the viewer decided, newest first, each with its outcome
    and what became of the request since (its run's state now). Read only: no actions."""
    filters = selectors.InboxFilters(tab=decided.TAB)
    narrowed = decided.DecidedFilters.from_query(request.GET)
    context: dict[str, Any] = {
        "filters": filters,
        "decided_filters": narrowed,
        "outcomes": Outcome.choices,
        "workflow_types": selectors.workflow_types(),
        "problems": narrowed.problems,
        "archive": True,
        "query": _query_without(request.GET, "cursor"),
        "tab_query": _query_without(request.GET, "cursor", "tab"),
    }
    target = request.htmx.target if request.htmx else None
    if target != "tab-counts":
        try:
            page = decided.decided_by(
                user=request.user,
                cursor=request.GET.get("cursor", ""),
                limit=decided.PAGE_SIZE,
                filters=narrowed,
            )
        except decided.BadCursor:
            page = decided.decided_by(user=request.user, limit=decided.PAGE_SIZE, filters=narrowed)
            context["notice"] = gettext(
                "That page link no longer works, so here is the first page."
            )
        context.update(decided_page=page, tab_label=decided.LABEL)
    status = 400 if narrowed.problems else 200
    if target == "decided-list":
        return render(request, "approvals/inbox/inbox.html#decided-list", context, status=status)
    header = selectors.inbox_header(user=request.user, now=now)
    context.update(tabs=_tabs(header), manages_a_group=header.manages_a_group)
    if target == "tab-counts":
        return render(request, "approvals/inbox/inbox.html#tab-counts", context, status=status)
    return render(request, "approvals/inbox/inbox.html", context, status=status)


def _count_label(count: int) -> str:
    """A tab's count as shown: exact below the cap, "99+" at it."""
    return f"{selectors.COUNT_CAP - 1}+" if count >= selectors.COUNT_CAP else str(count)


def _query_without(query: QueryDict, *names: str) -> str:
    kept = {key: value for key, value in query.items() if key not in names and value}
    return urlencode(kept)


@login_required
@require_POST
def save_filter(request: HttpRequest) -> HttpResponse:
    """Save the inbox's current query under a name; refuse, saying why, what cannot be kept."""
    query = request.POST.get("query", "").strip()
    try:
        saved = human_tasks.save_filter(
            user=request.user, name=request.POST.get("name", ""), query=query
        )
    except human_tasks.TaskError as error:
        messages.error(request, str(error))
        return redirect("approvals:inbox")
    messages.success(request, gettext("Saved the filter “%(name)s”.") % {"name": saved.name})
    return redirect(f"{reverse('approvals:inbox')}?{saved.query}")


@login_required
@require_POST
def delete_filter(request: HttpRequest, filter_id: int) -> HttpResponse:
    human_tasks.delete_filter(user=request.user, filter_id=filter_id)
    return redirect("approvals:inbox")


# ---------------------------------------------------------------------------
# One task
# ---------------------------------------------------------------------------


@login_required
@require_GET
def human_task(request: HttpRequest, task_id: UUID) -> HttpResponse:
    try:
        task = human_tasks.visible_task(task_id=task_id, user=request.user)
    except human_tasks.TaskNotFound as error:
        return render(request, "approvals/problem.html", {"message": str(error)}, status=404)
    if task.kind == TaskKind.REVISION:
        # The requester answers it on their request's page, with the start form.
        return redirect("requests:revise", run_id=task.run_id)
    return render(request, "approvals/inbox/human_task.html", _task_context(request, task))


def _live_form(task: HumanTask, node: Any, files: Any) -> start_forms.Form | None:
    """The task form to fill in: a data-entry task's draft, if one was kept, else blank."""
    if task.kind == TaskKind.ENTRY and task.draft:
        return task_forms.filled(node, personal.shown(task.draft), files)
    return task_forms.blank(node, files)


def _task_context(
    request: HttpRequest,
    task: HumanTask,
    error: str = "",
    form: start_forms.Form | None = None,
) -> dict[str, Any]:
    """What the task page shows; `form` is the task form as posted (with its errors),
    or else a blank one while the task is live."""
    now = timezone.now()
    reviewer = human_tasks.reviewer_for(request.user)
    facts = human_tasks.facts_for(task)
    run = task.run
    definition = registry.get(run.workflow_type, run.workflow_version)
    node = task_forms.approval_of(task)
    steps = list(run.steps.all())
    may_decide = permissions.can_decide(reviewer, facts)
    files = attachments.of_request(run.pk)
    changes_refusal = ""
    if may_decide and node is not None and node.may_request_changes:
        changes_refusal = rework_rounds.why_no_changes(run=run, definition=definition, node=node)
    return {
        # "Request changes" is offered where the approval allows it and rounds remain;
        # once they are spent, the panel says so.
        "may_request_changes": bool(
            may_decide and node and node.may_request_changes and not changes_refusal
        ),
        "changes_refusal": changes_refusal,
        "task_form": form or (_live_form(task, node, files) if task.is_live else None),
        "is_entry": task.kind == TaskKind.ENTRY,
        "task_form_required": bool(node and node.form_is_required),
        "decided_values": request_pages.decision_values(task, definition),
        "task": task,
        "sla": sla(due_at=task.due_at, now=now),
        "may": {
            "claim": permissions.can_claim(reviewer, facts),
            "release": permissions.can_release(reviewer, facts),
            "decide": may_decide,
            "delegate": permissions.can_delegate(reviewer, facts),
            "reassign": permissions.can_reassign(reviewer, facts),
        },
        "barred": human_tasks.why_barred(task=task, user=request.user) if task.is_live else "",
        "error": error,
        "run": run,
        # The type and its nodes as people read them (the run keeps their technical names).
        "definition": definition,
        "kind": starting.kind_of(definition),
        # The run's input as its request page shows it: labelled, money as money.
        "input_rows": request_pages.input_rows(run, definition),
        "events": run.events.select_related("step").order_by("at", "id"),
        "diagram": draw(definition, steps),
        "trail": audit.trail(task),
        "comments": task.comments.select_related("author"),
        "snooze_choices": selectors.snooze_choices(now),
        "attachments": files,
        "attach_url": reverse("approvals:attach", args=[task.pk]),
        "attachment_max_bytes": attachments.max_bytes(),
    }


# ---------------------------------------------------------------------------
# Actions: one service call each; htmx swaps the row or the decision panel
# ---------------------------------------------------------------------------


def _act(request: HttpRequest, task_id: UUID, action: Any, done: str) -> HttpResponse:
    """Run `action`, then answer as the caller expects: a row, a panel, or a redirect."""
    try:
        action()
    except human_tasks.TaskError as error:
        return _after_action(request, task_id, error=str(error), status=error.status)
    return _after_action(request, task_id, done=done)


def _after_action(
    request: HttpRequest, task_id: UUID, *, done: str = "", error: str = "", status: int = 200
) -> HttpResponse:
    try:
        task = human_tasks.visible_task(task_id=task_id, user=request.user)
    except human_tasks.TaskNotFound:
        task = None
    if not request.htmx:
        if error:
            messages.error(request, error)
        elif done:
            messages.success(request, done)
        if task is None:
            return redirect("approvals:inbox")
        return redirect("approvals:task", task_id=task_id)
    # Whatever the answer, it replaces only the part the form named: the row or the
    # decision panel, with the refusal inside it, never the page around it.
    if (request.htmx.target or "").startswith("row-"):
        response = _row_after_action(request, task_id, task, done=done, error=error)
        response.status_code = status
        if error:
            # Shown in the row, even where success removes the row (snooze).
            reswap(response, "outerHTML")
    elif task is None:
        response = render(
            request,
            "approvals/inbox/human_task.html#decision-panel-problem",
            {"error": error},
            status=status,
        )
    else:
        context = _task_context(request, task, error=error)
        context["done"] = done
        response = render(
            request, "approvals/inbox/human_task.html#decision-panel", context, status=status
        )
    return trigger_client_event(response, INBOX_CHANGED) if not error else response


def _row_after_action(
    request: HttpRequest, task_id: UUID, task: HumanTask | None, *, done: str, error: str
) -> HttpResponse:
    """The inbox row of `task_id` as it now stands, or the refusal alone in its place."""
    if task is None:
        return render(
            request, "approvals/inbox/inbox.html#row-problem", {"task_id": task_id, "error": error}
        )
    reviewer = human_tasks.reviewer_for(request.user)
    now = timezone.now()
    (row,) = inbox_rows.rows_for(
        [selectors.PageTask.of(task)],
        now=now,
        barred={task.pk: human_tasks.why_barred(task=task, user=request.user)},
        decides={task.pk: permissions.can_decide(reviewer, human_tasks.facts_for(task))},
    )
    return HttpResponse(inbox_rows.html_of_one(row, error=error, done=done))


def _common(request: HttpRequest) -> dict[str, Any]:
    return {
        "user": request.user,
        "channel": Channel.INBOX,
        "expected_version": _version(request),
        "remote_addr": client_address(request),
    }


@login_required
@require_POST
def claim(request: HttpRequest, task_id: UUID) -> HttpResponse:
    return _act(
        request,
        task_id,
        lambda: human_tasks.claim_human_task(task_id=task_id, **_common(request)),
        gettext("Claimed: it is yours now."),
    )


@login_required
@require_POST
def release(request: HttpRequest, task_id: UUID) -> HttpResponse:
    return _act(
        request,
        task_id,
        lambda: human_tasks.release_human_task(task_id=task_id, **_common(request)),
        gettext("Released back to the group."),
    )


@login_required
@require_POST
def approve(request: HttpRequest, task_id: UUID) -> HttpResponse:
    """Approve, with the task form's values if its approval has a form. Values that do
    not fit come back beside their boxes, everything typed kept, and nothing decided;
    from an inbox row (no form there) the refusal says to open the task."""
    comment = request.POST.get("comment", "")
    try:
        task = human_tasks.visible_task(task_id=task_id, user=request.user)
    except human_tasks.TaskNotFound as error:
        return _after_action(request, task_id, error=str(error), status=error.status)
    values, form = task_forms.read(
        task_forms.approval_of(task), request.POST, attachments.of_request(task.run_id)
    )
    from_row = (request.htmx.target or "").startswith("row-") if request.htmx else False
    try:
        if form is not None and form.has_errors:  # text workflows.cleaning refused
            raise human_tasks.InvalidRequest(
                gettext("Correct the fields marked in the form to approve. Nothing was decided.")
            )
        human_tasks.approve_human_task(
            task_id=task_id, comment=comment, values=values, **_common(request)
        )
    except human_tasks.InvalidRequest as refused:
        if from_row or form is None:
            return _after_action(request, task_id, error=str(refused), status=refused.status)
        if isinstance(refused, human_tasks.InvalidForm):
            form = task_forms.with_errors(form, refused.errors)
        return _form_refused(request, task, form, str(refused), comment)
    except human_tasks.TaskError as error:
        return _after_action(request, task_id, error=str(error), status=error.status)
    return _after_action(request, task_id, done=gettext("Approved."))


def _form_refused(
    request: HttpRequest, task: HumanTask, form: start_forms.Form, message: str, comment: str
) -> HttpResponse:
    """The task again, its form as posted with each error beside its box (422): the
    decision panel for htmx, the whole page otherwise (a redirect would lose the form)."""
    context = _task_context(request, task, error=message, form=form)
    context["approve_comment"] = comment
    template = "approvals/inbox/human_task.html"
    if request.htmx:
        template += "#decision-panel"
    return render(request, template, context, status=422)


@login_required
@require_POST
def complete(request: HttpRequest, task_id: UUID) -> HttpResponse:
    """Complete a data-entry task with its form. Values that do not fit come back beside
    their boxes (422), everything typed kept, here and as the task's draft, so a reload
    shows them too; nothing is completed."""
    comment = request.POST.get("comment", "")
    try:
        task = human_tasks.visible_task(task_id=task_id, user=request.user)
    except human_tasks.TaskNotFound as error:
        return _after_action(request, task_id, error=str(error), status=error.status)
    values, form = task_forms.read(
        task_forms.approval_of(task), request.POST, attachments.of_request(task.run_id)
    )
    try:
        if form is not None and form.has_errors:  # text workflows.cleaning refused
            raise human_tasks.InvalidRequest(
                gettext(
                    "Correct the fields marked in the form to complete it. Nothing was completed."
                )
            )
        human_tasks.complete_user_task(
            task_id=task_id, comment=comment, values=values, **_common(request)
        )
    except human_tasks.InvalidRequest as refused:
        if form is None:
            return _after_action(request, task_id, error=str(refused), status=refused.status)
        if isinstance(refused, human_tasks.InvalidForm):
            form = task_forms.with_errors(form, refused.errors)
        _keep_draft(request, task_id, values)
        return _form_refused(request, task, form, str(refused), comment)
    except human_tasks.TaskError as error:
        return _after_action(request, task_id, error=str(error), status=error.status)
    return _after_action(request, task_id, done=gettext("Completed."))


def _keep_draft(request: HttpRequest, task_id: UUID, values: dict[str, Any]) -> None:
    """Keep what a refused completion posted as the draft; a draft that cannot be kept
    changes nothing (the form on the page still holds it)."""
    with contextlib.suppress(human_tasks.TaskError):
        human_tasks.save_draft(task_id=task_id, values=values, **_draft_common(request))


def _draft_common(request: HttpRequest) -> dict[str, Any]:
    common = _common(request)
    common.pop("expected_version")
    return common


@login_required
@require_POST
def save_draft(request: HttpRequest, task_id: UUID) -> HttpResponse:
    """Keep the data-entry form as typed so far (htmx posts it, debounced, as it is typed).

    Answers the small "draft saved" status line (or why not) for htmx; without htmx,
    back to the task's page. Saving changes nothing else: no state, no version.
    """
    try:
        task = human_tasks.visible_task(task_id=task_id, user=request.user)
        values, form = task_forms.read(
            task_forms.approval_of(task), request.POST, attachments.of_request(task.run_id)
        )
        if form is None:
            raise human_tasks.InvalidRequest(gettext("This task has no form to keep a draft of."))
        saved = human_tasks.save_draft(task_id=task_id, values=values, **_draft_common(request))
    except human_tasks.TaskError as error:
        if not request.htmx:
            messages.error(request, str(error))
            return redirect("approvals:task", task_id=task_id)
        return render(
            request,
            "approvals/inbox/human_task.html#draft-status",
            {"draft_error": str(error)},
            status=error.status,
        )
    if not request.htmx:
        messages.success(request, gettext("Draft saved."))
        return redirect("approvals:task", task_id=task_id)
    return render(request, "approvals/inbox/human_task.html#draft-status", {"task": saved})


@login_required
@require_POST
def reject(request: HttpRequest, task_id: UUID) -> HttpResponse:
    reason = request.POST.get("reason", "")
    return _act(
        request,
        task_id,
        lambda: human_tasks.reject_human_task(task_id=task_id, reason=reason, **_common(request)),
        gettext("Rejected."),
    )


@login_required
@require_POST
def request_changes(request: HttpRequest, task_id: UUID) -> HttpResponse:
    """Send the request back to its requester, with the reason they will read."""
    reason = request.POST.get("reason", "")
    return _act(
        request,
        task_id,
        lambda: human_tasks.request_changes(task_id=task_id, reason=reason, **_common(request)),
        gettext("Sent back for changes: it comes back to you once it is resubmitted."),
    )


@login_required
@require_POST
def delegate(request: HttpRequest, task_id: UUID) -> HttpResponse:
    to = request.POST.get("to", "").strip()
    comment = request.POST.get("comment", "")
    return _act(
        request,
        task_id,
        lambda: human_tasks.delegate_human_task(
            task_id=task_id, to_username=to, comment=comment, **_common(request)
        ),
        gettext("Delegated to %(person)s; you will be told when it is decided.") % {"person": to},
    )


@login_required
@require_POST
def reassign(request: HttpRequest, task_id: UUID) -> HttpResponse:
    to = request.POST.get("to", "").strip()
    comment = request.POST.get("comment", "")
    return _act(
        request,
        task_id,
        lambda: human_tasks.reassign_human_task(
            task_id=task_id, to_username=to, comment=comment, **_common(request)
        ),
        gettext("Reassigned to %(person)s.") % {"person": to},
    )


@login_required
@require_POST
def comment(request: HttpRequest, task_id: UUID) -> HttpResponse:
    body = request.POST.get("body", "")
    return _act(
        request,
        task_id,
        lambda: human_tasks.comment_on_human_task(
            task_id=task_id,
            user=request.user,
            body=body,
            channel=Channel.INBOX,
            remote_addr=client_address(request),
        ),
        gettext("Comment added."),
    )


@login_required
@require_POST
def attach(request: HttpRequest, task_id: UUID) -> HttpResponse:
    """Attach the posted files to the task: all of them, or none, saying why."""
    files = request.FILES.getlist("files")
    count = len(files)
    return _act(
        request,
        task_id,
        lambda: (
            attachments.attach(
                task_id=task_id,
                user=request.user,
                uploads=files,
                channel=Channel.INBOX,
                remote_addr=client_address(request),
            )
            if files
            else _no_files()
        ),
        ngettext("Attached %(count)d file.", "Attached %(count)d files.", count) % {"count": count},
    )


def _no_files() -> None:
    raise human_tasks.InvalidRequest(gettext("Choose the files to attach first."))


@login_required
@require_POST
def snooze(request: HttpRequest, task_id: UUID) -> HttpResponse:
    choices = selectors.snooze_choices(timezone.now())
    until = choices.get(request.POST.get("until", ""))
    try:
        if until is None:
            raise human_tasks.InvalidRequest(gettext("Choose how long to snooze it."))
        human_tasks.snooze_human_task(task_id=task_id, user=request.user, until=until)
    except human_tasks.TaskError as error:
        return _after_action(request, task_id, error=str(error), status=error.status)
    if request.htmx:
        # The row leaves the list; the counts refresh.
        return trigger_client_event(HttpResponse(""), INBOX_CHANGED)
    messages.success(
        request,
        gettext("Snoozed until %(when)s.")
        % {"when": formats.date_format(timezone.localtime(until), gettext("Y-m-d H:i"))},
    )
    return redirect("approvals:inbox")


def _selected(value: str) -> tuple[UUID, int] | None:
    """Read a checkbox's "task id:version"; anything else is ignored."""
    task_id, _, version = value.partition(":")
    try:
        return UUID(task_id), int(version) if _NUMBER.fullmatch(version) else -1
    except ValueError:
        return None


@login_required
@require_POST
def bulk_approve(request: HttpRequest) -> HttpResponse:
    # Each checkbox carries "id:version", so a task that changed since the list was
    # shown is refused as stale rather than approved unseen.
    selection = [item for item in map(_selected, request.POST.getlist("task")) if item]
    ids = [task_id for task_id, _ in selection]
    results = human_tasks.bulk_approve(
        selection=selection,
        user=request.user,
        channel=Channel.INBOX,
        remote_addr=client_address(request),
    )
    approved = sum(1 for result in results if not result.error)
    if approved:
        messages.success(
            request,
            ngettext("Approved %(count)d task.", "Approved %(count)d tasks.", approved)
            % {"count": approved},
        )
    for result in results:
        if result.error:
            messages.error(
                request,
                gettext("Task #%(id)s: %(error)s") % {"id": result.task_id, "error": result.error},
            )
    if not ids:
        messages.error(request, gettext("Select the tasks to approve first."))
    next_url = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}):
        next_url = reverse("approvals:inbox")
    return redirect(next_url)


@login_required
@require_GET
def user_search(request: HttpRequest) -> HttpResponse:
    """Options for the user picker: people the user may hand a task to (see
    permissions.may_hand_to) whose name starts with what was typed."""
    try:
        term = clean_text(request.GET.get("to", "").strip(), max_length=150)
    except Refused as error:
        return HttpResponse(
            gettext("The name %(error)s.") % {"error": error}, status=400, content_type="text/plain"
        )
    users = selectors.people_to_hand_to(giver=human_tasks.person_for(request.user))
    if term:
        users = users.filter(username__istartswith=term)
    users = users.exclude(username=audit.SYSTEM_USERNAME).order_by("username")[:10]
    return render(request, "approvals/inbox/human_task.html#user-options", {"users": users})


# ---------------------------------------------------------------------------
# Email links
# ---------------------------------------------------------------------------


@csrf_exempt  # see _confirmation: a no-referrer page's POST carries "Origin: null"
def email_link(request: HttpRequest, token: str) -> HttpResponse:
    """GET shows the task and confirm buttons and changes nothing; POST decides.

    Mail scanners fetch links and some press buttons, so deciding needs the
    recipient signed in, and the page sends no referrer (the token must not leak).
    """
    if request.method not in ("GET", "POST"):
        return HttpResponse(status=405)
    if request.method == "POST" and not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    try:
        link = links.resolve(token, now=timezone.now())
        if request.user.is_authenticated:
            links.check_recipient(link, request.user)
    except links.LinkProblem as problem:
        if problem.is_guess:
            # A signed link cannot be guessed, so a good one is never refused; a forged
            # one, or another's, counts against this account (or address) and is
            # refused while it is locked (approvals.throttling).
            username = request.user.get_username() if request.user.is_authenticated else None
            lockout = throttling.lockout_of(request, username=username) or (
                throttling.record_failure(request, username=username, channel=Channel.EMAIL)
            )
            if lockout is not None:
                return _link_lockout_page(request, lockout)
        return _link_page(request, {"problem": problem}, status=_link_status(problem))
    node = task_forms.approval_of(link.task)
    context = {
        "link": link,
        "task": link.task,
        # The approval's form, filled in here as on the task's page.
        "task_form": task_forms.blank(node, attachments.of_request(link.task.run_id)),
        "task_form_required": bool(node and node.form_is_required),
        # Sending it back is offered as on the task's page: where allowed, rounds left.
        "may_request_changes": bool(
            node
            and node.may_request_changes
            and not rework_rounds.why_no_changes(
                run=link.task.run,
                definition=registry.get(
                    link.task.run.workflow_type, link.task.run.workflow_version
                ),
                node=node,
            )
        ),
        "signed_in": request.user.is_authenticated,
        "confirm": _confirmation(request, link.pk),
        "barred": (
            human_tasks.why_barred(task=link.task, user=request.user)
            if request.user.is_authenticated
            else ""
        ),
    }
    if request.method == "GET":
        return _link_page(request, context)
    if not constant_time_compare(request.POST.get("confirm", ""), context["confirm"]):
        context["error"] = gettext("This form expired. Please confirm again.")
        return _link_page(request, context, status=403)
    outcome = request.POST.get("outcome", "")
    # Only approving reads the form; rejecting needs its reason alone.
    files = attachments.of_request(link.task.run_id)
    values, form = (
        task_forms.read(node, request.POST, files) if outcome == "approved" else ({}, None)
    )
    context["comment"] = request.POST.get("comment", "")
    if form is not None:
        context["task_form"] = form
    try:
        if form is not None and form.has_errors:  # text workflows.cleaning refused
            raise human_tasks.InvalidRequest(
                gettext("Correct the fields marked in the form to approve. Nothing was decided.")
            )
        task = human_tasks.decide_by_link(
            token=token,
            user=request.user,
            outcome=outcome,
            comment=context["comment"],
            values=values,
            remote_addr=client_address(request),
        )
    except human_tasks.InvalidForm as refused:
        # The link stays unused: the decision's transaction rolled back with it.
        if form is not None:
            context["task_form"] = task_forms.with_errors(form, refused.errors)
        context["error"] = str(refused)
        return _link_page(request, context, status=refused.status)
    except (links.LinkProblem, human_tasks.TaskError) as error:
        context["error"] = str(error)
        status = _link_status(error) if isinstance(error, links.LinkProblem) else error.status
        return _link_page(request, context, status=status)
    return _link_page(request, {"task": task, "decided": True})


def _confirmation(request: HttpRequest, link_id: Any) -> str:
    """The email page's own CSRF token: bound to this link and this signed-in session.

    Django's CSRF check refuses the page's POST, because a page served with
    `Referrer-Policy: no-referrer` sends `Origin: null`. This token does the same
    job: another site can neither read it nor, without the session, forge it.
    """
    session = request.session.session_key or ""
    return salted_hmac("approvals.email-link.confirm", f"{link_id}:{session}").hexdigest()


def _link_status(problem: links.LinkProblem) -> int:
    """410 for a link that was good once (expired, used, stale); 400 for a token no link
    has the shape of; 403 for another one never good."""
    if problem.kind == "malformed":
        return 400
    return 410 if problem.kind in {"expired", "used", "stale"} else 403


def _link_page(request: HttpRequest, context: dict[str, Any], status: int = 200) -> HttpResponse:
    response = render(request, "approvals/inbox/email_link.html", context, status=status)
    response["Referrer-Policy"] = "no-referrer"
    return response


def _link_lockout_page(request: HttpRequest, lockout: throttling.Lockout) -> HttpResponse:
    response = _link_page(request, {"lockout": lockout}, status=429)
    response["Retry-After"] = str(lockout.retry_after)
    return response


# ---------------------------------------------------------------------------
# Out of office
# ---------------------------------------------------------------------------


def _moment(request: HttpRequest, name: str, label: str) -> datetime:
    """Read a date (or date and time) field, naive ones in the site's time zone, into UTC;
    raise Refused with the field's label in its message."""
    try:
        return clean_datetime(request.POST.get(name, ""), naive_in=timezone.get_current_timezone())
    except Refused as error:
        raise Refused(f"{label} {error}.") from None


@login_required
def away(request: HttpRequest) -> HttpResponse:
    error = ""
    if request.method == "POST":
        try:
            starts = _moment(request, "starts_at", gettext("The start date"))
            ends = _moment(request, "ends_at", gettext("The end date"))
        except Refused as problem:
            error = str(problem)
        else:
            substitute = request.POST.get("substitute", "").strip()
            try:
                human_tasks.set_substitution(
                    user=request.user,
                    substitute_username=substitute,
                    starts_at=starts,
                    ends_at=ends,
                )
            except human_tasks.TaskError as problem:
                error = str(problem)
            else:
                messages.success(
                    request, gettext("Your substitute will get your new tasks while away.")
                )
                if request.POST.get("hand_over"):
                    _say_handover(
                        request,
                        human_tasks.hand_over_held_tasks(
                            user=request.user, to_username=substitute, channel="inbox"
                        ),
                        substitute,
                    )
                return redirect("approvals:away")
    substitutions = request.user.substitutions.select_related("substitute")
    return render(
        request,
        "approvals/inbox/away.html",
        {
            "substitutions": substitutions,
            "held": human_tasks.held_tasks(request.user).count(),
            "error": error,
        },
        status=422 if error else 200,
    )


def _say_handover(request: HttpRequest, handover: human_tasks.Handover, to: str) -> None:
    if handover.delegated:
        count = len(handover.delegated)
        messages.success(
            request,
            ngettext(
                "Delegated %(count)d task to %(person)s. You stay its owner: you are told"
                " when it is decided, and may reassign it to yourself.",
                "Delegated %(count)d tasks to %(person)s. You stay their owner: you"
                " are told when each is decided, and may reassign any to yourself.",
                count,
            )
            % {"count": count, "person": to},
        )
    for task, why in handover.kept:
        messages.warning(
            request, gettext("Kept “%(title)s”: %(why)s") % {"title": task.title, "why": why}
        )
