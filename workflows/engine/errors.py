"""What the engine refuses: exceptions whose message is fit for the person who asked."""

from __future__ import annotations

from workflows.models import WorkflowRun


class EngineError(Exception):
    """A request the engine refuses, with a message fit for the person who made it."""


class RunNotFound(EngineError):
    pass


class RunAlreadyEnded(EngineError):
    def __init__(self, run: WorkflowRun) -> None:
        self.state = run.state
        super().__init__(f"Run {run.id} has already ended ({run.state}).")


class IllegalRunOperation(EngineError):
    pass
