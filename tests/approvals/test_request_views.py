"""The requesters' pages: New request, the start form, My requests, a request's page,
withdrawing and commenting, as alice (an employee), carol (her manager), olga (an
operator) and eve (an outsider) see them."""

from __future__ import annotations

import re

import pytest
from auditlog.models import LogEntry
from django.test import Client

from approvals.models import Comment, HumanTask
from approvals.states import TaskState
from workflows.models import WorkflowRun
from workflows.states import RunState

pytestmark = pytest.mark.django_db

EXPENSE = {"title": "Train to Lyon", "amount": "120.00", "currency": "EUR", "description": ""}
ORDER = {
    "order_id": "A-7",
    "customer_email": "ada@example.com",
    "items-rows": "2",
    "items-0-sku": "BOOK-1",
    "items-0-quantity": "2",
    "items-1-sku": "PEN-3",
    "items-1-quantity": "1",
    "amount": "19.90",
    "currency": "EUR",
    "simulate-payment": "",
}


@pytest.fixture
def browser(people, employees):
    """A signed-in browser for each persona; employees may start expenses."""

    def signed_in(username: str) -> Client:
        client = Client()
        client.force_login(people[username])
        return client

    return signed_in


def form_key(page) -> str:
    return re.search(r'name="key" value="([^"]+)"', page.content.decode()).group(1)


def send(client: Client, workflow_type: str, fields: dict, *, key: str | None = None, **extra):
    key = key or form_key(client.get(f"/requests/new/{workflow_type}/"))
    return client.post(f"/requests/new/{workflow_type}/", {**fields, "key": key}, **extra)


@pytest.fixture
def alices_expense(browser, drive):
    """alice's expense, sent from the form and run to carol's approval."""
    response = send(browser("alice"), "expense", EXPENSE)
    return drive(WorkflowRun.objects.get(pk=response.url.split("/")[2]))


class TestNewRequest:
    def test_lists_the_types_the_person_may_start(self, browser):
        page = browser("alice").get("/requests/new/").content.decode()

        assert 'href="/requests/new/expense/"' in page
        assert 'href="/requests/new/order/"' in page
        assert "vendor_onboarding" not in page

    def test_an_operator_may_start_every_type(self, browser, operator):
        page = browser("olga").get("/requests/new/").content.decode()

        assert 'href="/requests/new/vendor_onboarding/"' in page

    def test_someone_in_no_starter_group_is_offered_only_the_open_types(self, browser):
        page = browser("eve").get("/requests/new/").content.decode()

        assert 'href="/requests/new/order/"' in page
        assert "/requests/new/expense/" not in page

    def test_the_navigation_offers_the_requesters_pages(self, browser):
        page = browser("alice").get("/").content.decode()

        assert 'href="/requests/new/"' in page
        assert 'href="/requests/"' in page


