"""/api/v1/tasks: the same use cases as the inbox, with channel "api" and the same rules."""

from __future__ import annotations

import base64
import json

import pytest
from auditlog.models import LogEntry

from approvals import human_tasks
from approvals.inbox import decided
from approvals.models import HumanTask
from approvals.states import TaskState

pytestmark = pytest.mark.django_db


class TestInbox:
    def test_lists_the_callers_tasks(self, api_as, manager_task):
        body = api_as("carol").get("/tasks").json()

        assert [item["id"] for item in body["items"]] == [str(manager_task.pk)]
        assert body["items"][0]["assignee"] == "carol"
        assert body["items"][0]["sla"] == "on_time"

    def test_filters_like_the_inbox_page(self, api_as, start_expense):
        start_expense(title="Hotel in Paris")
        start_expense(title="Taxi")

        body = api_as("carol").get("/tasks", q="hotel").json()

        assert [item["title"] for item in body["items"]] == [
            "Expense: Hotel in Paris — €120.00 (alice)"
        ]

    def test_a_bad_filter_is_422(self, api_as):
        assert api_as("carol").get("/tasks", tab="everything").status_code == 422

    def test_a_task_you_may_not_see_is_404(self, api_as, manager_task):
        assert api_as("eve").get(f"/tasks/{manager_task.pk}").status_code == 404


class TestDecisions:
    def test_approve_moves_the_run_on_and_is_audited_as_api(self, api_as, manager_task, drive):
        response = api_as("carol").post(
            f"/tasks/{manager_task.pk}/decision", {"outcome": "approve", "comment": "ok"}
        )

        assert response.status_code == 200
        assert (response.json()["state"], response.json()["outcome"]) == ("completed", "approved")
        entry = LogEntry.objects.get(additional_data__event="approved")
        assert entry.additional_data["channel"] == "api"
        assert drive(manager_task.run).state == "succeeded"

    def test_a_second_decision_is_409_naming_who_and_when(self, api_as, manager_task, olga):
        api_as("carol").post(f"/tasks/{manager_task.pk}/decision", {"outcome": "approve"})

        response = api_as("olga").post(
            f"/tasks/{manager_task.pk}/decision", {"outcome": "reject", "comment": "no"}
        )

        assert response.status_code == 409
        assert response.json()["detail"].startswith("This task was already approved by Carol at")

    def test_reject_needs_a_reason(self, api_as, manager_task):
        response = api_as("carol").post(f"/tasks/{manager_task.pk}/decision", {"outcome": "reject"})

        assert response.status_code == 422
        assert "a reason is required" in response.json()["detail"]

    def test_a_stale_version_is_409(self, api_as, manager_task):
        response = api_as("carol").post(
            f"/tasks/{manager_task.pk}/decision",
            {"outcome": "approve", "version": manager_task.version + 1},
        )

        assert response.status_code == 409

    def test_someone_who_may_see_but_not_act_gets_403(self, api_as, manager_task):
        api_as("carol").post(f"/tasks/{manager_task.pk}/delegate", {"to": "bob"})

        response = api_as("carol").post(
            f"/tasks/{manager_task.pk}/decision", {"outcome": "approve"}
        )

        assert response.status_code == 403


class TestHandOver:
    def test_delegate_then_the_delegate_decides(self, api_as, manager_task):
        delegated = api_as("carol").post(f"/tasks/{manager_task.pk}/delegate", {"to": "bob"})
        decided = api_as("bob").post(f"/tasks/{manager_task.pk}/decision", {"outcome": "approve"})

        assert (delegated.json()["state"], delegated.json()["owner"]) == ("delegated", "carol")
        assert decided.json()["decided_by"] == "bob"

    def test_reassign_to_an_unknown_user_is_422(self, api_as, manager_task):
        response = api_as("carol").post(f"/tasks/{manager_task.pk}/reassign", {"to": "zed"})

        assert response.status_code == 422
        assert "no active user called 'zed'" in response.json()["detail"]

    def test_claim_and_release_a_group_task(self, api_as, start_expense, drive):
        run = start_expense(amount="5000.00")
        api_as("carol").post(f"/tasks/{run.human_tasks.get().pk}/decision", {"outcome": "approve"})
        finance = drive(run).human_tasks.get(node="finance_approval")
        bob = api_as("bob")

        claimed = bob.post(f"/tasks/{finance.pk}/claim")
        released = bob.post(f"/tasks/{finance.pk}/release")

        assert (claimed.json()["state"], claimed.json()["assignee"]) == ("claimed", "bob")
        assert released.json()["state"] == TaskState.OPEN


