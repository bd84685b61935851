"""Emails about human tasks: plain text as written, HTML escaped."""

from __future__ import annotations

import pytest

from approvals import human_tasks
from approvals.notify import emails
from approvals.states import Channel

pytestmark = pytest.mark.django_db

TITLE = "Dinner at O'Neil & Sons <HQ>"


class TestEscalationEmail:
    def test_the_plain_text_shows_the_title_as_written_and_the_html_escapes_it(
        self, manager_task, carol, mailoutbox, django_capture_on_commit_callbacks
    ):
        manager_task.title = TITLE
        manager_task.save()

        with django_capture_on_commit_callbacks(execute=True):
            emails.send_escalation(
                task=manager_task, recipients=[carol], now=manager_task.created_at
            )

        [message] = mailoutbox
        html, _ = message.alternatives[0]
        assert f"  {TITLE}\n" in message.body
        assert "&amp;" not in message.body
        assert "Dinner at O&#x27;Neil &amp; Sons &lt;HQ&gt;" in html


class TestDelegationDoneEmail:
    def test_the_plain_text_shows_title_and_comment_as_written(
        self, manager_task, carol, bob, mailoutbox, django_capture_on_commit_callbacks
    ):
        manager_task.title = TITLE
        manager_task.save()
        human_tasks.delegate_human_task(
            task_id=manager_task.pk, user=carol, to_username="bob", channel=Channel.INBOX
        )

        with django_capture_on_commit_callbacks(execute=True):
            human_tasks.approve_human_task(
                task_id=manager_task.pk, user=bob, channel=Channel.INBOX, comment="Fine & dandy"
            )

        [message] = mailoutbox
        assert f"  {TITLE}\n" in message.body
        assert "Their comment: Fine & dandy" in message.body


class TestBidiControls:
    def test_subject_and_bodies_show_the_override_as_its_code_point(
        self, manager_task, carol, mailoutbox, django_capture_on_commit_callbacks
    ):
        manager_task.title = "Invoice \u202egpj.exe"
        manager_task.save()

        with django_capture_on_commit_callbacks(execute=True):
            emails.send_escalation(
                task=manager_task, recipients=[carol], now=manager_task.created_at
            )

        [message] = mailoutbox
        html, _ = message.alternatives[0]
        assert message.subject == "[Baton] Escalated to you: Invoice [U+202E]gpj.exe"
        assert "Invoice [U+202E]gpj.exe" in message.body
        assert "Invoice [U+202E]gpj.exe" in html

    def test_a_delegates_comment_is_neutralised_in_the_owners_notice(
        self, manager_task, carol, bob, mailoutbox, django_capture_on_commit_callbacks
    ):
        human_tasks.delegate_human_task(
            task_id=manager_task.pk, user=carol, to_username="bob", channel=Channel.INBOX
        )

        with django_capture_on_commit_callbacks(execute=True):
            human_tasks.approve_human_task(
                task_id=manager_task.pk, user=bob, channel=Channel.INBOX, comment="fine \u202e!"
            )

        assert "fine [U+202E]!" in mailoutbox[0].body
