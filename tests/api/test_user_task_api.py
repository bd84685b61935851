"""/api/v1/tasks for data-entry tasks (`dsl.UserTask`): keep a draft, complete, and the rules."""

from __future__ import annotations

import pytest
from auditlog.models import LogEntry

pytestmark = pytest.mark.django_db

GOOD = {"account_holder": "Alice Archer", "iban": "DE89370400440532013000"}


@pytest.fixture
def entry_task(people, start):
    """The finance queue's task to type alice's bank details (alice asked for the payment)."""
    run = start("test_bank_details", {"requester": "alice", "amount": "120.00"})
    return run.human_tasks.get()


class TestReading:
    def test_the_task_says_it_is_data_entry_and_gives_its_forms_schema(self, api_as, entry_task):
        body = api_as("bob").get(f"/tasks/{entry_task.pk}").json()

        assert body["kind"] == "entry"
        assert body["form_schema"]["required"] == ["account_holder", "iban"]
        assert (body["draft"], body["draft_saved_at"]) == ({}, None)

    def test_the_inbox_lists_it_for_finance(self, api_as, entry_task):
        body = api_as("bob").get("/tasks", tab="queue").json()

        assert [(item["id"], item["kind"]) for item in body["items"]] == [
            (str(entry_task.pk), "entry")
        ]


class TestDrafts:
    def test_put_keeps_the_draft_and_get_gives_it_back(self, api_as, entry_task):
        bob = api_as("bob")

        saved = bob.put(f"/tasks/{entry_task.pk}/draft", {"form": {"iban": "DE89 3704"}})

        assert saved.status_code == 200
        assert saved.json()["draft"] == {"iban": "DE89 3704"}
        body = bob.get(f"/tasks/{entry_task.pk}").json()
        assert body["draft"] == {"iban": "DE89 3704"}
        assert body["version"] == 1
        assert body["state"] == "open"

    def test_a_field_the_form_lacks_is_422(self, api_as, entry_task):
        response = api_as("bob").put(f"/tasks/{entry_task.pk}/draft", {"form": {"swift": "X"}})

        assert response.status_code == 422
        assert "has no field 'swift'" in response.json()["detail"]

    def test_the_requester_may_not_keep_one_either(self, api_as, entry_task, alice, groups):
        alice.groups.add(groups["finance"])

        response = api_as("alice").put(f"/tasks/{entry_task.pk}/draft", {"form": GOOD})

        assert response.status_code == 403
        assert "You requested this" in response.json()["detail"]

    def test_an_outsider_gets_404(self, api_as, entry_task):
        response = api_as("eve").put(f"/tasks/{entry_task.pk}/draft", {"form": GOOD})

        assert response.status_code == 404


class TestCompleting:
    def test_complete_moves_the_run_on_with_the_values_and_is_audited_as_api(
        self, api_as, entry_task, drive
    ):
        response = api_as("bob").post(f"/tasks/{entry_task.pk}/complete", {"form": GOOD})

        assert response.status_code == 200
        assert (response.json()["state"], response.json()["outcome"]) == (
            "completed",
            "completed",
        )
        assert response.json()["form_values"]["iban"] == GOOD["iban"]
        entry = LogEntry.objects.get(additional_data__event="completed")
        assert entry.additional_data["channel"] == "api"
        run = drive(entry_task.run)
        assert run.state == "succeeded"
        assert run.results["pay"]["iban"] == GOOD["iban"]

    def test_invalid_values_are_422_naming_each_field_inside_form(self, api_as, entry_task):
        response = api_as("bob").post(
            f"/tasks/{entry_task.pk}/complete", {"form": {"iban": "nope"}}
        )

        assert response.status_code == 422
        assert sorted(error["field"] for error in response.json()["errors"]) == [
            "form.account_holder",
            "form.iban",
        ]
        assert "Nothing was completed" in response.json()["detail"]

    def test_a_second_completion_is_409(self, api_as, entry_task):
        api_as("bob").post(f"/tasks/{entry_task.pk}/complete", {"form": GOOD})

        response = api_as("carol").post(f"/tasks/{entry_task.pk}/complete", {"form": GOOD})

        assert response.status_code == 409
        assert "already completed by Bob" in response.json()["detail"]

    def test_a_stale_version_is_409(self, api_as, entry_task):
        api_as("bob").post(f"/tasks/{entry_task.pk}/claim")

        response = api_as("bob").post(
            f"/tasks/{entry_task.pk}/complete", {"form": GOOD, "version": 1}
        )

        assert response.status_code == 409

    def test_approving_it_is_refused(self, api_as, entry_task):
        response = api_as("bob").post(
            f"/tasks/{entry_task.pk}/decision", {"outcome": "approve", "form": GOOD}
        )

        assert response.status_code == 403
        assert "filled in and completed" in response.json()["detail"]

    def test_its_signal_cannot_be_sent_by_hand(self, operator_api, entry_task):
        response = operator_api.post(
            f"/workflows/{entry_task.run_id}/signals/collect_bank_details.completed",
            {"payload": {"values": GOOD}},
        )

        assert response.status_code == 403
        assert "decided by the human task" in response.json()["detail"]
        entry_task.refresh_from_db()
        assert entry_task.state == "open"


class TestTheDocument:
    def test_openapi_documents_complete_draft_and_the_user_tasks_form(self, api_as):
        document = api_as("bob").get("/openapi.json").json()

        paths = document["paths"]
        assert "post" in paths["/api/v1/tasks/{task_id}/complete"]
        assert "put" in paths["/api/v1/tasks/{task_id}/draft"]
        form = document["components"]["schemas"]["CompleteIn"]["properties"]["form"]
        reference = "#/components/schemas/TaskForm_test_bank_details_v1_collect_bank_details"
        assert {"$ref": reference} in form["anyOf"]
