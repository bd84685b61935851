"""/api/v1/workflows: start, query, list, signal, cancel and retry, with their errors."""

from __future__ import annotations

import base64
import json

import pytest
from django.test import Client

from tests.conftest import at_once
from tests.workflows.test_engine import sweep_until_quiet
from workflows.models import WorkflowRun
from workflows.states import RunState

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"


def start_order(api, order_input, key: str | None = None, **overrides):
    headers = {"Idempotency-Key": key} if key else {}
    body = {"type": "order", "input": order_input(**overrides), "correlation_id": "shop-1"}
    return api.post("/workflows", body, headers=headers)


class TestStart:
    def test_starts_a_run_and_returns_it(self, api_as, order_input):
        response = start_order(api_as("alice"), order_input)

        assert response.status_code == 201
        run = response.json()
        assert (run["type"], run["version"], run["state"]) == ("order", 1, "running")
        assert run["steps"] == [
            {
                "node": "validate",
                "round": 0,
                "item": None,
                "kind": "forward",
                "state": "scheduled",
                "attempts": 0,
                "last_error": None,
                "started_at": None,
                "finished_at": None,
            }
        ]
        assert run["created_at"].endswith("Z") or "+00:00" in run["created_at"]
        assert WorkflowRun.objects.get().started_by.username == "alice"

    def test_the_same_idempotency_key_returns_the_same_run_with_200(self, api_as, order_input):
        api = api_as("alice")
        first = start_order(api, order_input, key="order-A-1")

        second = start_order(api, order_input, key="order-A-1")

        assert (first.status_code, second.status_code) == (201, 200)
        assert first.json()["id"] == second.json()["id"]
        assert WorkflowRun.objects.count() == 1

    def test_an_unknown_type_is_404(self, api_as):
        response = api_as("alice").post("/workflows", {"type": "nope", "input": {}})

        assert response.status_code == 404
        assert response["Content-Type"] == PROBLEM
        assert "Unknown workflow type 'nope'" in response.json()["detail"]

    def test_invalid_input_is_422_listing_each_field(self, api_as, order_input):
        response = start_order(api_as("alice"), order_input, items=[], currency="euro")

        assert response.status_code == 422
        assert {e["field"] for e in response.json()["errors"]} == {"items", "currency"}
        assert WorkflowRun.objects.count() == 0

    def test_a_malformed_body_is_422_in_plain_words(self, api_as):
        response = api_as("alice").post("/workflows", {"input": {}})

        assert response.status_code == 422
        assert response.json()["errors"] == [
            {"field": "type", "message": "Field required", "type": "missing"}
        ]

    def test_a_body_too_large_is_413(self, api_as, order_input):
        response = start_order(api_as("alice"), order_input, order_id="x" * 300_000)

        assert response.status_code == 413
        assert response["Content-Type"] == PROBLEM


@pytest.mark.django_db(transaction=True)
class TestConcurrentStart:
    def test_two_requests_with_one_key_at_once_make_one_run(self, api_as, order_input):
        api = api_as("alice")

        def post():
            return start_order(api, order_input, key="same").status_code

        statuses = at_once(post, post)

        assert sorted(statuses) == [200, 201]
        assert WorkflowRun.objects.count() == 1


class TestQuery:
    def test_get_shows_steps_tasks_and_compensation(self, api_as, start_expense):
        run = start_expense()
        run.started_by = run.human_tasks.get().assignee  # carol
        run.save()

        body = api_as("carol").get(f"/workflows/{run.pk}").json()

        assert body["state"] == "waiting"
        assert [s["node"] for s in body["steps"]] == ["submit", "manager_approval"]
        assert body["open_human_tasks"][0]["assignee"] == "carol"
        assert body["compensation"] == {
            "state": "none",
            "undone": [],
            "in_progress": [],
            "failed": [],
        }

    def test_a_reviewer_sees_the_run_of_their_task(self, api_as, start_expense):
        run = start_expense()

        assert api_as("carol").get(f"/workflows/{run.pk}").status_code == 200

    def test_a_run_you_may_not_see_is_404(self, api_as, start_expense):
        run = start_expense()

        response = api_as("eve").get(f"/workflows/{run.pk}")

        assert response.status_code == 404
        assert response["Content-Type"] == PROBLEM

    def test_compensation_progress_shows_what_was_undone(self, api_as, order_input, drive, start):
        api = api_as("alice")
        run_id = start_order(api, order_input, simulate={"payment": "decline"}).json()["id"]
        drive(WorkflowRun.objects.get(pk=run_id))

        body = api.get(f"/workflows/{run_id}").json()

        assert body["state"] == "compensated"
        assert body["compensation"]["undone"] == ["reserve_inventory"]
        assert body["error"]["type"] == "PaymentDeclined"


