"""An operator moves a live run to another node, from the console and the API: what was
in flight is cancelled (a person's open task closes), the node is entered in a new round,
and the move is audited with the operator's reason."""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals.console import services as console_services
from approvals.states import TaskState
from tests.approvals.test_console_services import by, entries
from workflows.states import RunState

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting_expense(start_expense):
    """alice's expense, waiting for carol's approval."""
    return start_expense()


class TestMovingARun:
    def test_back_to_submit_closes_the_open_task_and_opens_a_new_one(
        self, waiting_expense, console_operator, drive
    ):
        [first] = waiting_expense.human_tasks.all()

        console_services.move_run(
            run_id=waiting_expense.pk,
            node="submit",
            act=by(console_operator, reason="the amount was keyed in wrong"),
        )

        run = drive(waiting_expense)
        first.refresh_from_db()
        assert first.state == TaskState.CANCELLED
        [again] = run.human_tasks.exclude(pk=first.pk)
        assert again.state == TaskState.CLAIMED
        assert again.assignee.username == "carol"
        assert run.steps.get(node="submit", round=1).state == "succeeded"

    def test_is_audited_naming_the_operator_the_node_and_the_reason(
        self, waiting_expense, console_operator
    ):
        console_services.move_run(
            run_id=waiting_expense.pk,
            node="submit",
            act=by(console_operator, reason="keyed in wrong"),
        )

        [entry] = [e for e in entries(waiting_expense) if e.additional_data["event"] == "run_moved"]
        assert entry.actor == console_operator
        assert entry.additional_data["comment"] == "keyed in wrong"
        assert entry.changes["to"] == "submit"

    def test_needs_a_reason(self, waiting_expense, console_operator):
        with pytest.raises(console_services.InvalidInput, match="Say why"):
            console_services.move_run(
                run_id=waiting_expense.pk, node="submit", act=by(console_operator, reason=" ")
            )

    def test_is_refused_to_someone_who_may_only_look(self, waiting_expense, viewer):
        with pytest.raises(console_services.NotOperator):
            console_services.move_run(
                run_id=waiting_expense.pk, node="submit", act=by(viewer, reason="why not")
            )

    def test_to_a_node_the_type_lacks_is_refused_naming_those_it_may_move_to(
        self, waiting_expense, console_operator
    ):
        with pytest.raises(console_services.NotPossibleNow, match="may move to: submit"):
            console_services.move_run(
                run_id=waiting_expense.pk, node="nowhere", act=by(console_operator, reason="x")
            )


class TestOnTheConsole:
    def test_offers_the_nodes_and_moves_the_run(self, client, waiting_expense, console_operator):
        client.force_login(console_operator)
        page = client.get(reverse("console:move", args=[waiting_expense.pk]))
        assert page.status_code == 200
        assert "<option>manager_approval</option>" in page.text

        moved = client.post(
            reverse("console:move", args=[waiting_expense.pk]),
            {"to": "submit", "reason": "keyed in wrong"},
            follow=True,
        )

        assert "Moved to submit" in moved.text
        assert "moved to <strong>Submit</strong> from Manager approval (round 2)" in moved.text

    def test_a_refusal_is_shown_in_the_panel(self, client, waiting_expense, console_operator):
        client.force_login(console_operator)

        refused = client.post(
            reverse("console:move", args=[waiting_expense.pk]), {"to": "submit", "reason": ""}
        )

        assert refused.status_code == 422
        assert "Say why you move the run" in refused.text


class TestThroughTheApi:
    def test_moves_the_run_and_answers_its_state(self, api_client_for, waiting_expense, olga):
        response = api_client_for(olga).post(
            f"/api/v1/workflows/{waiting_expense.pk}/move",
            {"to": "submit", "reason": "keyed in wrong"},
            content_type="application/json",
        )

        assert response.status_code == 202, response.content
        assert response.json()["state"] in (RunState.RUNNING, RunState.WAITING)

    def test_a_finished_run_is_409_saying_its_state(self, api_client_for, start, drive, olga):
        run = drive(start("test_linear", {}))

        response = api_client_for(olga).post(
            f"/api/v1/workflows/{run.pk}/move",
            {"to": "first", "reason": "again"},
            content_type="application/json",
        )

        assert response.status_code == 409
        assert "this one is succeeded" in response.json()["detail"]


@pytest.fixture
def api_client_for(console_operator):
    """A Django test client signed in with a Bearer token for `user`."""
    from django.test import Client

    from workflows.tokens import issue_token

    def client_for(user):
        _, secret = issue_token(user=user)
        return Client(headers={"Authorization": f"Bearer {secret}"})

    return client_for
