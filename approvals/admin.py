"""Operators' admin for human tasks: read-only rows; transitions go through the human_tasks.

django-fsm-2's admin offers the legal transitions of a task (release, reassign,
decide); each is carried out by the same use case as the inbox, with channel
"admin", so it is authorised, audited and signals the run like any other.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _
from django_fsm.admin import FSMAdminMixin

from approvals import human_tasks
from approvals.models import (
    Comment,
    EmailLink,
    GroupManager,
    HumanTask,
    Notification,
    NotificationSettings,
    ReportingLine,
    Substitution,
)
from approvals.states import Channel, Outcome
from workflows.client_address import client_address


class ReassignForm(forms.Form):
    to = forms.CharField(label=_("Reassign to (username)"), max_length=150)
    comment = forms.CharField(widget=forms.Textarea, required=False)


class DecisionForm(forms.Form):
    # A reviewer's decisions; a resubmission is the requester's, on the request's page.
    outcome = forms.ChoiceField(
        choices=[
            (outcome.value, outcome.label)
            for outcome in (Outcome.APPROVED, Outcome.REJECTED, Outcome.CHANGES_REQUESTED)
        ]
    )
    comment = forms.CharField(
        widget=forms.Textarea,
        required=False,
        help_text=_("Required to reject or to request changes: say why."),
    )
    # The task page draws the approval's form; here an operator types its values as JSON.
    form_values = forms.JSONField(
        required=False,
        label=_("Form values"),
        help_text=_(
            "To approve a task whose approval has a form: its values as JSON, e.g. "
            '{"cost_centre": "FIN-1200"}. A rejection takes none.'
        ),
    )


class CommentInline(admin.TabularInline):
    model = Comment
    extra = 0
    can_delete = False
    fields = ("created_at", "author", "body")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(HumanTask)
class HumanTaskAdmin(FSMAdminMixin, admin.ModelAdmin):
    fsm_fields = ["state"]
    fsm_forms = {"reassign": ReassignForm, "complete": DecisionForm}
    list_display = (
        "title",
        "workflow_type",
        "state",
        "outcome",
        "assignee",
        "priority",
        "due_at",
        "escalation_level",
    )
    list_filter = ("state", "kind", "workflow_type", "priority", "outcome", "channel")
    search_fields = ("title", "=run__id", "assignee__username")
    list_select_related = ("assignee",)
    readonly_fields = [field.name for field in HumanTask._meta.fields] + [
        "candidate_users",
        "candidate_groups",
    ]
    inlines = (CommentInline,)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def _apply_fsm_transition(
        self,
        *,
        obj: HumanTask,
        transition_name: str,
        request: HttpRequest,
        kwargs: dict[str, Any] | None = None,
    ) -> bool:
        """Carry a transition out through its use case instead of changing the row here."""
        kwargs = kwargs or {}
        common = {
            "task_id": obj.pk,
            "user": request.user,
            "channel": Channel.ADMIN,
            "expected_version": obj.version,
            "remote_addr": client_address(request),
        }
        try:
            if transition_name == "release":
                human_tasks.release_human_task(**common)
            elif transition_name == "reassign":
                human_tasks.reassign_human_task(
                    to_username=kwargs["to"], comment=kwargs.get("comment", ""), **common
                )
            elif transition_name == "complete" and kwargs.get("outcome") == Outcome.APPROVED:
                values = kwargs.get("form_values") or None
                if values is not None and not isinstance(values, dict):
                    raise human_tasks.InvalidRequest(
                        _('Form values must be a JSON object, e.g. {"cost_centre": "FIN-1200"}.')
                    )
                human_tasks.approve_human_task(
                    comment=kwargs.get("comment", ""),
                    values=values,
                    **common,
                )
            elif transition_name == "complete" and kwargs.get("outcome") == Outcome.REJECTED:
                human_tasks.reject_human_task(reason=kwargs.get("comment", ""), **common)
            elif transition_name == "complete" and (
                kwargs.get("outcome") == Outcome.CHANGES_REQUESTED
            ):
                human_tasks.request_changes(reason=kwargs.get("comment", ""), **common)
            elif transition_name == "complete":
                raise human_tasks.InvalidRequest(_("Choose approve, reject or request changes."))
            else:
                raise human_tasks.NotAllowed(
                    _("“%(transition)s” is made by the engine only.")
                    % {"transition": transition_name}
                )
        except human_tasks.TaskError as error:
            self.message_user(request, str(error), messages.ERROR)
            return False
        self.message_user(
            request, f"Done: {self.get_fsm_label_by_name(obj, transition_name)}.", messages.SUCCESS
        )
        return True

    def get_fsm_label_by_name(self, obj: HumanTask, transition_name: str) -> str:
        transition = self._get_fsm_transition_by_name(obj=obj, transition_name=transition_name)
        return self.get_fsm_label(transition).rstrip("…")


@admin.register(ReportingLine)
class ReportingLineAdmin(admin.ModelAdmin):
    list_display = ("user", "manager")
    search_fields = ("user__username", "manager__username")
    autocomplete_fields = ()


@admin.register(GroupManager)
class GroupManagerAdmin(admin.ModelAdmin):
    list_display = ("group", "manager")


@admin.register(Substitution)
class SubstitutionAdmin(admin.ModelAdmin):
    list_display = ("user", "substitute", "starts_at", "ends_at")
    search_fields = ("user__username", "substitute__username")


@admin.register(EmailLink)
class EmailLinkAdmin(admin.ModelAdmin):
    list_display = ("task", "recipient", "task_version", "created_at", "expires_at", "used_at")
    readonly_fields = [field.name for field in EmailLink._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    """What people were told: read-only, for answering "did bob hear of it?"."""

    list_display = ("user", "kind", "text", "created_at", "read_at", "emailed_at")
    list_filter = ("kind",)
    search_fields = ("user__username", "text")
    readonly_fields = [field.name for field in Notification._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(NotificationSettings)
class NotificationSettingsAdmin(admin.ModelAdmin):
    list_display = ("user", "email")
    list_filter = ("email",)
    search_fields = ("user__username",)