class TestSeparationOfDuties:
    """The API obeys the services' rule: nobody decides their own request."""

    @pytest.fixture
    def bobs_finance_task(self, api_as, start_expense, drive):
        run = start_expense(amount="5000.00", requester="bob")
        api_as("carol").post(f"/tasks/{run.human_tasks.get().pk}/decision", {"outcome": "approve"})
        return drive(run).human_tasks.get(node="finance_approval")

    def test_a_decision_on_your_own_request_is_403_problem_json(self, api_as, bobs_finance_task):
        entries = LogEntry.objects.get_for_object(bobs_finance_task).count()

        response = api_as("bob").post(
            f"/tasks/{bobs_finance_task.pk}/decision", {"outcome": "approve"}
        )

        assert response.status_code == 403
        assert response["Content-Type"] == "application/problem+json"
        assert response.json()["detail"] == "You requested this expense, so you cannot decide it."
        task = HumanTask.objects.get(pk=bobs_finance_task.pk)
        assert (task.state, task.version) == (TaskState.OPEN, bobs_finance_task.version)
        assert LogEntry.objects.get_for_object(task).count() == entries

    def test_reassigning_to_the_requester_is_403(self, api_as, manager_task):
        response = api_as("carol").post(f"/tasks/{manager_task.pk}/reassign", {"to": "alice"})

        assert response.status_code == 403
        assert "Alice requested this expense" in response.json()["detail"]
        assert HumanTask.objects.get(pk=manager_task.pk).assignee.username == "carol"


class TestCraftedCursor:
    def test_a_cursor_out_of_range_is_a_bad_cursor(self, api_as, manager_task):
        cursor = base64.urlsafe_b64encode(
            json.dumps(["0001-01-01T00:00:00+05:00", str(manager_task.pk)]).encode()
        ).decode()

        response = api_as("carol").get("/tasks", cursor=cursor)

        assert response.status_code == 400
        assert response.json()["detail"] == "The cursor is not one this API gave out."

    def test_a_cursor_it_gave_out_still_pages(self, api_as, start_expense):
        for n in range(26):
            start_expense(title=f"Trip {n:02}")
        api = api_as("carol")

        first = api.get("/tasks").json()
        second = api.get("/tasks", cursor=first["next_cursor"]).json()

        assert len(first["items"]) + len(second["items"]) == 26


class TestUnknownFields:
    def test_a_decision_with_an_unknown_field_is_refused(self, api_as, manager_task):
        body = {"outcome": "approve", "reason": "fine"}

        response = api_as("carol").post(f"/tasks/{manager_task.pk}/decision", body)

        assert response.status_code == 422
        assert response.json()["errors"] == [
            {
                "field": "reason",
                "message": "is not a field of this request",
                "type": "extra_forbidden",
            }
        ]


