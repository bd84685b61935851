"""/api/v1: queries and updates of a live run, and signals by business key, with their errors."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from workflows import engine
from workflows.models import Signal, WorkflowRun
from workflows.states import RunState

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"
QUOTE = {"order_id": "Q-1", "amount": 100}
CHANGE = {"amount": 120, "reason": "one more"}


@pytest.fixture
def quoted(start, drive, alice):
    """Alice's quote, prepared and waiting for her go."""
    return drive(start("test_quoted", QUOTE, started_by=alice))


@pytest.fixture
def viewer_api(bob, api_as):
    """Bob may see every run, but not act on others' runs."""
    bob.user_permissions.add(Permission.objects.get(codename="view_workflowrun"))
    return api_as("bob")


class TestQuery:
    def test_answers_from_the_runs_data(self, api_as, quoted):
        response = api_as("alice").get(f"/workflows/{quoted.pk}/queries/quote")

        assert response.status_code == 200
        assert response.json() == {
            "query": "quote",
            "result": {"order_id": "Q-1", "amount": 100, "currency": "EUR", "prepared": True},
        }

    def test_whoever_may_see_the_run_may_ask(self, viewer_api, quoted):
        response = viewer_api.get(f"/workflows/{quoted.pk}/queries/quote")

        assert response.status_code == 200

    def test_a_run_you_may_not_see_is_404(self, api_as, quoted):
        response = api_as("eve").get(f"/workflows/{quoted.pk}/queries/quote")

        assert response.status_code == 404
        assert response["Content-Type"] == PROBLEM

    def test_an_unknown_query_is_404_naming_the_known_ones(self, api_as, quoted):
        response = api_as("alice").get(f"/workflows/{quoted.pk}/queries/price")

        assert response.status_code == 404
        assert response.json()["title"] == "Unknown query"
        assert "(its queries: broken, quote)" in response.json()["detail"]

    def test_a_query_that_raises_is_422_with_its_error(self, api_as, quoted):
        response = api_as("alice").get(f"/workflows/{quoted.pk}/queries/broken")

        assert response.status_code == 422
        assert response.json()["detail"] == "Query 'broken' failed: KeyError: 'missing'"