class TestStartForm:
    def test_the_form_is_drawn_from_the_input_schema(self, browser):
        page = browser("alice").get("/requests/new/expense/").content.decode()

        assert '<label for="field-amount">Amount <span class="required"' in page
        assert "An amount with up to two decimals, e.g. 42.50" in page
        assert 'inputmode="decimal"' in page
        assert '<label for="field-description">Description</label>' in page
        assert 'name="requester"' not in page
        assert "You are the requester (alice)." in page

    def test_a_type_not_yours_to_start_is_refused_saying_who_may(self, browser):
        response = browser("eve").get("/requests/new/expense/")

        assert response.status_code == 403
        assert "Only members of employees, or operators, may start an expense." in (
            response.content.decode()
        )

    def test_an_unknown_type_is_404(self, browser):
        assert browser("alice").get("/requests/new/nope/").status_code == 404

    def test_errors_show_beside_their_fields_the_values_stay_and_nothing_is_written(self, browser):
        response = send(browser("alice"), "expense", {**EXPENSE, "title": "", "amount": "12.345"})

        page = response.content.decode()
        assert response.status_code == 422
        assert 'id="field-amount-error">Enter an amount with up to two decimals' in page
        assert 'id="field-title-error">This is required.</p>' in page
        assert 'value="12.345"' in page
        assert 'value="EUR"' in page
        assert WorkflowRun.objects.count() == 0
        assert LogEntry.objects.count() == 0

    def test_text_the_database_cannot_hold_is_refused_beside_its_field(self, browser):
        response = send(browser("alice"), "expense", {**EXPENSE, "title": "Train\x00"})

        assert response.status_code == 422
        assert 'id="field-title-error">Title must not contain control characters' in (
            response.content.decode()
        )
        assert WorkflowRun.objects.count() == 0

    def test_a_valid_form_starts_the_run_as_mine_and_lands_on_its_page(self, browser, alice):
        response = send(browser("alice"), "expense", EXPENSE)

        run = WorkflowRun.objects.get()
        assert response.status_code == 302
        assert response.url == f"/requests/{run.pk}/"
        assert (run.started_by, run.input["requester"]) == (alice, "alice")

    def test_sending_the_same_form_twice_starts_one_run(self, browser):
        client = browser("alice")
        key = form_key(client.get("/requests/new/expense/"))

        first = send(client, "expense", EXPENSE, key=key)
        second = send(client, "expense", EXPENSE, key=key)

        assert first.url == second.url
        assert WorkflowRun.objects.count() == 1
        followed = client.get(second.url).content.decode()
        assert "You had already sent this form" in followed

    def test_fixing_an_error_and_going_back_to_send_again_starts_one_run(self, browser):
        client = browser("alice")
        key = form_key(client.get("/requests/new/expense/"))

        refused = send(client, "expense", {**EXPENSE, "amount": "0"}, key=key)
        fixed = send(client, "expense", EXPENSE, key=form_key(refused))
        again = send(client, "expense", EXPENSE, key=key)

        assert (refused.status_code, fixed.status_code, again.status_code) == (422, 302, 302)
        assert WorkflowRun.objects.count() == 1

    def test_a_form_without_its_key_is_refused_and_keeps_what_was_typed(self, browser):
        response = browser("alice").post("/requests/new/expense/", EXPENSE)

        assert response.status_code == 400
        assert "This form was incomplete" in response.content.decode()
        assert 'value="Train to Lyon"' in response.content.decode()
        assert WorkflowRun.objects.count() == 0

    def test_a_requester_field_sent_anyway_is_ignored_for_non_operators(self, browser, alice):
        send(browser("alice"), "expense", {**EXPENSE, "requester": "bob"})

        assert WorkflowRun.objects.get().input["requester"] == "alice"

    def test_an_operator_acting_for_someone_is_audited_as_such(self, browser, operator):
        page = browser("olga").get("/requests/new/expense/").content.decode()
        assert '<label for="field-requester">On behalf of</label>' in page

        send(browser("olga"), "expense", {**EXPENSE, "requester": "alice"})

        run = WorkflowRun.objects.get()
        entry = LogEntry.objects.get_for_object(run).get()
        assert (run.started_by.username, run.input["requester"]) == ("olga", "alice")
        assert entry.additional_data["event"] == "started_on_behalf"
        assert (entry.actor.username, entry.additional_data["channel"]) == ("olga", "inbox")

    def test_adding_a_row_redraws_the_form_with_one_more_and_starts_nothing(self, browser):
        response = send(browser("alice"), "order", {**ORDER, "add": "items"})

        page = response.content.decode()
        assert response.status_code == 200
        assert 'name="items-rows" value="3"' in page
        assert 'value="PEN-3"' in page
        assert 'id="field-items-2-sku"' in page
        assert WorkflowRun.objects.count() == 0

    def test_htmx_adds_a_row_by_redrawing_only_the_list(self, browser):
        response = send(
            browser("alice"),
            "order",
            {**ORDER, "add": "items"},
            headers={"HX-Request": "true", "HX-Target": "field-items"},
        )

        page = response.content.decode()
        assert page.lstrip().startswith('<fieldset id="field-items"')
        assert 'name="items-rows" value="3"' in page
        assert "<html" not in page

    def test_removing_a_row_keeps_the_others(self, browser):
        response = send(browser("alice"), "order", {**ORDER, "remove": "items-0"})

        page = response.content.decode()
        assert 'name="items-rows" value="1"' in page
        assert 'value="PEN-3"' in page
        assert 'value="BOOK-1"' not in page

    def test_an_order_starts_with_its_rows_as_a_list(self, browser):
        send(browser("alice"), "order", ORDER)

        assert WorkflowRun.objects.get().input["items"] == [
            {"sku": "BOOK-1", "quantity": 2},
            {"sku": "PEN-3", "quantity": 1},
        ]

    def test_an_error_in_a_row_shows_beside_that_row(self, browser):
        response = send(browser("alice"), "order", {**ORDER, "items-1-quantity": "0"})

        assert response.status_code == 422
        assert 'id="field-items-1-quantity-error"' in response.content.decode()


