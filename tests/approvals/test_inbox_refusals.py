"""The inbox offers only what the reviewer may do, and a refusal stays where it was asked.

A row's answer to an htmx action replaces that row and nothing else, whatever the
status: the reason shows inside it, never as a bare fragment over the page.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals import human_tasks
from approvals.states import Channel

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def htmx_target(target: str) -> dict[str, str]:
    return {**HTMX, "HTTP_HX_TARGET": target}


@pytest.fixture
def delegated_to_bob(carol, manager_task):
    """carol's approval, which she delegated to bob: he decides it now, she owns it."""
    return human_tasks.delegate_human_task(
        task_id=manager_task.pk, user=carol, to_username="bob", channel=Channel.INBOX
    )


class TestDelegatedByMe:
    def test_rows_offer_no_decision_and_say_who_decides(self, client, carol, delegated_to_bob):
        client.force_login(carol)

        response = client.get(reverse("approvals:inbox"), {"tab": "delegated"})

        assert delegated_to_bob.title in response.text
        assert reverse("approvals:approve", args=[delegated_to_bob.pk]) not in response.text
        assert f'value="{delegated_to_bob.pk}:' not in response.text  # no bulk checkbox
        assert "Approve selected" not in response.text
        assert "bob decides it now" in response.text

    def test_the_delegate_is_offered_the_decision(self, client, bob, delegated_to_bob):
        client.force_login(bob)

        response = client.get(reverse("approvals:inbox"))

        assert reverse("approvals:approve", args=[delegated_to_bob.pk]) in response.text
        assert "Approve selected" in response.text

    def test_the_row_redrawn_after_an_action_offers_no_decision_either(
        self, client, carol, delegated_to_bob
    ):
        client.force_login(carol)

        response = client.post(
            reverse("approvals:snooze", args=[delegated_to_bob.pk]),
            {"until": "never"},
            **htmx_target(f"row-{delegated_to_bob.pk}"),
        )

        assert response.status_code == 422
        assert reverse("approvals:approve", args=[delegated_to_bob.pk]) not in response.text
        assert "bob decides it now" in response.text


class TestRefusalsStayInTheirRow:
    def test_a_403_answers_the_row_with_the_reason(self, client, carol, delegated_to_bob):
        client.force_login(carol)

        response = client.post(
            reverse("approvals:approve", args=[delegated_to_bob.pk]),
            {"version": delegated_to_bob.version},
            **htmx_target(f"row-{delegated_to_bob.pk}"),
        )

        assert response.status_code == 403
        assert response.text.lstrip().startswith(f'<tr id="row-{delegated_to_bob.pk}"')
        assert "You are not a reviewer of this task." in response.text

    def test_a_404_answers_a_row_holding_the_reason(self, client, eve, manager_task):
        client.force_login(eve)

        response = client.post(
            reverse("approvals:approve", args=[manager_task.pk]),
            {"version": manager_task.version},
            **htmx_target(f"row-{manager_task.pk}"),
        )

        assert response.status_code == 404
        assert response.text.strip() == (
            f'<tr id="row-{manager_task.pk}"><td colspan="7"><span class="inline-error" '
            'role="alert">No such task (or it is not yours to see).</span></td></tr>'
        )

    def test_a_refused_snooze_replaces_its_row_instead_of_deleting_it(
        self, client, carol, manager_task
    ):
        client.force_login(carol)

        response = client.post(
            reverse("approvals:snooze", args=[manager_task.pk]),
            {"until": "forever"},
            **htmx_target(f"row-{manager_task.pk}"),
        )

        assert response.status_code == 422
        assert response["HX-Reswap"] == "outerHTML"
        assert "Choose how long to snooze it." in response.text

    def test_a_404_on_the_task_page_answers_the_decision_panel(self, client, eve, manager_task):
        client.force_login(eve)

        response = client.post(
            reverse("approvals:approve", args=[manager_task.pk]),
            **htmx_target("decision-panel"),
        )

        assert response.status_code == 404
        assert response.text.lstrip().startswith('<section id="decision-panel"')
        assert "No such task" in response.text

    def test_no_debug_handler_swaps_an_error_over_the_page_even_with_debug_on(
        self, client, carol, manager_task, settings
    ):
        settings.DEBUG = True
        client.force_login(carol)

        response = client.get(reverse("approvals:inbox"))

        assert response.status_code == 200
        assert "django-htmx.js" not in response.text