class TestUpdate:
    def test_answers_200_with_the_handlers_result_and_changes_the_input(self, api_as, quoted):
        response = api_as("alice").post(
            f"/workflows/{quoted.pk}/updates/change_amount", {"id": "u-1", "payload": CHANGE}
        )

        assert response.status_code == 200
        assert response.json() == {
            "update_id": "u-1",
            "result": {"was": 100, "now": 120},
            "duplicate": False,
        }
        assert WorkflowRun.objects.get(pk=quoted.pk).input["amount"] == 120

    def test_the_same_id_again_answers_the_first_result_and_changes_nothing(self, api_as, quoted):
        api = api_as("alice")
        path = f"/workflows/{quoted.pk}/updates/change_amount"
        first = api.post(path, {"id": "u-1", "payload": CHANGE})

        again = api.post(path, {"id": "u-1", "payload": {"amount": 130, "reason": "more"}})

        assert again.status_code == 200
        assert again.json() == {**first.json(), "duplicate": True}
        assert WorkflowRun.objects.get(pk=quoted.pk).input["amount"] == 120
        assert Signal.objects.filter(run=quoted).count() == 1

    def test_an_unknown_update_is_404_naming_the_known_ones(self, api_as, quoted):
        response = api_as("alice").post(f"/workflows/{quoted.pk}/updates/discount", {})

        assert response.status_code == 404
        assert "(its updates: accept, change_amount)" in response.json()["detail"]

    def test_a_payload_that_does_not_fit_is_422_naming_each_field(self, api_as, quoted):
        response = api_as("alice").post(
            f"/workflows/{quoted.pk}/updates/change_amount", {"payload": {"amount": 0}}
        )

        assert response.status_code == 422
        assert {error["field"] for error in response.json()["errors"]} == {"amount", "reason"}
        assert not Signal.objects.exists()

    def test_a_german_callers_payload_errors_are_in_german_with_their_type(self, api_as, quoted):
        response = api_as("alice").post(
            f"/workflows/{quoted.pk}/updates/change_amount",
            {"payload": {"amount": 120}},
            headers={"Accept-Language": "de"},
        )

        assert response.status_code == 422
        assert response.json()["errors"] == [
            {"field": "reason", "message": "Feld erforderlich", "type": "missing"}
        ]

    def test_a_payload_the_handler_refuses_is_422_with_its_reason(self, api_as, quoted):
        response = api_as("alice").post(
            f"/workflows/{quoted.pk}/updates/change_amount",
            {"payload": {"amount": 5000, "reason": "typo"}},
        )

        assert response.status_code == 422
        assert response.json()["detail"] == "5000 is more than ten times the quoted 100."

    def test_a_misspelt_body_field_is_422(self, api_as, quoted):
        response = api_as("alice").post(
            f"/workflows/{quoted.pk}/updates/change_amount", {"paylod": CHANGE}
        )

        assert response.status_code == 422
        assert "Unknown fields: paylod." in response.json()["detail"]

    def test_an_ended_run_is_409_with_its_state(self, api_as, quoted):
        engine.signal_run(run_id=quoted.pk, name="stop")

        response = api_as("alice").post(
            f"/workflows/{quoted.pk}/updates/change_amount", {"payload": CHANGE}
        )

        assert response.status_code == 409
        assert response.json()["state"] == RunState.SUCCEEDED

    def test_a_paused_run_is_409_saying_why(self, api_as, quoted):
        engine.pause_run(run_id=quoted.pk)

        response = api_as("alice").post(
            f"/workflows/{quoted.pk}/updates/change_amount", {"payload": CHANGE}
        )

        assert response.status_code == 409
        assert response.json()["title"] == "Update not accepted now"
        assert "accepts updates only while running or waiting" in response.json()["detail"]

    def test_an_id_another_signal_used_is_409(self, api_as, quoted):
        engine.signal_run(run_id=quoted.pk, name="nudge", signal_id="s-1")

        response = api_as("alice").post(
            f"/workflows/{quoted.pk}/updates/change_amount", {"id": "s-1", "payload": CHANGE}
        )

        assert response.status_code == 409
        assert "already used by the signal 'nudge'" in response.json()["detail"]

    def test_someone_who_may_only_see_the_run_is_403(self, viewer_api, quoted):
        response = viewer_api.post(
            f"/workflows/{quoted.pk}/updates/change_amount", {"payload": CHANGE}
        )

        assert response.status_code == 403

    def test_the_update_may_not_be_sent_as_a_plain_signal(self, api_as, quoted):
        response = api_as("alice").post(
            f"/workflows/{quoted.pk}/signals/change_amount", {"payload": {"amount": 1}}
        )

        assert response.status_code == 403
        assert "send it as an update" in response.json()["detail"]


def keyed(**body):
    return {"type": "test_quoted", "name": "go", **body}


class TestSignalByKey:
    def test_signals_the_one_live_run_with_the_searchable_field(self, api_as, quoted):
        response = api_as("alice").post("/signals", keyed(key={"order_id": "Q-1"}, id="s-1"))

        assert response.status_code == 202
        assert response.json() == {
            "run_id": str(quoted.pk),
            "signal_id": "s-1",
            "duplicate": False,
            "started": False,
        }
        assert quoted.signals.get().name == "go"

    def test_signals_the_one_live_run_with_the_correlation_id(self, api_as, start, alice):
        run = start("test_quoted", QUOTE, started_by=alice, correlation_id="shop-7")

        response = api_as("alice").post("/signals", keyed(correlation_id="shop-7"))

        assert response.status_code == 202
        assert response.json()["run_id"] == str(run.pk)

    def test_no_live_run_with_the_key_is_404(self, api_as, quoted):
        response = api_as("alice").post("/signals", keyed(key={"order_id": "Q-2"}))

        assert response.status_code == 404
        assert response.json()["title"] == "No live run"

    def test_another_persons_run_is_not_found(self, api_as, quoted):
        response = api_as("eve").post("/signals", keyed(key={"order_id": "Q-1"}))

        assert response.status_code == 404
        assert not Signal.objects.exists()

    def test_several_live_runs_with_the_key_are_409_naming_how_many(
        self, api_as, quoted, start, alice
    ):
        start("test_quoted", QUOTE, started_by=alice)

        response = api_as("alice").post("/signals", keyed(key={"order_id": "Q-1"}))

        assert response.status_code == 409
        assert response.json()["detail"].startswith("2 live runs of 'test_quoted'")

    def test_an_unknown_type_is_404(self, api_as):
        response = api_as("alice").post("/signals", keyed(type="nope", correlation_id="x"))

        assert response.status_code == 404
        assert response.json()["title"] == "Unknown workflow type"

    @pytest.mark.parametrize(
        "body",
        [
            keyed(),
            keyed(correlation_id="shop-7", key={"order_id": "Q-1"}),
            keyed(key={}),
            keyed(key={"order_id": "Q-1", "currency": "EUR"}),
            keyed(key={"order_id": ["Q-1"]}),
        ],
        ids=["no key", "two keys", "empty key", "two fields", "a list"],
    )
    def test_anything_but_one_key_is_422(self, api_as, body):
        response = api_as("alice").post("/signals", body)

        assert response.status_code == 422
        assert response["Content-Type"] == PROBLEM

    def test_a_field_that_is_not_searchable_is_422_naming_those_that_are(self, api_as):
        response = api_as("alice").post("/signals", keyed(key={"amount": 100}))

        assert response.status_code == 422
        assert "find its runs by correlation_id, order_id" in response.json()["detail"]


