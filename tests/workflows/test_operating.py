"""Acting on a run by hand (workflows.operating): one transaction with the engine's use
case, and the run-action hooks told who did what, only when something changed."""

from __future__ import annotations

import uuid

import pytest

from workflows import engine, registry
from workflows.operating import act_on_run
from workflows.states import RunState

pytestmark = pytest.mark.django_db


@pytest.fixture
def heard(monkeypatch) -> list[dict]:
    """What a listener registered alone would hear."""
    calls: list[dict] = []
    monkeypatch.setattr(registry, "_run_action_hooks", [lambda **call: calls.append(call)])
    return calls


class TestActOnRun:
    def test_tells_the_hooks_the_action_the_actor_and_the_state_before(self, start, heard, alice):
        run = start("test_linear", {})

        paused = act_on_run(use_case=engine.pause_run, run_id=run.pk, actor=alice, channel="api")

        assert paused.state == RunState.PAUSED
        [call] = heard
        assert (call["action"], call["actor"], call["state_before"], call["channel"]) == (
            "pause_run",
            alice,
            RunState.RUNNING,
            "api",
        )
        assert call["run"].state == RunState.PAUSED

    def test_an_action_that_changes_nothing_tells_no_one(self, start, heard, alice):
        run = start("test_linear", {})
        engine.pause_run(run_id=run.pk)

        act_on_run(use_case=engine.pause_run, run_id=run.pk, actor=alice, channel="api")

        assert heard == []

    def test_a_refusal_passes_through_and_tells_no_one(self, start, heard, alice):
        run = start("test_linear", {})

        with pytest.raises(engine.IllegalRunOperation, match="Only a paused run"):
            act_on_run(use_case=engine.resume_run, run_id=run.pk, actor=alice, channel="api")

        assert heard == []

    def test_an_unknown_run_is_not_found(self, heard, alice):
        with pytest.raises(engine.RunNotFound):
            act_on_run(use_case=engine.pause_run, run_id=uuid.uuid4(), actor=alice, channel="api")
