"""The operators' run console: find runs, see one whole, and steer it.

Like the inbox, each view reads top to bottom: check that the person may use the
console (403 saying why otherwise), make one call (a selector or a console
service), then redirect (post/redirect/get) or render the page, or only the named
partial htmx asked for. An action is confirmed before it is taken: GET shows what
it will do (htmx: only the action panel changes), POST does it. A refusal is shown
on the run's page in plain words, with the status the API would answer.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import formats, timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from approvals import audit, request_pages
from approvals.act import Act
from approvals.console import selectors as console_selectors
from approvals.console import services, sla_snapshot, task_selectors
from approvals.console.selectors import RunFilters
from approvals.console.sla_charts import sla_charts
from approvals.models import WebhookDelivery, WebhookEndpoint
from approvals.notify import webhooks
from approvals.states import Sla, WebhookEvent
from workflows.client_address import client_address
from workflows.states import RunState


def _problem(request: HttpRequest, message: str, status: int) -> HttpResponse:
    return render(request, "approvals/problem.html", {"message": message}, status=status)


def _act(request: HttpRequest, *, reason: str) -> Act:
    """Who acts on the console: the signed-in person, from their address, saying why."""
    return Act(
        user=request.user,
        channel=services.CHANNEL,
        remote_addr=client_address(request),
        reason=reason,
    )


def _refused(request: HttpRequest) -> HttpResponse | None:
    refusal = services.console_refusal(request.user)
    return _problem(request, refusal, status=403) if refusal else None


# ---------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------


@login_required
@require_GET
def runs(request: HttpRequest) -> HttpResponse:
    """Every run, newest first, filtered; htmx asks for the list alone when filters change."""
    if refused := _refused(request):
        return refused
    filters = RunFilters.from_query(request.GET)
    page = console_selectors.runs_page(filters=filters)
    context = {
        "filters": filters,
        "page": page,
        "query": _list_query(request),
        "states": RunState.choices,
        "types": console_selectors.workflow_types(),
        "searchable": console_selectors.searchable_fields(),
        # Dead letters listed for an operator: tick several and retry them at once.
        "bulk": filters.state == RunState.DEAD_LETTERED
        and not services.operate_refusal(request.user, "act"),
    }
    if request.htmx and request.htmx.target == "run-list":
        return render(request, "approvals/console/runs.html#run-list", context)
    return render(request, "approvals/console/runs.html", context)


# ---------------------------------------------------------------------------
# Human tasks: the SLA dashboard and the list behind its numbers
# ---------------------------------------------------------------------------


@login_required
@require_GET
def sla(request: HttpRequest) -> HttpResponse:
    """Open human tasks against their due times, by type, group and person; the oldest
    overdue ones; decisions and finished runs per day, failure rates and cycle times.
    Operators see everything, a group's manager the tasks of the groups they manage."""
    group_ids, refusal = services.task_overview_scope(request.user, page=_("The SLA dashboard"))
    if refusal:
        return _problem(request, refusal, status=403)
    board = sla_snapshot.dashboard(now=timezone.now(), group_ids=group_ids)
    context = {"board": board, "charts": sla_charts(board)}
    return render(request, "approvals/console/sla.html", context)


@login_required
@require_GET
def tasks(request: HttpRequest) -> HttpResponse:
    """Every human task, open or decided, newest first, filtered: the list behind each of
    the SLA dashboard's numbers. Its viewers are the dashboard's, scoped the same way."""
    group_ids, refusal = services.task_overview_scope(request.user, page=_("The task list"))
    if refusal:
        return _problem(request, refusal, status=403)
    filters = task_selectors.read_filters(request.GET, group_ids=group_ids)
    page = task_selectors.tasks_page(filters=filters, group_ids=group_ids, now=timezone.now())
    types = console_selectors.workflow_types()
    if filters.workflow_type and filters.workflow_type not in types:
        # A type no longer registered still has its tasks, and the dashboard links to them.
        types = [*types, filters.workflow_type]
    context = {
        "filters": filters,
        "page": page,
        "query": _list_query(request),
        "states": task_selectors.STATES,
        "slas": Sla.choices,
        "types": types,
        # A group's manager may not open runs in the console: no dead links for them.
        "may_open_runs": group_ids is None,
    }
    if request.htmx and request.htmx.target == "task-list":
        return render(request, "approvals/console/tasks.html#task-list", context)
    return render(request, "approvals/console/tasks.html", context)


def _list_query(request: HttpRequest) -> str:
    """The list's query string less its cursor: where the first page is, and what the
    next page's link adds its cursor to."""
    return urlencode(
        {key: value for key, value in request.GET.items() if key != "cursor" and value}
    )


# ---------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------


