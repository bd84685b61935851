"""POST /api/v1/workflows/migrations: operators move live runs to another version, a dry run
unless `apply` is true; everyone else gets a 403 saying why."""

from __future__ import annotations

import pytest
from auditlog.models import LogEntry

from tests.workflows.definitions import VERSIONED_RENAMES, VERSIONED_V2
from workflows import engine, registry
from workflows.models import WorkflowRun

pytestmark = pytest.mark.django_db

PLAN = {"type": "test_versioned", "from_version": 1, "to_version": 2, "renames": VERSIONED_RENAMES}


@pytest.fixture
def two_runs(people):
    """One v1 run that can move and one that cannot (v2 has no side track); v2 deployed."""
    ready, _ = engine.start_workflow(workflow_type="test_versioned", input={"amount": 1})
    side, _ = engine.start_workflow(
        workflow_type="test_versioned", input={"path": "side", "amount": 1}
    )
    registry.register(VERSIONED_V2)
    yield ready, side
    registry.unregister(VERSIONED_V2)


@pytest.fixture
def operator_api(operator, api_as):
    return api_as("olga")


class TestMigrationsApi:
    def test_a_dry_run_lists_every_run_and_changes_nothing(self, operator_api, two_runs):
        ready, side = two_runs

        response = operator_api.post("/workflows/migrations", PLAN)

        assert response.status_code == 200
        body = response.json()
        assert (body["applied"], body["movable"], body["blocked"]) == (False, 1, 1)
        runs = {run["id"]: run for run in body["runs"]}
        assert runs[str(ready.pk)] == {
            "id": str(ready.pk),
            "state": "waiting",
            "at": ["await_go"],
            "can_move": True,
            "moved": False,
            "reasons": [],
        }
        assert runs[str(side.pk)]["reasons"] == [
            "it is at 'side_track', and test_versioned v2 has no node 'side_track' "
            "(name the node it becomes with a rename: side_track=NEW)"
        ]
        assert set(WorkflowRun.objects.values_list("workflow_version", flat=True)) == {1}

    def test_apply_moves_the_runs_that_can(self, operator_api, two_runs):
        ready, side = two_runs

        response = operator_api.post("/workflows/migrations", {**PLAN, "apply": True})

        assert response.status_code == 200
        body = response.json()
        assert (body["applied"], body["movable"], body["blocked"]) == (True, 1, 1)
        runs = {run["id"]: run for run in body["runs"]}
        assert (runs[str(ready.pk)]["moved"], runs[str(ready.pk)]["at"]) == (
            True,
            ["await_signal"],
        )
        assert runs[str(side.pk)]["moved"] is False
        ready.refresh_from_db()
        assert ready.workflow_version == 2
        assert ready.events.get(kind="operator").detail["by"] == "olga"
        entry = LogEntry.objects.get_for_object(ready).get()
        assert (entry.actor.username, entry.additional_data["channel"]) == ("olga", "api")
        assert entry.additional_data["event"] == "run_migrated"

    @pytest.mark.parametrize("apply", [False, True])
    def test_others_get_a_403_saying_why(self, api_as, two_runs, apply):
        response = api_as("alice").post("/workflows/migrations", {**PLAN, "apply": apply})

        assert response.status_code == 403
        assert response.json()["detail"] == "Only operators can move runs to another version."
        assert set(WorkflowRun.objects.values_list("workflow_version", flat=True)) == {1}

    def test_an_unknown_version_is_404(self, operator_api, two_runs):
        response = operator_api.post("/workflows/migrations", {**PLAN, "to_version": 9})

        assert response.status_code == 404
        assert response.json()["detail"] == "Workflow type 'test_versioned' has no version 9."

    def test_an_impossible_plan_is_422_naming_each_problem(self, operator_api, two_runs):
        response = operator_api.post(
            "/workflows/migrations", {**PLAN, "renames": {"await_go": "nowhere"}}
        )

        assert response.status_code == 422
        assert response.json()["errors"] == [
            {
                "field": "renames",
                "message": "rename await_go=nowhere: test_versioned v2 has no node 'nowhere'",
            }
        ]