class TestSignalWithStart:
    def test_starts_the_missing_run_and_signals_it(self, api_as):
        response = api_as("alice").post(
            "/signals",
            keyed(key={"order_id": "Q-9"}, id="s-1", start_if_missing={"input": {"amount": 40}}),
        )

        assert response.status_code == 202
        assert response.json()["started"] is True
        run = WorkflowRun.objects.get(pk=response.json()["run_id"])
        assert (run.input["order_id"], run.started_by.username) == ("Q-9", "alice")
        assert run.signals.get().signal_id == "s-1"

    def test_a_retry_starts_nothing_and_is_a_duplicate(self, api_as):
        api = api_as("alice")
        body = keyed(key={"order_id": "Q-9"}, id="s-1", start_if_missing={"input": {"amount": 40}})
        first = api.post("/signals", body)

        again = api.post("/signals", body)

        assert again.status_code == 202
        assert again.json() == {**first.json(), "duplicate": True, "started": False}
        assert WorkflowRun.objects.count() == 1

    def test_without_an_id_it_is_422(self, api_as):
        response = api_as("alice").post(
            "/signals", keyed(key={"order_id": "Q-9"}, start_if_missing={"input": {"amount": 4}})
        )

        assert response.status_code == 422
        assert "needs the signal's id" in response.json()["detail"]

    def test_an_input_that_does_not_fit_is_422_naming_the_field(self, api_as):
        response = api_as("alice").post(
            "/signals",
            keyed(key={"order_id": "Q-9"}, id="s-1", start_if_missing={"input": {"amount": -1}}),
        )

        assert response.status_code == 422
        assert [error["field"] for error in response.json()["errors"]] == [
            "start_if_missing.input.amount"
        ]
        assert not WorkflowRun.objects.exists()

    def test_a_type_you_may_not_start_is_403(self, api_as):
        response = api_as("alice").post(
            "/signals",
            {
                "type": "test_signalled",
                "correlation_id": "shop-7",
                "name": "go",
                "id": "s-1",
                "start_if_missing": {"input": {}},
            },
        )

        assert response.status_code == 403
        assert not WorkflowRun.objects.exists()

    def test_someone_elses_live_run_with_the_key_is_409_and_none_is_started(self, api_as, quoted):
        response = api_as("eve").post(
            "/signals",
            keyed(key={"order_id": "Q-1"}, id="s-1", start_if_missing={"input": {"amount": 1}}),
        )

        assert response.status_code == 409
        assert "no second run was started" in response.json()["detail"]
        assert WorkflowRun.objects.count() == 1


class TestOpenApiDocument:
    def test_documents_each_types_update_payloads_and_queries(self, api_as):
        document = api_as("alice").get("/openapi.json").json()

        payload = document["components"]["schemas"]["UpdateIn"]["properties"]["payload"]
        reference = payload["x-baton-updates"]["test_quoted"]["change_amount"]
        component = document["components"]["schemas"][reference["$ref"].rsplit("/", 1)[1]]
        assert set(component["required"]) == {"amount", "reason"}
        query = document["paths"]["/api/v1/workflows/{run_id}/queries/{name}"]["get"]
        assert query["x-baton-queries"]["test_quoted"] == ["broken", "quote"]
        assert "/api/v1/signals" in document["paths"]


class TestNumbersJsonCannotCarry:
    def test_nan_in_a_signals_payload_is_422_not_500(self, api_as, quoted):
        response = api_as("alice").client.post(
            f"/api/v1/workflows/{quoted.pk}/signals/go",
            '{"payload": {"rate": NaN}}',
            content_type="application/json",
            headers=api_as("alice").headers,
        )

        assert response.status_code == 422
        assert response.json()["errors"] == [
            {
                "field": "payload",
                "message": "numbers must be finite (JSON has no NaN or Infinity)",
                "type": "refused",
            }
        ]
