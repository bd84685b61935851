"""SQL the ORM compiles once per shape of query, then reused with each call's values.

Turning a queryset into SQL costs far more Python than running a short indexed
query: the inbox compiled its tab counts and its page's ids on every request,
4 ms of CPU for statements whose text never changes, only their parameters.

`compile_once` runs a function that builds the SQL from stand-ins for the values
a call supplies (the `slots`: a user's id, the time...), and notes where each
stand-in lands among the parameters; `Compiled.bind` puts a call's own values
there. It builds the SQL twice, from two different sets of stand-ins, and
refuses a function whose text or other parameters change with them: a value
derived from a slot (`now + timedelta(...)`, `-priority`) would otherwise be
kept as a constant. Such values must be slots of their own, computed by the caller.
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from workflows.engine import functions

# Stand-ins no real parameter equals: negative ints (below any id or priority, yet
# inside a small integer's range, or Django would compile the comparison away as
# always false), times in year 2, and text that begins with a NUL, which
# PostgreSQL does not store in text.
_INT_BASE = -10_000
_TIME_BASE = datetime(2, 1, 1, tzinfo=UTC)
_UUID_BASE = 2**127
# Where the backend's SQL takes a parameter, and its escaped percent sign.
_PLACEHOLDER = re.compile("%s|%%")


class NotCompilable(Exception):
    """The SQL or its constant parameters changed with the stand-ins."""


@dataclass(frozen=True)
class _Slot:
    name: str
    # The type the ORM gave the stand-in, when it wrapped it (psycopg's Int2 for a
    # small integer column, say): a call's value is wrapped the same way.
    wrap: type | None = None


@dataclass(frozen=True)
class Compiled:
    """SQL text, and its parameters: constants, and `_Slot`s where a call's values go."""

    sql: str
    params: tuple[Any, ...]

    def bind(self, values: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
        """Return the SQL and its parameters with `values` in each slot's places."""
        return self.sql, tuple(
            param
            if not isinstance(param, _Slot)
            else param.wrap(values[param.name])
            if param.wrap
            else values[param.name]
            for param in self.params
        )

    def function_body(self, arguments: Mapping[str, str]) -> str:
        """Return the SQL as a PL/pgSQL function's query (workflows.engine.functions): each
        slot's place holds its argument (`arguments` maps a slot's name to "$1", ...),
        each constant's its SQL literal."""
        params = iter(self.params)

        def put(found: re.Match[str]) -> str:
            if found[0] == "%%":
                return "%"
            param = next(params)
            return arguments[param.name] if isinstance(param, _Slot) else functions.literal(param)

        body = _PLACEHOLDER.sub(put, self.sql)
        if next(params, None) is not None:
            raise NotCompilable("more parameters than placeholders")
        return body


def compile_once(
    build: Callable[[Mapping[str, Any]], tuple[str, Sequence[Any]]], *, slots: Mapping[str, type]
) -> Compiled:
    """Return `build`'s SQL with its slots marked. `build` takes a value for each slot
    (of the type named: int, str, datetime or uuid.UUID) and returns SQL and parameters."""
    serials = itertools.count(1)
    first, second = _stand_ins(slots, serials), _stand_ins(slots, serials)
    sql, params = build(first)
    sql_again, params_again = build(second)
    if sql_again != sql or len(params_again) != len(params):
        raise NotCompilable("the SQL text changed with the values of its slots")
    marked: list[Any] = []
    for param, param_again in zip(params, params_again, strict=True):
        name = _slot_of(param, first)
        if name is not None and param_again == second[name]:
            kind = type(first[name])
            marked.append(_Slot(name, wrap=None if type(param) is kind else type(param)))
        elif name is None and param_again == param:
            marked.append(param)
        else:
            raise NotCompilable(f"a parameter is derived from a slot: {param!r}")
    return Compiled(sql=sql, params=tuple(marked))


def _slot_of(param: Any, stand_ins: Mapping[str, Any]) -> str | None:
    for name, value in stand_ins.items():
        if isinstance(param, type(value)) and param == value:
            return name
    return None


def _stand_ins(slots: Mapping[str, type], serials: Iterator[int]) -> dict[str, Any]:
    return {name: _stand_in(kind, next(serials)) for name, kind in slots.items()}


def _stand_in(kind: type, serial: int) -> Any:
    if kind is int:
        return _INT_BASE - serial
    if kind is str:
        return f"\x00stand-in {serial}"
    if kind is datetime:
        return _TIME_BASE + timedelta(microseconds=serial)
    if kind is uuid.UUID:
        return uuid.UUID(int=_UUID_BASE + serial)
    raise TypeError(f"no stand-in for {kind.__name__}")
