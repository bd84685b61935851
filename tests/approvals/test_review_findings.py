"""Holes found in review of the inbox, links, audit and API, each pinned by a test."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import pytest
from auditlog.models import LogEntry
from django.urls import reverse

from approvals import human_tasks
from approvals.audit import verify_audit_chain
from approvals.notify import links
from approvals.states import Channel, TaskState
from workflows import engine
from workflows.tokens import issue_token

pytestmark = pytest.mark.django_db

INBOX = Channel.INBOX


def bearer(user) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(user=user)[1]}"}


class TestReservedApprovalSignals:
    def test_the_starter_cannot_approve_their_own_request_by_signal(
        self, client, alice, start_expense
    ):
        run = start_expense()
        run.started_by = alice
        run.save()

        response = client.post(
            f"/api/v1/workflows/{run.pk}/signals/manager_approval.approved",
            {"payload": {}},
            content_type="application/json",
            headers=bearer(alice),
        )

        assert response.status_code == 403
        assert run.human_tasks.get().state == TaskState.CLAIMED
        assert not run.signals.exists()

    def test_approval_signal_ids_are_reserved(self, start, drive):
        run = drive(start("test_signalled", {}))

        with pytest.raises(engine.IllegalRunOperation, match="reserved for approvals"):
            engine.signal_run(run_id=run.pk, name="go", signal_id="approval-step-1")


class TestAuditAddress:
    def test_a_forged_forwarded_for_header_neither_lands_nor_breaks_the_chain(
        self, client, carol, manager_task
    ):
        client.force_login(carol)

        client.post(
            reverse("approvals:approve", args=[manager_task.pk]),
            headers={"X-Forwarded-For": "6.6.6.6"},
        )

        entry = LogEntry.objects.get(additional_data__event="approved")
        assert entry.remote_addr == "127.0.0.1"
        assert verify_audit_chain().intact


class TestNOfMIsNPeople:
    def test_one_person_cannot_decide_two_shares(self, people, start, drive):
        run = drive(start("test_two_of_three", {}))
        bobs_own, finance_share = run.human_tasks.get(assignee=people["bob"]), None
        finance_share = run.human_tasks.filter(state=TaskState.OPEN).get()
        human_tasks.approve_human_task(task_id=bobs_own.pk, user=people["bob"], channel=INBOX)

        with pytest.raises(human_tasks.TaskConflict, match="another share"):
            human_tasks.approve_human_task(
                task_id=finance_share.pk, user=people["bob"], channel=INBOX
            )

        assert drive(run).steps.get(node="board").state == "waiting"


class TestKeepWaiting:
    def test_past_the_last_level_a_deadline_only_moves_the_due_time(
        self, people, start, drive, mailoutbox, django_capture_on_commit_callbacks
    ):
        run = drive(start("test_deadline_waits", {}))
        task = run.human_tasks.get()
        engine.sweep(now=task.created_at + timedelta(hours=2))  # level 1: opens to finance
        human_tasks.claim_human_task(task_id=task.pk, user=people["bob"], channel=INBOX)
        mailoutbox.clear()

        with django_capture_on_commit_callbacks(execute=True):
            engine.sweep(now=task.created_at + timedelta(hours=4))

        task.refresh_from_db()
        assert (task.state, task.assignee, task.escalation_level) == (
            TaskState.CLAIMED,
            people["bob"],
            1,
        )
        assert task.due_at > task.created_at + timedelta(hours=4)
        assert mailoutbox == []
        assert LogEntry.objects.get_for_object(task).latest("id").additional_data["event"] == (
            "deadline_extended"
        )


class TestOddInputs:
    def test_a_superscript_digit_as_version_is_ignored_not_a_500(self, client, carol, manager_task):
        client.force_login(carol)

        response = client.post(
            reverse("approvals:approve", args=[manager_task.pk]), {"version": "²"}
        )

        assert response.status_code == 302

    def test_a_cursor_with_a_far_offset_still_pages(self, client, carol, manager_task):
        client.force_login(carol)
        cursor = base64.urlsafe_b64encode(
            json.dumps(["2026-01-01T00:00:00+20:00", 1]).encode()
        ).decode()

        assert client.get(reverse("approvals:inbox"), {"cursor": cursor}).status_code == 200

    def test_an_outsider_rejecting_without_a_reason_gets_404(self, manager_task, eve):
        with pytest.raises(human_tasks.TaskNotFound):
            human_tasks.reject_human_task(
                task_id=manager_task.pk, user=eve, channel=INBOX, reason=""
            )

    def test_bulk_approve_never_redirects_off_site(self, client, carol):
        client.force_login(carol)

        response = client.post(reverse("approvals:bulk_approve"), {"next": "//evil.example/"})

        assert response["Location"] == reverse("approvals:inbox")


class TestLinksShowLittle:
    def test_without_signing_in_a_link_shows_the_title_not_the_data(
        self, client, carol, start_expense
    ):
        task = start_expense(description="confidential memo").human_tasks.get()
        _, token = links.create_link(task=task, recipient=carol, now=task.created_at)

        response = client.get(reverse("approvals:email_link", args=[token]))

        assert task.title in response.text
        assert "confidential memo" not in response.text

    def test_a_title_with_a_newline_still_gets_its_email(
        self, manager_task, mailoutbox, django_capture_on_commit_callbacks
    ):
        manager_task.title = "Line one\nLine two"
        manager_task.save()

        with django_capture_on_commit_callbacks(execute=True):
            engine.sweep(now=manager_task.escalate_at + timedelta(minutes=1))

        assert len(mailoutbox) == 2
        assert "Line one Line two" in mailoutbox[0].subject