class TestList:
    def test_lists_active_runs_newest_first_with_filters(self, api_as, order_input, drive):
        api = api_as("alice")
        done = start_order(api, order_input).json()["id"]
        drive(WorkflowRun.objects.get(pk=done))
        active = [start_order(api, order_input).json()["id"] for _ in range(3)]

        default = api.get("/workflows").json()
        succeeded = api.get("/workflows", state="succeeded").json()

        assert [item["id"] for item in default["items"]] == active[::-1]
        assert [item["id"] for item in succeeded["items"]] == [done]

    def test_pages_by_cursor(self, api_as, order_input):
        api = api_as("alice")
        ids = [start_order(api, order_input).json()["id"] for _ in range(5)]

        first = api.get("/workflows", limit=3).json()
        second = api.get("/workflows", limit=3, cursor=first["next_cursor"]).json()

        assert [i["id"] for i in first["items"] + second["items"]] == ids[::-1]
        assert second["next_cursor"] is None

    def test_an_unknown_state_or_a_bad_cursor_is_a_clear_error(self, api_as):
        api = api_as("alice")

        assert api.get("/workflows", state="sleepy").status_code == 422
        assert api.get("/workflows", cursor="garbage").status_code == 400

    def test_only_visible_runs_are_listed(self, api_as, order_input):
        start_order(api_as("alice"), order_input)

        assert api_as("eve").get("/workflows").json()["items"] == []


class TestSignals:
    def test_a_signal_is_accepted_once(self, api_as, start, drive, alice):
        run = drive(start("test_signalled", {}, started_by=alice))
        api = api_as("alice")

        first = api.post(f"/workflows/{run.pk}/signals/go", {"id": "s-1", "payload": {"a": 1}})
        again = api.post(f"/workflows/{run.pk}/signals/go", {"id": "s-1", "payload": {"a": 1}})

        assert (first.status_code, again.status_code) == (202, 202)
        assert (first.json()["duplicate"], again.json()["duplicate"]) == (False, True)
        assert run.signals.count() == 1

    def test_a_signal_to_an_ended_run_is_409_with_its_state(self, api_as, start, drive, alice):
        run = drive(start("test_linear", {}, started_by=alice))

        response = api_as("alice").post(f"/workflows/{run.pk}/signals/go", {"payload": {}})

        assert response.status_code == 409
        assert response.json()["state"] == "succeeded"


class TestCancelAndRetry:
    def test_cancel_is_accepted(self, api_as, order_input):
        api = api_as("alice")
        run_id = start_order(api, order_input).json()["id"]

        response = api.post(f"/workflows/{run_id}/cancel")

        assert response.status_code == 202
        assert response.json()["state"] == "cancelled"

    def test_cancelling_an_ended_run_is_409_naming_its_state(self, api_as, order_input, drive):
        api = api_as("alice")
        run_id = start_order(api, order_input).json()["id"]
        drive(WorkflowRun.objects.get(pk=run_id))

        response = api.post(f"/workflows/{run_id}/cancel")

        assert response.status_code == 409
        assert response.json()["state"] == "succeeded"
        assert "already ended (succeeded)" in response.json()["detail"]

    def test_a_reviewer_may_see_but_not_cancel_a_run_they_did_not_start(
        self, api_as, start_expense
    ):
        run = start_expense()

        assert api_as("carol").post(f"/workflows/{run.pk}/cancel").status_code == 403

    def test_operators_retry_a_dead_letter(self, api_as, operator_api, order_input, drive):
        run_id = start_order(
            api_as("alice"), order_input, simulate={"shipping": "fail", "refund": "outage"}
        ).json()["id"]
        sweep_until_quiet(drive(WorkflowRun.objects.get(pk=run_id)), drive)

        refused = api_as("alice").post(f"/workflows/{run_id}/retry")
        accepted = operator_api.post(f"/workflows/{run_id}/retry")
        again = operator_api.post(f"/workflows/{run_id}/retry")

        assert refused.status_code == 403
        assert (accepted.status_code, accepted.json()["state"]) == (202, RunState.COMPENSATING)
        assert again.status_code == 409

    def test_retrying_a_run_that_is_not_dead_lettered_is_409_saying_why(
        self, api_as, operator_api, order_input
    ):
        run_id = start_order(api_as("alice"), order_input).json()["id"]

        response = operator_api.post(f"/workflows/{run_id}/retry")

        assert response.status_code == 409
        assert response.json()["state"] == RunState.RUNNING
        assert "Only a dead-lettered run can be retried" in response.json()["detail"]