@login_required
@require_GET
def run_detail(request: HttpRequest, run_id: UUID) -> HttpResponse:
    if refused := _refused(request):
        return refused
    return _run_page(request, run_id)


def _run_page(
    request: HttpRequest, run_id: UUID, *, status: int = 200, **extra: Any
) -> HttpResponse:
    page = console_selectors.run_page(run_id=run_id)
    if page is None:
        return _problem(request, _("There is no such run."), status=404)
    context = {
        "page": page,
        "run": page.run,
        "state": request_pages.state_words(page.run.state),
        "may_operate": not services.operate_refusal(request.user, "act"),
        **extra,
    }
    template = "approvals/console/run.html"
    if request.htmx and request.htmx.target == "action-panel":
        template += "#action-panel"
    return render(request, template, context, status=status)


@login_required
def act(request: HttpRequest, run_id: UUID, action: str) -> HttpResponse:
    """GET asks to confirm `action` on the run; POST takes it."""
    if refused := _refused(request):
        return refused
    chosen = services.ACTIONS.get(action)
    if chosen is None:
        return _problem(request, _("There is no such action."), status=404)
    if request.method == "GET":
        refusal = services.operate_refusal(request.user, chosen.what)
        status = 403 if refusal else 200
        state = console_selectors.run_state(run_id=run_id)
        if not refusal and state is not None and state not in chosen.offered_in:
            words = request_pages.state_words(state)
            refusal = _("%(action)s does not fit a run that is %(state)s.") % {
                "action": chosen.label,
                "state": words,
            }
            status = 409
        return _run_page(
            request, run_id, status=status, confirm=None if refusal else chosen, error=refusal
        )
    if request.method != "POST":
        return HttpResponse(status=405, headers={"Allow": "GET, POST"})
    try:
        done = services.USE_CASES[action](
            run_id=run_id,
            act=_act(request, reason=request.POST.get("reason", "")),
        )
    except services.ConsoleError as refused:
        return _run_page(request, run_id, status=refused.status, error=str(refused))
    if done.changed:
        messages.success(request, chosen.done)
    else:
        messages.info(
            request,
            _("Nothing to do: it is %(state)s already.") % {"state": done.run.get_state_display()},
        )
    return redirect("console:run", run_id=run_id)


@login_required
def skip(request: HttpRequest, run_id: UUID, node: str) -> HttpResponse:
    """GET asks for the step's result; POST skips the step with it."""
    if refused := _refused(request):
        return refused
    if request.method == "GET":
        refusal = services.operate_refusal(request.user, services.SKIP_WHAT)
        return _run_page(
            request,
            run_id,
            status=403 if refusal else 200,
            skip_node="" if refusal else node,
            error=refusal,
        )
    if request.method != "POST":
        return HttpResponse(status=405, headers={"Allow": "GET, POST"})
    result = request.POST.get("result", "")
    try:
        services.skip_step(
            run_id=run_id,
            node=node,
            result=result,
            act=_act(request, reason=request.POST.get("reason", "")),
        )
    except services.ConsoleError as refused:
        # Keep what was typed, so a typo in the JSON costs one fix, not a retype.
        keep = {"skip_node": node, "skip_result": result} if refused.status == 422 else {}
        return _run_page(request, run_id, status=refused.status, error=str(refused), **keep)
    messages.success(
        request, _("Skipped %(node)s with the result you gave; the run goes on.") % {"node": node}
    )
    return redirect("console:run", run_id=run_id)


@login_required
def move(request: HttpRequest, run_id: UUID) -> HttpResponse:
    """GET asks where to and why; POST moves the run there."""
    if refused := _refused(request):
        return refused
    if request.method == "GET":
        refusal = services.operate_refusal(request.user, services.MOVE_WHAT)
        return _run_page(
            request, run_id, status=403 if refusal else 200, moving=not refusal, error=refusal
        )
    if request.method != "POST":
        return HttpResponse(status=405, headers={"Allow": "GET, POST"})
    node = request.POST.get("to", "")
    try:
        services.move_run(
            run_id=run_id, node=node, act=_act(request, reason=request.POST.get("reason", ""))
        )
    except services.ConsoleError as refused:
        return _run_page(request, run_id, status=refused.status, error=str(refused), moving=True)
    messages.success(
        request, _("Moved to %(node)s: what was in flight is cancelled.") % {"node": node}
    )
    return redirect("console:run", run_id=run_id)