class TestTaskForms:
    def test_a_task_tells_the_caller_what_its_form_takes(self, api_as, finance_task):
        body = api_as("bob").get(f"/tasks/{finance_task.pk}").json()

        assert body["form_schema"]["required"] == ["cost_centre"]
        assert body["form_schema"]["properties"]["cost_centre"]["pattern"]
        assert body["form_values"] == {}

    def test_a_task_without_a_form_says_so(self, api_as, manager_task):
        body = api_as("carol").get(f"/tasks/{manager_task.pk}").json()

        assert body["form_schema"] is None

    def test_approve_takes_the_form_and_keeps_its_values(self, api_as, finance_task, drive):
        response = api_as("bob").post(
            f"/tasks/{finance_task.pk}/decision",
            {"outcome": "approve", "form": {"cost_centre": "FIN-1200"}},
        )

        assert response.status_code == 200
        assert response.json()["form_values"] == {"cost_centre": "FIN-1200"}
        run = drive(finance_task.run)
        assert run.results["finance_approval"]["payload"]["values"] == {"cost_centre": "FIN-1200"}
        entry = LogEntry.objects.get_for_object(finance_task).order_by("id").last()
        assert (entry.additional_data["channel"], entry.changes["form_values"]) == (
            "api",
            [{}, {"cost_centre": "FIN-1200"}],
        )

    def test_values_that_do_not_fit_are_422_naming_each_field(self, api_as, finance_task):
        response = api_as("bob").post(
            f"/tasks/{finance_task.pk}/decision",
            {"outcome": "approve", "form": {"cost_centre": "nope", "project": "x"}},
        )

        assert response.status_code == 422
        assert response["Content-Type"] == "application/problem+json"
        body = response.json()
        assert [error["field"] for error in body["errors"]] == ["form.cost_centre", "form.project"]
        assert body["detail"].startswith("Fill in the form to approve: Cost centre: Enter the")
        finance_task.refresh_from_db()
        assert finance_task.state == TaskState.OPEN

    def test_approve_without_the_form_is_422(self, api_as, finance_task):
        response = api_as("bob").post(f"/tasks/{finance_task.pk}/decision", {"outcome": "approve"})

        assert response.status_code == 422
        assert response.json()["errors"] == [
            {"field": "form.cost_centre", "message": "Field required", "type": "missing"}
        ]

    def test_reject_needs_no_form_and_refuses_one(self, api_as, finance_task):
        bob = api_as("bob")

        with_form = bob.post(
            f"/tasks/{finance_task.pk}/decision",
            {"outcome": "reject", "comment": "no", "form": {"cost_centre": "FIN-1200"}},
        )
        without = bob.post(
            f"/tasks/{finance_task.pk}/decision", {"outcome": "reject", "comment": "no budget"}
        )

        assert with_form.status_code == 422
        assert "A rejection takes no form values" in with_form.json()["detail"]
        assert (without.status_code, without.json()["outcome"]) == (200, "rejected")

    def test_openapi_documents_each_types_forms(self, api_as):
        document = api_as("bob").get("/openapi.json").json()

        schemas = document["components"]["schemas"]
        finance = schemas["TaskForm_expense_v1_finance_approval"]
        legal = schemas["TaskForm_vendor_onboarding_v1_legal_review"]
        form = schemas["DecisionIn"]["properties"]["form"]
        assert finance["required"] == ["cost_centre"]
        assert legal["properties"]["risk_level"]["enum"] == ["low", "medium", "high"]
        assert {"$ref": "#/components/schemas/TaskForm_expense_v1_finance_approval"} in (
            form["anyOf"]
        )
        assert form["x-baton-task-forms"]["vendor_onboarding"]["legal_review"] == {
            "$ref": "#/components/schemas/TaskForm_vendor_onboarding_v1_legal_review"
        }
        assert "expense: finance_approval" in form["description"]
        assert {"form_schema", "form_values"} <= set(schemas["TaskOut"]["properties"])


class TestSendingBackForChanges:
    def test_request_changes_sends_it_back_and_is_audited_as_api(self, api_as, manager_task, drive):
        response = api_as("carol").post(
            f"/tasks/{manager_task.pk}/decision",
            {"outcome": "request_changes", "comment": "Which train? Add the ticket."},
        )

        assert response.status_code == 200
        assert response.json()["outcome"] == "changes_requested"
        entry = LogEntry.objects.get(additional_data__event="changes_requested")
        assert entry.additional_data["channel"] == "api"
        revision = drive(manager_task.run).human_tasks.get(kind="revision")
        assert revision.assignee.username == "alice"

    def test_request_changes_without_a_reason_is_422_and_decides_nothing(
        self, api_as, manager_task
    ):
        response = api_as("carol").post(
            f"/tasks/{manager_task.pk}/decision", {"outcome": "request_changes"}
        )

        manager_task.refresh_from_db()
        assert response.status_code == 422
        assert response["Content-Type"] == "application/problem+json"
        assert "a reason is required" in response.json()["detail"]
        assert manager_task.state == TaskState.CLAIMED

    def test_the_requester_resubmits_through_the_api_with_the_diff_in_the_answer(
        self, api_as, manager_task, drive
    ):
        api_as("carol").post(
            f"/tasks/{manager_task.pk}/decision",
            {"outcome": "request_changes", "comment": "Add the ticket number."},
        )
        revision = drive(manager_task.run).human_tasks.get(kind="revision")
        alice = api_as("alice")
        listed = alice.get(f"/tasks/{revision.pk}").json()
        body = {
            "input": {"title": "Train to Lyon", "amount": "120.00", "currency": "EUR"},
            "comment": "done",
        }
        body["input"]["description"] = "Ticket 4711"

        refused = api_as("carol").post(f"/tasks/{revision.pk}/resubmit", body)
        invalid = alice.post(
            f"/tasks/{revision.pk}/resubmit", {"input": {**body["input"], "amount": "x"}}
        )
        answered = alice.post(f"/tasks/{revision.pk}/resubmit", body)

        assert listed["kind"] == "revision"
        assert refused.status_code == 403
        assert "Only alice, who asked for this expense" in refused.json()["detail"]
        assert invalid.status_code == 422
        assert invalid.json()["errors"][0]["field"] == "input.amount"
        assert answered.status_code == 200
        assert answered.json()["changes"] == {"description": ["", "Ticket 4711"]}


