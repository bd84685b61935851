"""The state machines' allowed moves, read from django-fsm once, and updates guarded by them.

django-fsm's transitions on the models stay the specification: `allowed(model)` reads
them once per process into a table of the (source -> target) moves each state field
allows, whatever the transition method is called. `guarded_update` writes a move
without a model instance: one `UPDATE ... WHERE id = %s AND state = ANY(<the sources
allowed into the target>) [AND version = %s]`. A row the state machine would not move
matches nothing, and 0 rows becomes the error the instance's transition raises,
django-fsm's TransitionNotAllowed. A move the table has no source for at all is
refused before any SQL runs.

The engine's compiled paths (the timers' set path, the straight path of a step) take
their guards from here, so a state machine changed on the model changes them too.
The module knows no model: `approvals` (whose HumanTask is written by the record path's
hooks) is read the same way by whoever passes its model.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import django_fsm as fsm
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model
from django.utils import timezone


@dataclass(frozen=True)
class Moves:
    """The moves one state field of one model allows: for each target, its sources."""

    model: type[Model]
    field: str
    states: tuple[str, ...]
    into: Mapping[str, frozenset[str]]

    def allows(self, source: str, target: str) -> bool:
        return source in self.into.get(target, frozenset())

    def sources(self, target: str) -> tuple[str, ...]:
        """The states a move into `target` may leave from, in the field's choices' order."""
        allowed = self.into.get(target, frozenset())
        return tuple(state for state in self.states if state in allowed)

    def pairs(self) -> set[tuple[str, str]]:
        return {(source, target) for target, sources in self.into.items() for source in sources}


def state_fields(model: type[Model]) -> tuple[str, ...]:
    """The names of the model's django-fsm state fields."""
    return tuple(f.name for f in model._meta.concrete_fields if isinstance(f, fsm.FSMFieldMixin))


@functools.cache
def allowed(model: type[Model], field: str = "state") -> Moves:
    """The (source -> target) moves `model.field`'s django-fsm transitions allow.

    A transition from `*` leaves from every state, from `+` from every state but its
    target; a target chosen by the method (RETURN_VALUE, GET_STATE) stands for each of
    the states it may return. Read once per process, per model and field.
    """
    fsm_field = model._meta.get_field(field)
    if not isinstance(fsm_field, fsm.FSMFieldMixin):
        raise TypeError(f"{model.__name__}.{field} is not a django-fsm state field")
    states = tuple(str(value) for value, _ in fsm_field.choices)
    into: dict[str, set[str]] = {}
    for transition in fsm_field.get_all_transitions(model):
        for target in _targets(transition.target, states):
            for source in _sources(transition.source, target, states):
                into.setdefault(target, set()).add(source)
    return Moves(
        model=model,
        field=field,
        states=states,
        into={target: frozenset(sources) for target, sources in into.items()},
    )


def _targets(target: Any, states: tuple[str, ...]) -> Iterable[str]:
    if isinstance(target, fsm.State):
        # A method that picks its state: any of those it may pick (all, if it names none).
        return [str(state) for state in target.allowed_states] or list(states)
    if target is None:  # a transition that leaves the state as it is
        return []
    return [str(target)]


def _sources(source: Any, target: str, states: tuple[str, ...]) -> Iterable[str]:
    if source == fsm.ANY_STATE:
        return states
    if source == fsm.ANY_OTHER_STATE:
        return [state for state in states if state != target]
    return [str(source)]


def refused(
    model: type[Model], id: Any, target: str, field: str = "state"
) -> fsm.TransitionNotAllowed:
    """The error the instance's transition raises, for a move of row `id` the state
    machine (or the row's version) does not allow."""
    return fsm.TransitionNotAllowed(
        f"{model.__name__} {id} cannot move {field} to {target!r} from the state it is in"
    )


def guarded_update(
    model: type[Model],
    id: Any,
    target: str,
    *,
    version: int | None = None,
    field: str = "state",
    **values: Any,
) -> None:
    """Move row `id` of `model` to `target`, writing `values` with it, if its state
    machine allows the move from the state the row is in (and, given `version`, the row
    is still at that version: the row's `version` column is bumped with the move).

    Raises TransitionNotAllowed, the transition's own error, when it does not: no
    source allows `target`, or the row is not (or no longer) in one of them. One
    statement; the caller's transaction makes it part of a use case.
    """
    moves = allowed(model, field)
    sources = moves.sources(target)
    if not sources:
        raise refused(model, id, target, field)
    sql, names, auto_now = _update_sql(model, field, tuple(sorted(values)), version is not None)
    now = timezone.now()
    connection = connections[DEFAULT_DB_ALIAS]
    params = [
        _prepared(model, field, target, connection),
        *(_prepared(model, name, values[name], connection) for name in names),
        *[now] * auto_now,
        _prepared(model, model._meta.pk.name, id, connection),
        list(sources),
    ]
    if version is not None:
        params.append(version)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if cursor.rowcount != 1:
            raise refused(model, id, target, field)


def _prepared(model: type[Model], name: str, value: Any, connection: Any) -> Any:
    return model._meta.get_field(name).get_db_prep_save(value, connection=connection)


@functools.cache
def _update_sql(
    model: type[Model], field: str, names: tuple[str, ...], versioned: bool
) -> tuple[str, tuple[str, ...], int]:
    """`guarded_update`'s statement for these columns, built once per process."""
    connection = connections[DEFAULT_DB_ALIAS]
    qn = connection.ops.quote_name
    meta = model._meta

    def column(name: str) -> str:
        return qn(meta.get_field(name).column)

    auto_now = [f.name for f in meta.concrete_fields if getattr(f, "auto_now", False)]
    assignments = [f"{column(field)} = %s", *(f"{column(name)} = %s" for name in names)]
    auto_now = [name for name in auto_now if name not in names]
    assignments += [f"{column(name)} = %s" for name in auto_now]
    guard = f"{column(meta.pk.name)} = %s AND {column(field)} = ANY(%s)"
    if versioned:
        version = column("version")
        assignments.append(f"{version} = {version} + 1")
        guard += f" AND {version} = %s"
    # Model metadata only (quoted table and column names); every value is bound.
    sql = f"UPDATE {qn(meta.db_table)} SET {', '.join(assignments)} WHERE {guard}"  # nosec B608
    return sql, names, len(auto_now)