@login_required
@require_POST
def retry_dead_letters(request: HttpRequest) -> HttpResponse:
    """Retry the dead letters ticked on the runs list, then go back to it."""
    if refused := _refused(request):
        return refused
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = ""
    run_ids: list[UUID] = []
    for value in request.POST.getlist("run"):
        try:
            run_ids.append(UUID(value))
        except ValueError:
            return _problem(
                request, _("%(value)s is not a run id.") % {"value": repr(value)}, status=422
            )
    if not run_ids:
        messages.info(request, _("Tick the dead letters to retry first."))
        return redirect(back or "console:runs")
    try:
        outcomes = services.retry_dead_letters(
            run_ids=run_ids,
            act=_act(request, reason=request.POST.get("reason", "")),
        )
    except services.ConsoleError as refused:
        return _problem(request, str(refused), status=refused.status)
    retried = [run_id for run_id, outcome in outcomes.items() if isinstance(outcome, services.Done)]
    if retried:
        messages.success(
            request,
            ngettext(
                "Retrying %(count)d dead letter.", "Retrying %(count)d dead letters.", len(retried)
            )
            % {"count": len(retried)},
        )
    for run_id, outcome in outcomes.items():
        if isinstance(outcome, services.ConsoleError):
            messages.warning(request, f"{run_id}: {outcome}")
    return redirect(back or "console:runs")


# ---------------------------------------------------------------------------
# Moving live runs to another version
# ---------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def versions(request: HttpRequest) -> HttpResponse:
    """Move a type's live runs to another version: GET with a plan previews it (a dry
    run: which runs can move and why the others cannot), POST applies it."""
    if refused := _refused(request):
        return refused
    data = request.POST if request.method == "POST" else request.GET
    context: dict[str, Any] = {
        "types": console_selectors.versioned_types(),
        "form": {name: data.get(name, "") for name in ("type", "from", "to", "renames", "reason")},
    }
    if not data.get("type"):
        return render(request, "approvals/console/versions.html", context)
    try:
        report = services.migrate_runs(
            workflow_type=data.get("type", ""),
            from_version=_version_number(data.get("from", ""), "from"),
            to_version=_version_number(data.get("to", ""), "to"),
            renames=services.parse_renames(data.get("renames", "")),
            apply=request.method == "POST",
            act=_act(request, reason=data.get("reason", "")),
        )
    except services.ConsoleError as refused:
        context["error"] = str(refused)
        return render(request, "approvals/console/versions.html", context, status=refused.status)
    context["report"] = report
    if report.applied:
        messages.success(
            request,
            ngettext(
                "Moved %(count)d run; %(blocked)d could not move.",
                "Moved %(count)d runs; %(blocked)d could not move.",
                len(report.moved),
            )
            % {"count": len(report.moved), "blocked": len(report.blocked)},
        )
    return render(request, "approvals/console/versions.html", context)


def _version_number(raw: str, which: str) -> int:
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        if which == "from":
            message = _("The from version must be a whole number, 1 or more.")
        else:
            message = _("The to version must be a whole number, 1 or more.")
        raise services.InvalidInput(message)
    return int(raw)


# ---------------------------------------------------------------------------
# The audit export
# ---------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def audit_export(request: HttpRequest) -> HttpResponse:
    """Download audit entries with their chain values, for auditors to verify offline:
    GET shows the filters, POST streams the file (it may anchor the chain's head with a
    new checkpoint first, so it is not a GET). Operators only: the log names people,
    their addresses and their comments."""
    refusal = services.console_refusal(request.user) or services.operate_refusal(
        request.user, _("download the audit log")
    )
    if refusal:
        return _problem(request, refusal, status=403)
    data = request.POST if request.method == "POST" else request.GET
    context: dict[str, Any] = {
        "types": console_selectors.workflow_types(),
        "formats": audit.EXPORT_FORMATS,
        "form": {name: data.get(name, "") for name in ("from", "to", "type", "format")},
    }
    if request.method == "GET":
        return render(request, "approvals/console/audit.html", context)
    try:
        filters = audit.ExportFilters.parse(
            start=data.get("from"), end=data.get("to"), workflow_type=data.get("type")
        )
        export = audit.start_export(
            filters=filters, format=data.get("format") or "csv", now=timezone.now()
        )
    except audit.ExportFilterError as error:
        context["error"] = str(error)
        return render(request, "approvals/console/audit.html", context, status=400)
    except audit.AuditChainBroken as error:
        context["error"] = _("Nothing was exported. %(error)s") % {"error": error}
        return render(request, "approvals/console/audit.html", context, status=409)
    response = StreamingHttpResponse(export.chunks(), content_type=export.media_type)
    response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
    response["Cache-Control"] = "no-store"
    return response


# ---------------------------------------------------------------------------
# Outbound webhooks
# ---------------------------------------------------------------------------

# An endpoint's page lists its newest deliveries, this many.
WEBHOOK_LOG_SIZE = 50


