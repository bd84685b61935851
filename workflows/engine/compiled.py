"""What the engine's compiled statements are written from: rows whose per-call values are
stand-ins, so that a django-fsm transition applied once to such a row says what every
call writes.

The straight step (`straight`: a step's success and the next step) and the straight start
(`start`: a run, its STARTED event and its first step) are each one statement, compiled
once per process. Their rows are made as the general way makes them (`new_row`, the
models' transitions), with a `Param` wherever a call brings its own value; every other
column is a constant of the statement, converted as a save converts it. So the state
machines stay the one specification, and a call converts and sends only what differs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Field, Model

from workflows.engine import functions
from workflows.models import StepRun, new_row
from workflows.states import StepKind, StepState


@dataclass(frozen=True)
class Param:
    """A value bound at each call: `name` in the call's values."""

    name: str

    def bound(self, values: dict[str, Any], claimed: bool) -> Any:
        """This call's value."""
        return values[self.name]


@dataclass(frozen=True)
class ClaimedOr:
    """A new step's value that differs between a step claimed by the worker writing it and
    one scheduled for a worker (a constant, or a `Param`)."""

    claimed: Any
    scheduled: Any

    def bound(self, values: dict[str, Any], claimed: bool) -> Any:
        """This call's value, by whether it claims its new step."""
        value = self.claimed if claimed else self.scheduled
        return value.bound(values, claimed) if isinstance(value, Param) else value


# What a call binds: a value of its own, or one of two by whether it claims its new step.
PER_CALL = (Param, ClaimedOr)

_UNSET = object()

_Row = TypeVar("_Row", bound=Model)


def template(model: type[_Row], state: str, **values: Any) -> _Row:
    """A row in `state` whose fields not given hold a marker, so those a transition sets show
    (`set_by`)."""
    row = new_row(model, state=state)
    for field in model._meta.concrete_fields:
        if field.attname != "state":
            row.__dict__[field.attname] = values.get(field.attname, _UNSET)
    return row


def set_by(row: Model) -> dict[str, Any]:
    """The columns a transition set on a `template` row, with what it set them to."""
    return {
        field.attname: row.__dict__[field.attname]
        for field in type(row)._meta.concrete_fields
        if row.__dict__[field.attname] is not _UNSET
    }


def new_activity_steps(*, node: str | Param, round: int | Param) -> tuple[StepRun, StepRun]:
    """An activity's new step as `activity.enter` makes it: scheduled for a worker
    (`work.new_step`), or claimed by the worker writing it (`execute.claim_inline`:
    `StepRun.start`). Its run, the time, its lease, when it is due and, claimed, the
    claim's token and holder are the `Param`s run_id, now, lease, due_at, claim_token
    and holder."""

    def new() -> StepRun:
        step = new_row(
            StepRun,
            node=node,
            kind=StepKind.FORWARD,
            round=round,
            state=StepState.SCHEDULED,
            scheduled_at=Param("now"),
            lease=Param("lease"),
        )
        step.__dict__["run_id"] = Param("run_id")
        return step

    scheduled = new()
    scheduled.due_at = Param("due_at")
    claimed = new()
    claimed.start(
        token=Param("claim_token"),
        lease_until=Param("due_at"),
        now=Param("now"),
        holder=Param("holder"),
    )
    return scheduled, claimed


def prepared(field: Field, value: Any) -> Any:
    """A value a statement binds: a per-call one as it is, a constant converted as a save
    would convert it."""
    if isinstance(value, PER_CALL):
        return value
    return field.get_db_prep_save(value, connection=connections[DEFAULT_DB_ALIAS])


def sql_type(field: Field) -> str:
    """The type a value of `field` is cast to in a statement (without a length)."""
    return str(field.db_type(connections[DEFAULT_DB_ALIAS])).split("(")[0]


def argument_writer(positions: dict[str, int], claimed: str | None = None) -> Callable[[Any], str]:
    """What writes a value into a function's text: a `Param` as its argument (`$n`, by
    `positions`), a `ClaimedOr` as a CASE on the argument `claimed` (unless both sides
    agree), a constant as SQL."""

    def argument(value: Any) -> str:
        if isinstance(value, Param):
            return f"${positions[value.name]}"
        if isinstance(value, ClaimedOr):
            if claimed is None:
                raise ValueError("A value that depends on a claim needs the `claimed` argument.")
            one, other = argument(value.claimed), argument(value.scheduled)
            return one if one == other else f"CASE WHEN {claimed} THEN {one} ELSE {other} END"
        return functions.literal(value)

    return argument


def function_body(sql: str, params: tuple[Any, ...], argument: Callable[[Any], str]) -> str:
    """`sql` with each of its `%s` written in, by `argument` (see `argument_writer`)."""
    pieces = sql.split("%s")
    if len(pieces) != len(params) + 1:
        raise RuntimeError("A compiled statement's placeholders do not match its parameters.")
    return pieces[0] + "".join(
        argument(value) + piece for value, piece in zip(params, pieces[1:], strict=True)
    )