class TestMyRequests:
    def test_lists_my_requests_with_where_each_is_now(self, browser, alices_expense):
        page = browser("alice").get("/requests/").content.decode()

        assert f'href="/requests/{alices_expense.pk}/"' in page
        assert "Manager approval: waiting for a decision by Carol" in page

    def test_does_not_list_other_peoples_requests(self, browser, alices_expense):
        page = browser("bob").get("/requests/").content.decode()

        assert str(alices_expense.pk) not in page
        assert "No requests here." in page

    def test_filters_by_state_and_type(self, browser, alices_expense):
        client = browser("alice")

        waiting = client.get("/requests/", {"state": "waiting", "type": "expense"})
        ended = client.get("/requests/", {"state": "succeeded"})

        assert str(alices_expense.pk) in waiting.content.decode()
        assert str(alices_expense.pk) not in ended.content.decode()

    def test_htmx_filtering_redraws_only_the_list(self, browser, alices_expense):
        response = browser("alice").get(
            "/requests/",
            {"state": "active"},
            headers={"HX-Request": "true", "HX-Target": "request-list"},
        )

        assert response.content.decode().lstrip().startswith('<section id="request-list"')


class TestRequestPage:
    def test_the_requester_sees_the_input_the_picture_and_the_timeline(
        self, browser, alices_expense
    ):
        page = browser("alice").get(f"/requests/{alices_expense.pk}/").content.decode()

        assert "<h1>Expense: Train to Lyon</h1>" in page
        assert "<dt>Amount</dt>" in page
        assert "<svg" in page
        assert "Manager approval" in page
        assert "waiting for a decision by Carol" in page
        assert "Withdraw this request…" in page

    def test_decisions_show_who_when_and_the_comment(self, browser, alices_expense, carol):
        from approvals import human_tasks

        task = alices_expense.human_tasks.get()
        human_tasks.approve_human_task(
            task_id=task.pk, user=carol, channel="inbox", comment="Fine by me."
        )

        page = browser("alice").get(f"/requests/{alices_expense.pk}/").content.decode()

        assert "<strong>Approved</strong> by Carol" in page
        assert "“Fine by me.”" in page

    @pytest.mark.parametrize("username", ["carol", "olga"])
    def test_a_reviewer_with_a_task_on_it_and_an_operator_see_it(
        self, browser, alices_expense, operator, username
    ):
        response = browser(username).get(f"/requests/{alices_expense.pk}/")

        assert response.status_code == 200

    @pytest.mark.parametrize("username", ["bob", "eve"])
    def test_anyone_else_is_told_there_is_no_such_request(self, browser, alices_expense, username):
        response = browser(username).get(f"/requests/{alices_expense.pk}/")

        assert response.status_code == 404
        assert "No such request" in response.content.decode()

    def test_the_person_an_operator_acted_for_sees_it(self, browser, operator):
        send(browser("olga"), "expense", {**EXPENSE, "requester": "alice"})

        run = WorkflowRun.objects.get()
        assert browser("alice").get(f"/requests/{run.pk}/").status_code == 200