class TestDecidedTab:
    @pytest.fixture
    def carols_decisions(self, carol, start_expense, drive):
        """carol approved three expenses, "Trip 0" first; the runs went on to the end."""
        for n in range(3):
            run = start_expense(title=f"Trip {n}")
            human_tasks.approve_human_task(
                task_id=run.human_tasks.get().pk, user=carol, channel="inbox"
            )
            drive(run)

    def test_lists_my_decisions_newest_first_with_the_outcome_and_the_runs_state(
        self, api_as, carols_decisions
    ):
        body = api_as("carol").get("/tasks", tab="decided").json()

        assert [item["title"].split(" — ")[0] for item in body["items"]] == [
            "Expense: Trip 2",
            "Expense: Trip 1",
            "Expense: Trip 0",
        ]
        assert {(item["outcome"], item["decided_by"]) for item in body["items"]} == {
            ("approved", "carol")
        }
        assert {item["run_state"] for item in body["items"]} == {"succeeded"}
        assert body["next_cursor"] is None

    def test_pages_by_keyset(self, api_as, carols_decisions, monkeypatch):
        monkeypatch.setattr(decided, "PAGE_SIZE", 2)
        carol = api_as("carol")

        first = carol.get("/tasks", tab="decided").json()
        second = carol.get("/tasks", tab="decided", cursor=first["next_cursor"]).json()

        assert len(first["items"]) == 2
        assert [item["title"].split(" — ")[0] for item in second["items"]] == ["Expense: Trip 0"]
        assert second["next_cursor"] is None

    def test_someone_who_decided_nothing_gets_an_empty_list(self, api_as, carols_decisions):
        body = api_as("bob").get("/tasks", tab="decided").json()

        assert body == {"items": [], "next_cursor": None}

    def test_a_bad_cursor_is_400(self, api_as):
        response = api_as("carol").get("/tasks", tab="decided", cursor="bm9wZQ==")

        assert response.status_code == 400

    def test_filters_by_type_outcome_and_words_of_the_title(
        self, api_as, carols_decisions, carol, start_expense
    ):
        run = start_expense(title="Hotel in Paris")
        human_tasks.reject_human_task(
            task_id=run.human_tasks.get().pk, user=carol, channel="inbox", reason="Too dear"
        )
        api = api_as("carol")

        rejected = api.get("/tasks", tab="decided", outcome="rejected").json()
        searched = api.get("/tasks", tab="decided", q="trip 1").json()
        other_type = api.get("/tasks", tab="decided", type="vendor_onboarding").json()
        expenses = api.get("/tasks", tab="decided", type="expense", outcome="approved").json()

        assert [item["title"] for item in rejected["items"]] == [
            "Expense: Hotel in Paris — €120.00 (alice)"
        ]
        assert [item["title"].split(" — ")[0] for item in searched["items"]] == ["Expense: Trip 1"]
        assert other_type["items"] == []
        assert len(expenses["items"]) == 3

    def test_filters_that_describe_live_work_are_422_with_it(self, api_as, carols_decisions):
        response = api_as("carol").get("/tasks", tab="decided", priority=3, where="amount>1")

        assert response.status_code == 422
        assert "priority, where describe live work" in response.json()["detail"]
        assert [error["field"] for error in response.json()["errors"]] == ["priority", "where"]

    def test_an_outcome_with_another_tab_is_422(self, api_as):
        response = api_as("carol").get("/tasks", outcome="approved")

        assert response.status_code == 422
        assert "use it with tab=decided" in response.json()["detail"]

    def test_an_unknown_outcome_is_422(self, api_as):
        assert api_as("carol").get("/tasks", tab="decided", outcome="maybe").status_code == 422

    def test_the_other_tabs_do_not_say_a_runs_state(self, api_as, manager_task):
        body = api_as("carol").get("/tasks").json()

        assert body["items"][0]["run_state"] is None