class TestPauseAndResume:
    def test_an_operator_pauses_a_run_and_resumes_it(
        self, api_as, operator_api, order_input, drive
    ):
        run_id = start_order(api_as("alice"), order_input).json()["id"]

        paused = operator_api.post(f"/workflows/{run_id}/pause")
        held = drive(WorkflowRun.objects.get(pk=run_id))
        resumed = operator_api.post(f"/workflows/{run_id}/resume")

        assert (paused.status_code, paused.json()["state"]) == (202, RunState.PAUSED)
        assert held.state == RunState.PAUSED
        assert (resumed.status_code, resumed.json()["state"]) == (202, RunState.RUNNING)
        assert drive(WorkflowRun.objects.get(pk=run_id)).state == RunState.SUCCEEDED

    def test_only_operators_may_pause_or_resume(self, api_as, order_input):
        api = api_as("alice")
        run_id = start_order(api, order_input).json()["id"]

        paused = api.post(f"/workflows/{run_id}/pause")
        resumed = api.post(f"/workflows/{run_id}/resume")

        assert (paused.status_code, resumed.status_code) == (403, 403)
        assert paused.json()["detail"] == "Only operators can pause a run."
        assert WorkflowRun.objects.get(pk=run_id).state == RunState.RUNNING

    def test_resuming_a_run_that_is_not_paused_is_409_saying_why(
        self, api_as, operator_api, order_input
    ):
        run_id = start_order(api_as("alice"), order_input).json()["id"]

        response = operator_api.post(f"/workflows/{run_id}/resume")

        assert response.status_code == 409
        assert response.json()["state"] == RunState.RUNNING
        assert response.json()["detail"] == "Only a paused run can be resumed; this one is running."

    def test_pausing_an_ended_run_is_409_naming_its_state(
        self, api_as, operator_api, order_input, drive
    ):
        run_id = start_order(api_as("alice"), order_input).json()["id"]
        drive(WorkflowRun.objects.get(pk=run_id))

        response = operator_api.post(f"/workflows/{run_id}/pause")

        assert response.status_code == 409
        assert response.json()["state"] == RunState.SUCCEEDED
        assert "this one is succeeded" in response.json()["detail"]


class TestAuthentication:
    def test_anonymous_callers_get_401(self, api_as):
        response = api_as(None).get("/workflows")

        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith("Bearer")

    def test_a_revoked_token_stops_working(self, people):
        from django.utils import timezone

        from tests.api.conftest import ApiClient
        from workflows.tokens import issue_token

        token, secret = issue_token(user=people["alice"])
        api = ApiClient(secret)
        assert api.get("/workflows").status_code == 200

        token.revoked_at = timezone.now()
        token.save()

        assert api.get("/workflows").status_code == 401

    def test_tokens_are_stored_only_as_digests(self, people):
        from workflows.tokens import issue_token

        token, secret = issue_token(user=people["alice"])

        assert secret not in (token.digest, token.prefix)
        assert len(token.digest) == 64

    def test_a_browser_session_needs_its_csrf_token(self, alice):
        browser = Client(enforce_csrf_checks=True)
        browser.force_login(alice)

        reading = browser.get("/api/v1/workflows")
        writing = browser.post(
            "/api/v1/workflows", {"type": "order", "input": {}}, content_type="application/json"
        )

        assert reading.status_code == 200
        assert writing.status_code == 403
        assert "CSRF" in writing.json()["detail"]

    def test_a_browser_session_with_its_csrf_token_may_write(self, alice, order_input):
        browser = Client(enforce_csrf_checks=True)
        browser.force_login(alice)
        browser.get("/")  # the inbox sets the CSRF cookie
        token = browser.cookies["csrftoken"].value

        response = browser.post(
            "/api/v1/workflows",
            {"type": "order", "input": order_input()},
            content_type="application/json",
            headers={"X-CSRFToken": token},
        )

        assert response.status_code == 201

    @pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer not-a-token"}])
    def test_a_post_with_neither_session_nor_token_gets_401_not_a_csrf_refusal(
        self, people, headers
    ):
        stranger = Client(enforce_csrf_checks=True)

        response = stranger.post(
            "/api/v1/workflows",
            {"type": "order", "input": {}},
            content_type="application/json",
            headers=headers,
        )

        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert response["Content-Type"] == PROBLEM
        assert WorkflowRun.objects.count() == 0


