"""Moving a type's live runs to another version from the run console: a preview that
changes nothing and names why a run cannot move, then the move, audited with the
operator's name and reason; refusals in words."""

from __future__ import annotations

import pytest
from auditlog.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.test import Client

from tests.workflows.definitions import VERSIONED_RENAMES, VERSIONED_V2
from workflows import registry
from workflows.models import WorkflowRun

pytestmark = pytest.mark.django_db

URL = "/console/versions/"
RENAMES = "\n".join(f"{old}={new}" for old, new in VERSIONED_RENAMES.items())
PLAN = {"type": "test_versioned", "from": "1", "to": "2", "renames": RENAMES}


@pytest.fixture
def olga_client(operator) -> Client:
    operator.is_staff = True
    operator.save()
    client = Client()
    client.force_login(User.objects.get(pk=operator.pk))
    return client


@pytest.fixture
def live_runs(start, drive, people):
    """Two runs of test_versioned v1: one that can move to v2, one on a side track."""
    ready = drive(start("test_versioned", {"path": "", "amount": 5}))
    side = drive(start("test_versioned", {"path": "side", "amount": 5}))
    registry.register(VERSIONED_V2)
    yield ready, side
    registry.unregister(VERSIONED_V2)


class TestPreview:
    def test_names_the_runs_that_can_move_and_why_the_others_cannot(self, olga_client, live_runs):
        response = olga_client.get(URL, PLAN)

        text = response.text
        assert response.status_code == 200
        assert "Test versioned v1 → v2: preview" in text  # the type by its title
        assert "1 can move;\n     1 cannot." in text
        assert "has no node &#x27;side_track&#x27;" in text
        assert set(WorkflowRun.objects.values_list("workflow_version", flat=True)) == {1}

    def test_a_malformed_rename_is_refused_naming_its_line(self, olga_client, live_runs):
        response = olga_client.get(URL, {**PLAN, "renames": "sign_off=review\nawait_go"})

        assert response.status_code == 422
        assert "Line 2 of the renames, &#x27;await_go&#x27;, is not old=new" in response.text

    def test_an_unknown_version_is_a_404_that_names_it(self, olga_client, live_runs):
        response = olga_client.get(URL, {**PLAN, "to": "9"})

        assert response.status_code == 404
        assert "test_versioned" in response.text

    def test_a_version_that_is_not_a_number_is_refused(self, olga_client, live_runs):
        response = olga_client.get(URL, {**PLAN, "from": "one"})

        assert response.status_code == 422
        assert "The from version must be a whole number, 1 or more." in response.text


class TestMove:
    def test_moves_the_runs_that_can_and_audits_it_with_the_operator_and_reason(
        self, olga_client, live_runs
    ):
        ready, side = live_runs

        response = olga_client.post(URL, {**PLAN, "reason": "v2 asks for a review"})

        ready.refresh_from_db()
        side.refresh_from_db()
        assert response.status_code == 200
        assert "Moved 1 run; 1 could not move." in response.text
        assert (ready.workflow_version, side.workflow_version) == (2, 1)
        entry = LogEntry.objects.filter(additional_data__event="run_migrated").get()
        assert entry.actor.username == "olga"
        assert "v2 asks for a review" in str(entry.additional_data)

    def test_a_move_without_a_reason_is_refused_and_moves_nothing(self, olga_client, live_runs):
        response = olga_client.post(URL, PLAN)

        assert response.status_code == 422
        assert "Say why you move these runs" in response.text
        assert set(WorkflowRun.objects.values_list("workflow_version", flat=True)) == {1}

    def test_someone_who_may_only_look_may_preview_but_not_move(self, people, live_runs):
        viewer = User.objects.create_user("vic", is_staff=True)
        viewer.user_permissions.add(Permission.objects.get(codename="view_workflowrun"))
        client = Client()
        client.force_login(viewer)

        preview = client.get(URL, PLAN)
        move = client.post(URL, {**PLAN, "reason": "try"})

        assert preview.status_code == 200
        assert move.status_code == 403
        assert "move runs to another version" in move.text
        assert set(WorkflowRun.objects.values_list("workflow_version", flat=True)) == {1}

    def test_people_outside_the_console_are_refused(self, client, alice, live_runs):
        client.force_login(alice)

        response = client.get(URL, PLAN)

        assert response.status_code == 403