class TestWithdraw:
    def test_the_requester_confirms_then_withdraws_and_nobody_is_asked_any_more(
        self, browser, alices_expense
    ):
        client = browser("alice")

        confirm = client.get(f"/requests/{alices_expense.pk}/withdraw/")
        done = client.post(f"/requests/{alices_expense.pk}/withdraw/", {"reason": "Trip off"})

        alices_expense.refresh_from_db()
        entry = LogEntry.objects.get_for_object(alices_expense).get()
        assert "Yes, withdraw it" in confirm.content.decode()
        assert done.status_code == 302
        assert alices_expense.state == RunState.CANCELLED
        assert alices_expense.human_tasks.get().state == TaskState.CANCELLED
        assert (entry.additional_data["event"], entry.additional_data["comment"]) == (
            "withdrawn",
            "Trip off",
        )

    def test_withdrawing_undoes_what_completed_steps_did(
        self, browser, start, drive, effects, alice
    ):
        run = drive(start("test_signalled", {}, started_by=alice))

        browser("alice").post(f"/requests/{run.pk}/withdraw/")

        run = drive(run)
        assert run.state == RunState.CANCELLED
        assert effects(run) == {"test.prepare": 1, "test.undo_prepare": 1}

    def test_someone_else_is_refused_with_the_reason_and_nothing_changes(
        self, browser, alices_expense
    ):
        response = browser("carol").post(f"/requests/{alices_expense.pk}/withdraw/")

        alices_expense.refresh_from_db()
        assert response.status_code == 403
        assert "Only alice, who asked for this request, or an operator may withdraw it." in (
            response.content.decode()
        )
        assert alices_expense.state == RunState.WAITING
        assert LogEntry.objects.get_for_object(alices_expense).count() == 0

    def test_someone_else_asking_to_confirm_is_told_why_not(self, browser, alices_expense):
        response = browser("carol").get(f"/requests/{alices_expense.pk}/withdraw/")

        assert response.status_code == 403
        assert "Yes, withdraw it" not in response.content.decode()

    def test_an_operator_may_withdraw_it(self, browser, alices_expense, operator):
        browser("olga").post(f"/requests/{alices_expense.pk}/withdraw/")

        alices_expense.refresh_from_db()
        assert alices_expense.state == RunState.CANCELLED

    def test_withdrawing_twice_is_refused_saying_it_ended(self, browser, alices_expense):
        client = browser("alice")
        client.post(f"/requests/{alices_expense.pk}/withdraw/")

        again = client.post(f"/requests/{alices_expense.pk}/withdraw/")

        assert again.status_code == 409
        assert "This request has already ended (cancelled)" in again.content.decode()

    def test_htmx_asks_to_confirm_in_the_panel_alone(self, browser, alices_expense):
        response = browser("alice").get(
            f"/requests/{alices_expense.pk}/withdraw/", headers={"HX-Request": "true"}
        )

        assert response.content.decode().lstrip().startswith('<section id="withdraw-panel"')


class TestComment:
    def test_the_requesters_comment_reaches_whoever_decides(self, browser, alices_expense):
        response = browser("alice").post(
            f"/requests/{alices_expense.pk}/comment/", {"body": "Receipt is in the mail."}
        )

        task = alices_expense.human_tasks.get()
        carols_page = browser("carol").get(f"/tasks/{task.pk}/").content.decode()
        assert response.status_code == 302
        assert "Receipt is in the mail." in carols_page
        assert (
            LogEntry.objects.get_for_object(task)
            .filter(additional_data__event="commented")
            .exists()
        )

    def test_an_empty_comment_is_refused_and_nothing_is_written(self, browser, alices_expense):
        response = browser("alice").post(f"/requests/{alices_expense.pk}/comment/", {"body": " "})

        assert response.status_code == 422
        assert "A comment cannot be empty." in response.content.decode()
        assert Comment.objects.count() == 0

    def test_a_request_without_tasks_offers_no_comment(self, browser, start, alice):
        run = start("test_signalled", {}, started_by=alice)

        page = browser("alice").get(f"/requests/{run.pk}/").content.decode()
        refused = browser("alice").post(f"/requests/{run.pk}/comment/", {"body": "Hello"})

        assert "Add a comment" not in page
        assert refused.status_code == 409
        assert HumanTask.objects.count() == 0


class TestDecisionValues:
    def test_the_request_page_shows_the_cost_centre_finance_recorded(
        self, browser, finance_task, bob
    ):
        from approvals import human_tasks

        human_tasks.approve_human_task(
            task_id=finance_task.pk, user=bob, channel="inbox", values={"cost_centre": "FIN-1200"}
        )

        page = browser("alice").get(f"/requests/{finance_task.run_id}/").content.decode()

        decision = re.search(r"<h3>[^<]*€1,500.00[^<]*</h3>(?:(?!</article>).)*", page, re.S)
        assert "<dt>Cost centre</dt>" in page
        assert "<dd>FIN-1200</dd>" in page
        assert page.count("<dd>FIN-1200</dd>") == 1
        assert decision is not None