def _webhooks_refused(request: HttpRequest) -> HttpResponse | None:
    refusal = services.console_refusal(request.user) or services.operate_refusal(
        request.user, _("manage webhooks")
    )
    return _problem(request, refusal, status=403) if refusal else None


@login_required
@require_http_methods(["GET", "POST"])
def webhooks_list(request: HttpRequest) -> HttpResponse:
    """The registered endpoints; POST registers one (operators only)."""
    if refused := _webhooks_refused(request):
        return refused
    context: dict[str, Any] = {
        "endpoints": WebhookEndpoint.objects.all(),
        "events": WebhookEvent.choices,
        "form": {"url": "", "description": "", "event_types": []},
    }
    if request.method == "POST":
        context["form"] = {
            "url": request.POST.get("url", ""),
            "description": request.POST.get("description", ""),
            "event_types": request.POST.getlist("event_types"),
        }
        try:
            endpoint = webhooks.register_endpoint(
                **context["form"], by=request.user, now=timezone.now()
            )
        except webhooks.InvalidEndpoint as error:
            context["error"] = str(error)
            return render(request, "approvals/console/webhooks.html", context, status=422)
        messages.success(
            request,
            _("Registered %(url)s. Its signing secret is on its page.") % {"url": endpoint.url},
        )
        return redirect("console:webhook", endpoint_id=endpoint.pk)
    return render(request, "approvals/console/webhooks.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def webhook_detail(request: HttpRequest, endpoint_id: UUID) -> HttpResponse:
    """One endpoint: its secret, its events and its delivery log; POST switches it off or on."""
    if refused := _webhooks_refused(request):
        return refused
    endpoint = WebhookEndpoint.objects.filter(pk=endpoint_id).first()
    if endpoint is None:
        return _problem(request, _("No such webhook endpoint."), status=404)
    if request.method == "POST":
        active = request.POST.get("is_active") == "true"
        webhooks.update_endpoint(endpoint_id=endpoint.pk, is_active=active)
        messages.success(
            request,
            (_("%(url)s is switched on.") if active else _("%(url)s is switched off."))
            % {"url": endpoint.url},
        )
        return redirect("console:webhook", endpoint_id=endpoint.pk)
    context = {
        "endpoint": endpoint,
        "deliveries": webhooks.delivery_log(endpoint=endpoint, limit=WEBHOOK_LOG_SIZE),
        "now": timezone.now(),
    }
    return render(request, "approvals/console/webhook.html", context)


@login_required
@require_POST
def rotate_webhook_secret(request: HttpRequest, endpoint_id: UUID) -> HttpResponse:
    """Give an endpoint a new secret; the old one signs beside it for the overlap."""
    if refused := _webhooks_refused(request):
        return refused
    try:
        endpoint = webhooks.rotate_secret(endpoint_id=endpoint_id, now=timezone.now())
    except WebhookEndpoint.DoesNotExist:
        return _problem(request, _("No such webhook endpoint."), status=404)
    if endpoint.previous_secret_until:
        until = formats.date_format(
            timezone.localtime(endpoint.previous_secret_until), _("Y-m-d H:i")
        )
        messages.success(
            request, _("New secret below. The old one also signs until %(when)s.") % {"when": until}
        )
    else:
        messages.success(request, _("New secret below. The old one no longer signs."))
    return redirect("console:webhook", endpoint_id=endpoint_id)


@login_required
@require_POST
def delete_webhook(request: HttpRequest, endpoint_id: UUID) -> HttpResponse:
    """Delete an endpoint and its log, cancelling the deliveries still trying."""
    if refused := _webhooks_refused(request):
        return refused
    try:
        deleted = webhooks.delete_endpoint(endpoint_id=endpoint_id, now=timezone.now())
    except WebhookEndpoint.DoesNotExist:
        return _problem(request, _("No such webhook endpoint."), status=404)
    cancelled = deleted.cancelled_deliveries
    messages.success(
        request,
        (
            _("Deleted %(url)s, and cancelled %(count)s deliveries still trying.")
            if cancelled
            else _("Deleted %(url)s.")
        )
        % {"url": deleted.url, "count": cancelled},
    )
    return redirect("console:webhooks")


@login_required
@require_POST
def redeliver_webhook(request: HttpRequest, delivery_id: UUID) -> HttpResponse:
    """Send a delivery again under the same message id, and go back to its endpoint's log."""
    if refused := _webhooks_refused(request):
        return refused
    delivery = WebhookDelivery.objects.filter(pk=delivery_id).first()
    if delivery is None:
        return _problem(request, _("No such webhook delivery."), status=404)
    webhooks.redeliver(delivery_id=delivery.pk)
    messages.success(request, _("Sending %(id)s again.") % {"id": delivery.message_id})
    return redirect("console:webhook", endpoint_id=delivery.endpoint_id)