class TestFoundByFuzzing:
    """Inputs schemathesis found that once reached the database and answered 500."""

    def test_a_nul_character_in_input_is_422(self, api_as, order_input):
        response = start_order(api_as("alice"), order_input, order_id="A\x00B")

        assert response.status_code == 422
        assert WorkflowRun.objects.count() == 0

    def test_a_far_time_zone_offset_is_read_in_utc(self, api_as):
        response = api_as("alice").get("/workflows", started_after="0103-02-17T15:12:16-20:25")

        assert response.status_code == 200

    def test_a_number_is_not_a_date(self, api_as):
        response = api_as("alice").get("/workflows", started_after="0.5")

        assert response.status_code == 422
        assert "ISO 8601" in response.json()["errors"][0]["message"]


def cursor_of(*values):
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode()


class TestCraftedDatesAndText:
    """Inputs an outside probe sent that reached datetime or PostgreSQL and answered 500."""

    @pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"])
    def test_started_after_out_of_range_is_422_saying_the_range(self, api_as, moment):
        response = api_as("alice").get("/workflows", started_after=moment)

        assert response.status_code == 422
        assert response["Content-Type"] == PROBLEM
        assert response.json()["errors"] == [
            {
                "field": "started_after",
                "message": "must lie between 0001-01-02 and 9999-12-30 (UTC)"
                " once its time zone is applied",
                "type": "refused",
            }
        ]

    def test_a_cursor_with_an_offset_past_postgresqls_is_read_in_utc(self, api_as, order_input):
        api = api_as("alice")
        newest = start_order(api, order_input).json()
        far_ahead = cursor_of("2100-01-01T00:00:00+23:00", newest["id"])

        response = api.get("/workflows", cursor=far_ahead)

        assert response.status_code == 200
        assert [item["id"] for item in response.json()["items"]] == [newest["id"]]

    def test_a_cursor_out_of_range_is_a_bad_cursor(self, api_as):
        cursor = cursor_of("0001-01-01T00:00:00+05:00", "00000000-0000-0000-0000-000000000001")

        response = api_as("alice").get("/workflows", cursor=cursor)

        assert (response.status_code, response.json()["title"]) == (400, "Bad cursor")

    def test_a_control_character_in_a_text_field_is_422_naming_the_field(self, api_as, order_input):
        body = {"type": "order", "input": order_input(), "correlation_id": "shop\x1b1"}

        response = api_as("alice").post("/workflows", body)

        assert response.status_code == 422
        assert response.json()["errors"] == [
            {
                "field": "correlation_id",
                "message": "must not contain control characters (found U+001B at position 5)",
                "type": "refused",
            }
        ]
        assert WorkflowRun.objects.count() == 0

    def test_a_control_character_in_the_idempotency_key_is_422(self, api_as, order_input):
        response = start_order(api_as("alice"), order_input, key="order\x001")

        assert response.status_code == 422
        assert response.json()["errors"][0]["field"] == "Idempotency-Key"
        assert WorkflowRun.objects.count() == 0

    def test_a_lone_surrogate_in_input_is_422(self, api_as, order_input):
        response = start_order(api_as("alice"), order_input, order_id="A\ud800")

        assert response.status_code == 422
        assert WorkflowRun.objects.count() == 0


