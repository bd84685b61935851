"""The operators' view of runs (read-only rows, actions that go through the engine) and
the business calendars they edit."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from workflows import calendars, due_times, engine, registry
from workflows.client_address import client_address
from workflows.models import (
    ActivityLimiter,
    ApiToken,
    BusinessCalendar,
    Holiday,
    Signal,
    StepEvent,
    StepRun,
    WorkflowRun,
)
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
    fields = (
        "node",
        "round",
        "kind",
        "state",
        "attempt",
        "scheduled_at",
        "finished_at",
        "last_error",
    )
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
                    remote_addr=client_address(request),
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
    list_display = ("node", "round", "kind", "state", "attempt", "run", "due_at", "finished_at")
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


@admin.register(ActivityLimiter)
class ActivityLimiterAdmin(admin.ModelAdmin):
    """What each limited activity holds now. Read only: the claims write it, and a row
    deleted or edited would let more attempts start than the limits allow."""

    list_display = ("key", "slots_held", "window_start", "window_count", "updated_at")
    search_fields = ("key",)
    readonly_fields = [field.name for field in ActivityLimiter._meta.fields]

    @admin.display(description=_("slots held when last counted"))
    def slots_held(self, limiter: ActivityLimiter) -> int:
        return len(limiter.holders)

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

    @admin.action(description=_("Revoke the selected tokens"))
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)


def _definitions_using(calendar: BusinessCalendar) -> list[str]:
    """The registered definitions that count business time on `calendar`."""
    return sorted(
        str(definition)
        for definition in registry.all_definitions()
        if calendar.name in due_times.calendars_named_by(definition)
    )


class HolidayInline(admin.TabularInline):
    model = Holiday
    extra = 3
    fields = ("date", "name")
    ordering = ("date",)


@admin.register(BusinessCalendar)
class BusinessCalendarAdmin(admin.ModelAdmin):
    """Working hours, time zone and holidays. A calendar a definition names can be edited
    but neither renamed nor deleted: its business time would have nothing to count on.
    Edits apply to due times computed afterwards; stored ones stay as they are."""

    list_display = ("name", "time_zone", "working_week", "holiday_count", "updated_at")
    search_fields = ("name", "description")
    fieldsets = (
        (None, {"fields": ("name", "description", "time_zone", "used_by")}),
        (
            "Working hours",
            {
                "fields": (
                    "monday",
                    "tuesday",
                    "wednesday",
                    "thursday",
                    "friday",
                    "saturday",
                    "sunday",
                ),
                "description": "Local to the time zone. Write 09:00-12:00, 13:00-17:00 for a "
                "break; leave a day blank if nobody works then.",
            },
        ),
    )
    inlines = (HolidayInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[BusinessCalendar]:
        return super().get_queryset(request).annotate(holiday_total=Count("holidays"))

    def get_readonly_fields(
        self, request: HttpRequest, obj: BusinessCalendar | None = None
    ) -> tuple[str, ...]:
        if obj is not None and _definitions_using(obj):
            return ("used_by", "name")
        return ("used_by",)

    def get_actions(self, request: HttpRequest) -> dict:
        # Deleting from the list would skip the per-calendar refusal below.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def has_delete_permission(
        self, request: HttpRequest, obj: BusinessCalendar | None = None
    ) -> bool:
        if obj is not None and _definitions_using(obj):
            return False
        return super().has_delete_permission(request, obj)

    @admin.display(description=_("Used by"))
    def used_by(self, obj: BusinessCalendar) -> str:
        if obj.pk is None:
            return "-"
        names = _definitions_using(obj)
        if not names:
            return gettext("no registered definition (it may be deleted)")
        return gettext("%(types)s (so it cannot be renamed or deleted)") % {
            "types": ", ".join(names)
        }

    @admin.display(description=_("Working week"))
    def working_week(self, obj: BusinessCalendar) -> str:
        return ", ".join(
            f"{day[:3].title()} {getattr(obj, day)}"
            for day in calendars.WEEKDAYS
            if getattr(obj, day).strip()
        )

    @admin.display(description=_("Holidays"), ordering="holiday_total")
    def holiday_count(self, obj: BusinessCalendar) -> int:
        return obj.holiday_total
