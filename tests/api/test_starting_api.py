"""POST /api/v1/workflows for people: who may start which type, and whose request it is."""

from __future__ import annotations

import pytest
from auditlog.models import LogEntry

from workflows.models import WorkflowRun

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"


def start_expense(api, key: str | None = None, **input):
    body = {
        "type": "expense",
        "input": {"title": "Train to Lyon", "amount": "120.00", "currency": "EUR", **input},
    }
    return api.post("/workflows", body, headers={"Idempotency-Key": key} if key else {})


class TestWhoMayStart:
    def test_a_type_not_yours_to_start_is_403_saying_who_may(self, api_as, employees):
        response = start_expense(api_as("eve"))

        assert response.status_code == 403
        assert response["Content-Type"] == PROBLEM
        assert response.json()["detail"] == (
            "Only members of employees, or operators, may start an expense."
        )
        assert WorkflowRun.objects.count() == 0

    def test_a_member_of_its_starters_starts_it(self, api_as, employees):
        response = start_expense(api_as("alice"))

        assert response.status_code == 201


class TestRequester:
    def test_the_caller_is_recorded_as_the_requester(self, api_as, employees):
        run_id = start_expense(api_as("alice")).json()["id"]

        run = WorkflowRun.objects.get(pk=run_id)
        assert (run.started_by.username, run.input["requester"]) == ("alice", "alice")

    def test_naming_someone_else_is_403_and_starts_nothing(self, api_as, employees):
        response = start_expense(api_as("alice"), requester="bob")

        assert response.status_code == 403
        assert "only an operator may request one for bob" in response.json()["detail"]
        assert WorkflowRun.objects.count() == 0

    def test_an_operator_files_for_someone_and_it_is_audited(self, api_as, operator):
        response = start_expense(api_as("olga"), requester="alice")

        run = WorkflowRun.objects.get(pk=response.json()["id"])
        entry = LogEntry.objects.get_for_object(run).get()
        assert response.status_code == 201
        assert (run.started_by.username, run.input["requester"]) == ("olga", "alice")
        assert (entry.actor.username, entry.additional_data["channel"]) == ("olga", "api")
        assert entry.additional_data["event"] == "started_on_behalf"


class TestIdempotencyKeys:
    def test_a_key_that_started_someone_elses_run_is_409(self, api_as, employees):
        start_expense(api_as("alice"), key="trip-1")

        response = start_expense(api_as("bob"), key="trip-1")

        assert response.status_code == 409
        assert "someone else's run" in response.json()["detail"]
        assert "input" not in response.json()
