"""Bidi controls stored in titles, comments and input are shown as code points, never obeyed."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from approvals.human_tasks import inbox_entries
from approvals.models import Comment
from approvals.notify import links
from workflows.tokens import issue_token

pytestmark = pytest.mark.django_db

SPOOFED = "Invoice \u202egpj.exe"
SHOWN = "Invoice [U+202E]gpj.exe"


@pytest.fixture
def spoofed_task(manager_task):
    """A task stored before anything checked: a right-to-left override in its title."""
    manager_task.title = SPOOFED
    manager_task.save()
    # Its inbox entries copied the title when it opened.
    inbox_entries.refresh(manager_task)
    return manager_task


class TestPages:
    def test_the_inbox_shows_the_override_as_its_code_point(self, client, carol, spoofed_task):
        client.force_login(carol)

        response = client.get(reverse("approvals:inbox"))

        assert SHOWN in response.text
        assert "\u202e" not in response.text

    def test_the_task_page_neutralises_title_comments_and_input(self, client, carol, spoofed_task):
        Comment.objects.create(
            task=spoofed_task,
            author=carol,
            body="ok \u2067x\u2069",
            created_at=spoofed_task.created_at,
        )
        spoofed_task.run.input["description"] = "\u202dreal"
        spoofed_task.run.save()
        client.force_login(carol)

        response = client.get(reverse("approvals:task", args=[spoofed_task.pk]))

        assert SHOWN in response.text
        assert "ok [U+2067]x[U+2069]" in response.text
        assert "[U+202D]real" in response.text
        assert not any(
            c in response.text for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
        )

    def test_an_htmx_row_is_neutralised_too(self, client, carol, spoofed_task):
        client.force_login(carol)

        response = client.post(
            reverse("approvals:claim", args=[spoofed_task.pk]),
            HTTP_HX_REQUEST="true",
            HTTP_HX_TARGET=f"row-{spoofed_task.pk}",
        )

        assert SHOWN in response.text

    def test_the_email_link_page_neutralises_the_title(self, client, carol, spoofed_task):
        _, token = links.create_link(
            task=spoofed_task, recipient=carol, now=spoofed_task.created_at
        )

        response = client.get(reverse("approvals:email_link", args=[token]))

        assert SHOWN in response.text

    def test_json_answers_keep_the_data_as_stored(self, carol, spoofed_task):
        _, secret = issue_token(user=carol)

        body = (
            Client()
            .get(f"/api/v1/tasks/{spoofed_task.pk}", headers={"Authorization": f"Bearer {secret}"})
            .json()
        )

        assert body["title"] == SPOOFED
