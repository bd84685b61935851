"""The operators' view of runs: read-only rows, and actions that go through the engine."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from workflows import engine
from workflows.models import ApiToken, Signal, StepEvent, StepRun, WorkflowRun
from workflows.operating import act_on_run
from workflows.tokens import issue_token


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class StepRunInline(ReadOnlyInline):
    model = StepRun
    fields = ("node", "kind", "state", "attempt", "scheduled_at", "finished_at", "last_error")
    readonly_fields = fields
    ordering = ("id",)


class StepEventInline(ReadOnlyInline):
    model = StepEvent
    fields = ("at", "node", "kind", "attempt", "detail")
    readonly_fields = fields


class SignalInline(ReadOnlyInline):
    model = Signal
    fields = ("received_at", "name", "signal_id", "payload", "consumed_by", "consumed_at")
    readonly_fields = fields


def _engine_action(
    operation: Callable[..., WorkflowRun], done: str, description: str
) -> Callable[[admin.ModelAdmin, HttpRequest, QuerySet[WorkflowRun]], None]:
    """An admin action that calls one engine use case per selected run (audited through
    the run-action hooks) and reports each."""

    def action(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> None:
        for run in queryset:
            try:
                act_on_run(
                    use_case=operation,
                    run_id=run.pk,
                    actor=request.user,
                    channel="admin",
                    remote_addr=request.META.get("REMOTE_ADDR"),
                )
            except engine.EngineError as error:
                modeladmin.message_user(request, f"{run.pk}: {error}", messages.WARNING)
            else:
                modeladmin.message_user(request, f"{run.pk}: {done}.", messages.SUCCESS)

    action.__name__ = operation.__name__
    return admin.action(description=description, permissions=["operate"])(action)


@admin.register(WorkflowRun)
class WorkflowRunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "workflow_type",
        "workflow_version",
        "state",
        "correlation_id",
        "created_at",
        "finished_at",
    )
    list_filter = ("state", "workflow_type", "created_at")
    search_fields = ("=id", "correlation_id", "idempotency_key")
    date_hierarchy = "created_at"
    readonly_fields = [field.name for field in WorkflowRun._meta.fields]
    inlines = (StepRunInline, SignalInline, StepEventInline)
    actions = (
        _engine_action(
            engine.retry_dead_letter,
            "retrying its failed compensation",
            "Retry the failed step of dead-lettered runs",
        ),
        _engine_action(
            engine.resume_dead_letter,
            "resumed past its failed compensation",
            "Resume dead-lettered runs past the failed step (undone by hand)",
        ),
        _engine_action(engine.cancel_run, "cancelling", "Cancel runs"),
        _engine_action(engine.pause_run, "paused", "Pause runs"),
        _engine_action(engine.resume_run, "resumed", "Resume paused runs"),
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("workflows.operate_workflowrun")


@admin.register(StepRun)
class StepRunAdmin(admin.ModelAdmin):
    list_display = ("node", "kind", "state", "attempt", "run", "due_at", "finished_at")
    list_filter = ("state", "kind", "run__workflow_type")
    search_fields = ("=run__id", "node")
    readonly_fields = [field.name for field in StepRun._meta.fields]
    list_select_related = ("run",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(StepEvent)
class StepEventAdmin(admin.ModelAdmin):
    list_display = ("at", "node", "kind", "attempt", "run")
    list_filter = ("kind", "run__workflow_type")
    search_fields = ("=run__id", "node")
    readonly_fields = [field.name for field in StepEvent._meta.fields]
    list_select_related = ("run",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Issue a token (its secret is shown once, in a message) and revoke it."""

    list_display = ("prefix", "user", "name", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("user__username", "name", "prefix")
    fields = ("user", "name", "revoked_at")
    actions = ("revoke",)

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> tuple:
        return ("user",) if obj else ()

    def save_model(self, request: HttpRequest, obj: ApiToken, form: object, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        token, secret = issue_token(user=obj.user, name=obj.name)
        obj.pk = token.pk
        self.message_user(
            request, f"Copy this token now; it will not be shown again: {secret}", messages.WARNING
        )

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)
