"""The console's operator actions in the REST API: retry a failed run, skip a stuck step,
retry dead letters in bulk; audited with channel api, refused as the console refuses."""

from __future__ import annotations

import pytest
from auditlog.models import LogEntry

from tests.workflows.test_engine import sweep_until_quiet
from workflows.models import WorkflowRun
from workflows.states import RunState, StepState

pytestmark = pytest.mark.django_db


@pytest.fixture
def failed_run(start, drive) -> WorkflowRun:
    run = drive(start("test_linear", {"simulate": {"first": "outage"}}))
    return sweep_until_quiet(run, drive)


class TestRetryFailed:
    def test_an_operator_retries_a_failed_run_and_it_is_audited(
        self, operator_api, failed_run, olga
    ):
        response = operator_api.post(
            f"/workflows/{failed_run.pk}/retry-failed", {"reason": "flaky upstream"}
        )

        assert (response.status_code, response.json()["state"]) == (202, RunState.RUNNING)
        entry = LogEntry.objects.get_for_object(failed_run).get()
        assert (entry.actor, entry.additional_data["channel"]) == (olga, "api")

    def test_someone_else_is_refused_with_a_reason(self, api_as, failed_run):
        response = api_as("alice").post(f"/workflows/{failed_run.pk}/retry-failed")

        assert response.status_code == 403
        assert response.json()["detail"].startswith("Only operators may retry a failed run")

    def test_a_run_in_another_state_is_409_naming_it(self, operator_api, start):
        run = start("test_linear", {})

        response = operator_api.post(f"/workflows/{run.pk}/retry-failed")

        assert response.status_code == 409
        assert "this one is running" in response.json()["detail"]


class TestSkip:
    def test_an_operator_skips_a_step_with_a_json_result(self, operator_api, failed_run, drive):
        response = operator_api.post(
            f"/workflows/{failed_run.pk}/steps/first/skip", {"result": {"by": "hand"}}
        )

        assert response.status_code == 202
        run = drive(failed_run)
        assert run.state == RunState.SUCCEEDED
        assert run.steps.get(node="first").state == StepState.SKIPPED
        assert run.results["first"] == {"by": "hand"}

    def test_a_result_the_database_cannot_store_is_422(self, operator_api, failed_run):
        response = operator_api.post(
            f"/workflows/{failed_run.pk}/steps/first/skip", {"result": "nul \u0000 here"}
        )

        assert response.status_code == 422
        failed_run.refresh_from_db()
        assert failed_run.state == RunState.FAILED


class TestBulkRetry:
    def test_each_run_gets_its_outcome(self, operator_api, start, drive, order_input):
        failing = order_input(simulate={"shipping": "fail", "refund": "outage"})
        dead = sweep_until_quiet(drive(start("order", failing)), drive)
        running = start("test_linear", {})

        response = operator_api.post(
            "/workflows/retry-dead-letters", {"runs": [str(dead.pk), str(running.pk)]}
        )

        assert response.status_code == 200
        by_id = {item["id"]: item for item in response.json()}
        assert by_id[str(dead.pk)]["state"] == RunState.COMPENSATING
        assert "this one is running" in by_id[str(running.pk)]["refused"]

    def test_an_empty_list_is_422(self, operator_api):
        assert operator_api.post("/workflows/retry-dead-letters", {"runs": []}).status_code == 422


class TestTheWorkflowsApisActionsAreAudited:
    def test_pause_and_resume_name_the_operator(self, operator_api, start, olga):
        run = start("test_linear", {})

        operator_api.post(f"/workflows/{run.pk}/pause")
        operator_api.post(f"/workflows/{run.pk}/pause")  # already paused: nothing more
        operator_api.post(f"/workflows/{run.pk}/resume")

        entries = list(LogEntry.objects.get_for_object(run).order_by("id"))
        assert [
            (e.additional_data["event"], e.actor, e.additional_data["channel"]) for e in entries
        ] == [
            ("run_paused", olga, "api"),
            ("run_resumed", olga, "api"),
        ]

    def test_a_refused_action_writes_nothing(self, operator_api, start):
        run = start("test_linear", {})

        response = operator_api.post(f"/workflows/{run.pk}/resume")

        assert response.status_code == 409
        assert not LogEntry.objects.get_for_object(run).exists()
