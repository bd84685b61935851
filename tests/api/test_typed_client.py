"""Baton's typed Python client, generated from the live server's OpenAPI document with
openapi-python-client (as `make client` does), drives a whole request: alice starts an
expense, carol finds and approves it, alice follows it to its end."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from workflows.models import WorkflowRun
from workflows.tokens import issue_token

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = Path(sys.executable).parent / "openapi-python-client"
# httpx's own 5 s is a quiet machine's figure: a loaded one builds the schema slower.
REQUEST_TIMEOUT = 60.0


@pytest.fixture
def baton_client(live_server, tmp_path):
    """The client package, generated from what the live server documents now."""
    schema = tmp_path / "openapi.json"
    response = httpx.get(f"{live_server.url}/api/v1/openapi.json", timeout=REQUEST_TIMEOUT)
    schema.write_bytes(response.content)
    generated = subprocess.run(
        [
            str(GENERATOR),
            "generate",
            "--path",
            str(schema),
            "--config",
            str(ROOT / "clients/python/openapi-python-client.yml"),
            "--output-path",
            str(tmp_path / "baton-client"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert "Warning" not in generated.stdout, generated.stdout
    sys.path.insert(0, str(tmp_path / "baton-client"))
    try:
        yield importlib.import_module("baton_client")
    finally:
        sys.path.remove(str(tmp_path / "baton-client"))
        for name in [name for name in sys.modules if name.startswith("baton_client")]:
            del sys.modules[name]


def client_for(baton_client, live_server, user):
    _, secret = issue_token(user=user)
    return baton_client.AuthenticatedClient(
        base_url=live_server.url, token=secret, timeout=httpx.Timeout(REQUEST_TIMEOUT)
    )


def test_a_whole_request_through_the_typed_client(
    baton_client, live_server, people, employees, drive
):
    from baton_client.api.tasks import decide_task, list_tasks
    from baton_client.api.workflows import get_workflow, start_workflow
    from baton_client.models import (
        DecisionIn,
        DecisionInOutcome,
        RunOut,
        StartWorkflowIn,
        StartWorkflowInInput,
        TaskOut,
        TaskPageOut,
    )

    alice = client_for(baton_client, live_server, people["alice"])
    carol = client_for(baton_client, live_server, people["carol"])

    started = start_workflow.sync(
        client=alice,
        idempotency_key="typed-client-1",
        body=StartWorkflowIn(
            type_="expense",
            input_=StartWorkflowInInput.from_dict(
                {
                    "requester": "alice",
                    "title": "Train to Lyon",
                    "amount": "120.00",
                    "currency": "EUR",
                }
            ),
        ),
    )
    assert isinstance(started, RunOut), started
    drive(WorkflowRun.objects.get(pk=started.id))

    inbox = list_tasks.sync(client=carol)
    assert isinstance(inbox, TaskPageOut), inbox
    [task] = [task for task in inbox.items if task.run_id == started.id]
    decided = decide_task.sync(
        task_id=task.id,
        client=carol,
        body=DecisionIn(outcome=DecisionInOutcome.APPROVE, comment="Fine.", version=task.version),
    )
    assert isinstance(decided, TaskOut), decided
    assert (decided.state, decided.outcome) == ("completed", "approved")
    drive(WorkflowRun.objects.get(pk=started.id))

    followed = get_workflow.sync(run_id=started.id, client=alice)
    assert isinstance(followed, RunOut), followed
    assert followed.state == "succeeded"


def test_a_refusal_comes_back_as_a_typed_problem(baton_client, live_server, people, employees):
    from baton_client.api.workflows import start_workflow
    from baton_client.models import Problem, StartWorkflowIn, StartWorkflowInInput

    alice = client_for(baton_client, live_server, people["alice"])

    refused = start_workflow.sync_detailed(
        client=alice,
        body=StartWorkflowIn(type_="expense", input_=StartWorkflowInInput.from_dict({"title": ""})),
    )

    assert refused.status_code == 422
    assert isinstance(refused.parsed, Problem)
    assert refused.parsed.detail
