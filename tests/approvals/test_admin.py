"""Operators in the admin: legal transitions of a task, carried out by the services."""

from __future__ import annotations

import pytest
from auditlog.models import LogEntry
from django.urls import reverse

from approvals.states import Channel, TaskState

pytestmark = pytest.mark.django_db


class TestHumanTaskAdmin:
    def test_offers_the_legal_transitions_only(self, client, admin_operator, manager_task):
        client.force_login(admin_operator)

        response = client.get(reverse("admin:approvals_humantask_change", args=[manager_task.pk]))

        assert response.status_code == 200
        assert "Reassign…" in response.text
        assert "Decide…" in response.text
        assert "escalate" not in response.text.lower().split("transition")[-1]

    def test_an_operator_reassigns_through_the_service(
        self, transition_url, client, admin_operator, manager_task
    ):
        client.force_login(admin_operator)

        client.post(transition_url(manager_task, "reassign"), {"to": "bob", "comment": "cover"})

        manager_task.refresh_from_db()
        entry = LogEntry.objects.get_for_object(manager_task).latest("id")
        assert manager_task.assignee.username == "bob"
        assert entry.additional_data["event"] == "reassigned"
        assert entry.additional_data["channel"] == Channel.ADMIN
        assert entry.actor == admin_operator

    def test_an_operator_decides_and_the_run_moves_on(
        self, transition_url, client, admin_operator, manager_task, drive
    ):
        client.force_login(admin_operator)

        client.post(transition_url(manager_task, "complete"), {"outcome": "approved"})

        manager_task.refresh_from_db()
        assert manager_task.state == TaskState.COMPLETED
        assert manager_task.channel == Channel.ADMIN
        assert drive(manager_task.run).state == "succeeded"

    def test_a_refused_transition_is_reported_and_changes_nothing(
        self, transition_url, client, admin_operator, manager_task
    ):
        client.force_login(admin_operator)

        response = client.post(
            transition_url(manager_task, "complete"),
            {"outcome": "rejected", "comment": ""},
            follow=True,
        )

        manager_task.refresh_from_db()
        assert "a reason is required" in response.text
        assert manager_task.state == TaskState.CLAIMED

    def test_an_operator_sends_it_back_for_changes_with_a_reason(
        self, transition_url, client, admin_operator, manager_task
    ):
        client.force_login(admin_operator)

        client.post(
            transition_url(manager_task, "complete"),
            {"outcome": "changes_requested", "comment": "Which train?"},
            follow=True,
        )

        manager_task.refresh_from_db()
        assert (manager_task.outcome, manager_task.channel) == ("changes_requested", "admin")

    def test_the_audit_log_is_read_only(self, client, admin_operator, manager_task, admin_user):
        entry = LogEntry.objects.get_for_object(manager_task).first()
        client.force_login(admin_user)

        response = client.post(
            reverse("admin:auditlog_logentry_delete", args=[entry.pk]), {"post": "yes"}
        )

        assert response.status_code == 403
        assert LogEntry.objects.filter(pk=entry.pk).exists()


class TestDecidingATaskWithAForm:
    def test_an_operator_approves_with_the_forms_values_as_json(
        self, transition_url, client, admin_operator, finance_task
    ):
        client.force_login(admin_operator)

        client.post(
            transition_url(finance_task, "complete"),
            {"outcome": "approved", "form_values": '{"cost_centre": "FIN-1200"}'},
        )

        finance_task.refresh_from_db()
        assert (finance_task.outcome, finance_task.form_values) == (
            "approved",
            {"cost_centre": "FIN-1200"},
        )

    def test_approving_without_the_values_is_refused_saying_what_is_missing(
        self, transition_url, client, admin_operator, finance_task
    ):
        client.force_login(admin_operator)

        response = client.post(
            transition_url(finance_task, "complete"), {"outcome": "approved"}, follow=True
        )

        finance_task.refresh_from_db()
        assert "Fill in the form to approve: Cost centre: This is required." in response.text
        assert finance_task.state == TaskState.OPEN
