"""Updates: a signal whose payload is validated and handled, and whose answer comes back.

An update (`dsl.Update`, Temporal's update) is checked, handled and recorded in one
transaction with the run row locked: the payload against the update's schema, the
handler's answer, the run's new input if the handler gives one (validated by the
input schema), then the signal that records it all, which resumes a wait for its
name like any signal. A refusal writes nothing. The signal's id de-duplicates:
the same id again gets the first answer and changes nothing.
"""

from __future__ import annotations

import copy
import json
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pydantic
from django.db import transaction
from django.utils import timezone

from workflows import field_errors
from workflows.cleaning import Refused, refuse_unstorable
from workflows.dsl import InvalidInput, RunData, Update, Updated, UpdateRefused, Workflow
from workflows.engine.errors import EngineError, IllegalRunOperation, RunAlreadyEnded
from workflows.engine.signals import RESERVED_SIGNAL_ID_PREFIX, deliver_signal
from workflows.engine.work import UnitOfWork, definition_of, lock_run
from workflows.models import WorkflowRun
from workflows.states import RunState, StepKind, StepState

logger = logging.getLogger("baton.engine")

# Runs whose data an update may change: moving forward, not paused by an operator.
UPDATABLE_RUN_STATES = (RunState.RUNNING, RunState.WAITING)


class UnknownUpdate(EngineError):
    """The run's definition has no update of that name; the message lists the ones it has."""

    def __init__(self, definition: Workflow, name: str) -> None:
        known = ", ".join(sorted(definition.updates)) or "none"
        super().__init__(f"{definition} has no update {name!r} (its updates: {known}).")


class UpdateNotAccepted(EngineError):
    """The run is not where it accepts this update now (HTTP 409); `state` is the run's."""

    def __init__(self, run: WorkflowRun, message: str) -> None:
        self.state = run.state
        super().__init__(message)


class InvalidUpdate(EngineError):
    """The payload, or what the handler made of it, was refused (HTTP 422); nothing changed.

    `errors` lists each field's problem when the schema refused the payload.
    """

    def __init__(self, message: str, errors: list[dict[str, str]] | None = None) -> None:
        self.errors = errors
        super().__init__(message)


@dataclass(frozen=True)
class UpdateAnswer:
    """The handler's answer, under the update's id; `duplicate` when the id was seen before."""

    update_id: str
    result: Any
    duplicate: bool


def update_run(
    *,
    run_id: uuid.UUID | str,
    name: str,
    payload: Any,
    update_id: str | None = None,
    now: datetime | None = None,
) -> UpdateAnswer:
    """Validate, handle and record the update `name` of a live run; return its answer.

    Raise UnknownUpdate, UpdateNotAccepted (the run has ended, is not running or
    waiting, or does not wait where the update is accepted), InvalidUpdate (the
    payload does not fit, the handler refused it or gave back what cannot be kept),
    or IllegalRunOperation (the id is taken by another signal); nothing is written then.
    """
    now = now or timezone.now()
    work = UnitOfWork()
    with transaction.atomic():
        run = lock_run(run_id)
        definition = definition_of(run)
        update = definition.updates.get(name)
        if update is None:
            raise UnknownUpdate(definition, name)
        if update_id is not None:
            answered = _earlier_answer(run, name, update_id)
            if answered is not None:
                return answered
        _refuse_unless_accepted(run, update, name)
        values = _validated_payload(update, payload)
        outcome = _handled(run, definition, update, name, values)
        result = outcome.result if isinstance(outcome, Updated) else outcome
        new_input = outcome.input if isinstance(outcome, Updated) else None
        answer = {"result": _storable(name, result)}
        if new_input is not None:
            try:
                run.input = definition.validate_input(new_input, previous=run.input)
            except InvalidInput as error:
                raise InvalidUpdate(
                    f"Update {name!r} would leave the run's input invalid.", errors=error.errors
                ) from None
            work.save(run)
        signal = deliver_signal(
            run,
            definition,
            name=name,
            payload=values.model_dump(mode="json"),
            signal_id=update_id or str(uuid.uuid4()),
            now=now,
            work=work,
            answer=answer,
        )
        work.finish(run)
    return UpdateAnswer(update_id=signal.signal_id, result=answer["result"], duplicate=False)


def _earlier_answer(run: WorkflowRun, name: str, update_id: str) -> UpdateAnswer | None:
    if update_id.startswith(RESERVED_SIGNAL_ID_PREFIX):
        raise IllegalRunOperation(
            f"Ids starting with {RESERVED_SIGNAL_ID_PREFIX!r} are reserved for approvals."
        )
    earlier = run.signals.filter(signal_id=update_id).values_list("name", "answer").first()
    if earlier is None:
        return None
    earlier_name, answer = earlier
    if earlier_name != name or answer is None:
        raise IllegalRunOperation(
            f"The id {update_id!r} was already used by the signal {earlier_name!r} of this run; "
            "use an id of its own for each update."
        )
    return UpdateAnswer(update_id=update_id, result=answer["result"], duplicate=True)


def _refuse_unless_accepted(run: WorkflowRun, update: Update, name: str) -> None:
    if run.is_finished or run.state == RunState.DEAD_LETTERED:
        raise RunAlreadyEnded(run)
    if run.state not in UPDATABLE_RUN_STATES:
        raise UpdateNotAccepted(
            run, f"Run {run.id} is {run.state}: it accepts updates only while running or waiting."
        )
    if (
        update.waiting_at
        and not run.steps.filter(
            kind=StepKind.FORWARD, state=StepState.WAITING, node__in=update.waiting_at
        ).exists()
    ):
        where = " or ".join(update.waiting_at)
        raise UpdateNotAccepted(
            run, f"Run {run.id} accepts {name!r} only while it waits at {where}, and it does not."
        )


def _validated_payload(update: Update, payload: Any) -> pydantic.BaseModel:
    try:
        return update.schema.model_validate(payload)
    except pydantic.ValidationError as error:
        raise InvalidUpdate(
            "The payload does not fit the update's schema.",
            # Each problem in the reader's language, with pydantic's type, as the API's
            # and the forms' errors are (workflows.field_errors).
            errors=[
                field_errors.described(
                    problem, field=".".join(str(part) for part in problem["loc"]) or "payload"
                )
                for problem in error.errors()
            ],
        ) from None


def _handled(
    run: WorkflowRun, definition: Workflow, update: Update, name: str, values: pydantic.BaseModel
) -> Any:
    """Call the handler on a copy of the run's input, so only an `Updated` changes it."""
    data = RunData(input=copy.deepcopy(run.input), results=run.results)
    try:
        return update.handler(data, values)
    except UpdateRefused as error:
        raise InvalidUpdate(str(error) or f"Update {name!r} was refused.") from None
    except Exception as error:
        # The handler's own fault: the caller hears it, the definition's authors read it.
        logger.warning(
            "update.handler_failed",
            exc_info=True,
            extra={"run_id": str(run.id), "workflow": definition.name, "update": name},
        )
        raise InvalidUpdate(f"Update {name!r} failed: {type(error).__name__}: {error}") from None


def _storable(name: str, result: Any) -> Any:
    """Return the handler's answer as JSON would give it back, or refuse it."""
    try:
        stored = json.loads(json.dumps(result, allow_nan=False))
        refuse_unstorable(stored)
    except (TypeError, ValueError) as error:  # Refused is a ValueError
        detail = str(error) if isinstance(error, Refused) else "it is not JSON data"
        raise InvalidUpdate(f"Update {name!r} answered what cannot be kept: {detail}.") from None
    return stored