class TestUnknownFields:
    def test_an_idempotency_key_in_the_body_is_refused_naming_it(self, api_as, order_input):
        body = {"type": "order", "input": order_input(), "idempotency_key": "x"}

        response = api_as("alice").post("/workflows", body)

        assert response.status_code == 422
        assert response.json()["detail"] == (
            "The request does not fit the API. Unknown fields: idempotency_key."
        )
        assert response.json()["errors"] == [
            {
                "field": "idempotency_key",
                "message": "is not a field of this request",
                "type": "extra_forbidden",
            }
        ]
        assert WorkflowRun.objects.count() == 0

    def test_a_signal_with_a_misspelt_field_is_refused(self, api_as, start, drive, alice):
        run = drive(start("test_signalled", {}, started_by=alice))

        response = api_as("alice").post(f"/workflows/{run.pk}/signals/go", {"paylod": {"a": 1}})

        assert response.status_code == 422
        assert response.json()["errors"][0]["field"] == "paylod"
        assert run.signals.count() == 0

    def test_unknown_query_parameters_are_still_ignored(self, api_as):
        assert api_as("alice").get("/workflows", _="1700000000").status_code == 200


class TestLimits:
    def test_a_query_string_over_4096_characters_is_414_problem_json(self, api_as):
        response = api_as("alice").get("/workflows", correlation_id="x" * 4100)

        assert response.status_code == 414
        assert response["Content-Type"] == PROBLEM
        assert "this API reads at most 4096" in response.json()["detail"]

    def test_it_is_refused_before_authentication(self, api_as):
        response = api_as(None).get("/workflows", correlation_id="x" * 4100)

        assert response.status_code == 414

    def test_a_long_but_allowed_query_string_is_read(self, api_as):
        response = api_as("alice").get("/workflows", correlation_id="x" * 200, type="y" * 100)

        assert response.status_code == 200


class TestControlCharactersInThePath:
    @pytest.mark.parametrize("path", ["/workflows/a%00b", "/tasks/a%00b", "/tasks/a%0Ab"])
    def test_a_wrong_token_on_such_a_path_is_400_problem_json_not_500(self, path):
        client = Client()

        response = client.get(f"/api/v1{path}", headers={"Authorization": "Bearer wrong"})

        assert response.status_code == 400
        assert response["Content-Type"] == PROBLEM
        assert "which no API path contains" in response.json()["detail"]

    def test_a_signal_posted_with_a_wrong_token_to_such_a_path_is_400(self):
        client = Client()

        response = client.post(
            "/api/v1/workflows/a%00b/signals/go",
            {"payload": {}},
            content_type="application/json",
            headers={"Authorization": "Bearer wrong"},
        )

        assert response.status_code == 400
        assert "U+0000" in response.json()["detail"]

    def test_a_valid_token_is_told_the_same(self, api_as):
        response = api_as("alice").get("/workflows/a%00b")

        assert response.status_code == 400
        assert response["Content-Type"] == PROBLEM


class TestChildRuns:
    @pytest.fixture
    def parent(self, start, drive, alice):
        # The child holds for a signal, so both stay live.
        run = drive(start("test_parent", {"hold": True}, started_by=alice))
        drive(WorkflowRun.objects.get(parent_run=run))
        return run

    def test_a_parent_lists_its_children_and_a_child_names_its_parent(self, api_as, parent):
        api = api_as("alice")

        shown = api.get(f"/workflows/{parent.pk}").json()

        (child,) = shown["children"]
        assert (child["type"], child["state"], child["node"], child["item"]) == (
            "test_child",
            "waiting",
            "call",
            None,
        )
        assert shown["parent_run_id"] is None
        assert api.get(f"/workflows/{child['id']}").json()["parent_run_id"] == str(parent.pk)

    def test_whoever_may_see_the_parent_may_see_its_child_but_nobody_else(self, api_as, parent):
        child = WorkflowRun.objects.get(parent_run=parent)

        assert api_as("alice").get(f"/workflows/{child.pk}").status_code == 200
        assert api_as("eve").get(f"/workflows/{child.pk}").status_code == 404

    def test_only_an_operator_may_cancel_a_child_directly(self, api_as, operator_api, parent):
        child = WorkflowRun.objects.get(parent_run=parent)

        refused = api_as("alice").post(f"/workflows/{child.pk}/cancel")
        accepted = operator_api.post(f"/workflows/{child.pk}/cancel")

        assert refused.status_code == 403
        assert accepted.status_code == 202
