"""Filter tasks by their run's data: `amount>1000`, `vendor_name=Acme`.

Only a type's `searchable` input fields (Workflow(searchable=...)) may be filtered on.
A task copies their values when it opens (`HumanTask.search_data`), and its inbox rows
carry them (`InboxEntry.data`), so a filter is a condition on the rows of the person's
own index range, read in the order shown: no join to the runs, whatever their number.
Numbers are kept as JSON numbers (an amount typed "1500.00" too), so `>` compares them
as numbers; text compares exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db.models import Q
from django.utils.translation import gettext as _

from workflows import registry

# How many conditions one filter may hold.
MAX_CONDITIONS = 4
# A number as a person writes one: 1000, -3, 1500.00.
_NUMBER = re.compile(r"-?[0-9]{1,15}(\.[0-9]{1,6})?")
_CONDITION = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]{0,63})\s*(>=|<=|!=|=|>|<)\s*(.*?)\s*")
_LOOKUPS = {"=": "exact", ">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}
# Bounds every number lies within and no text does, whichever way the database orders a
# number against text (PostgreSQL puts text first, SQLite last): a comparison also asks
# for both, so that text never passes for a number.
_LOWEST, _HIGHEST = -(10**18), 10**18


class BadFilter(ValueError):
    """The filter cannot be read; the message says what is wrong and what would do."""


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    value: Any

    def __str__(self) -> str:
        return f"{self.field}{self.op}{self.value}"


def searchable_values(workflow_type: str, version: int, input: dict[str, Any]) -> dict[str, Any]:
    """The run's searchable input values, numbers as numbers, for a task to carry."""
    try:
        fields = registry.get(workflow_type, version).searchable
    except registry.UnknownWorkflow:
        return {}
    return {name: _normal(input[name]) for name in fields if _storable(input.get(name))}


def searchable_fields(workflow_type: str = "") -> list[str]:
    """The fields a filter may name: the type's, or every registered type's."""
    names: set[str] = set()
    for definition in registry.all_definitions():
        if not workflow_type or definition.name == workflow_type:
            names.update(definition.searchable)
    return sorted(names)


def parse(text: str, *, workflow_type: str = "") -> tuple[Condition, ...]:
    """Read "amount>1000, vendor_name=Acme" into conditions; raise BadFilter saying why."""
    parts = [part for part in text.split(",") if part.strip()]
    if len(parts) > MAX_CONDITIONS:
        raise BadFilter(
            _("give at most %(most)s conditions, not %(count)s")
            % {"most": MAX_CONDITIONS, "count": len(parts)}
        )
    allowed = searchable_fields(workflow_type)
    conditions = []
    for part in parts:
        matched = _CONDITION.fullmatch(part)
        if matched is None or not matched.group(3):
            raise BadFilter(
                _("“%(part)s” is not a condition: write field=value or field>number")
                % {"part": part.strip()}
            )
        field, op, raw = matched.groups()
        if field not in allowed:
            fields = ", ".join(allowed) or _("none")
            raise BadFilter(
                _("%(field)s is not a searchable field (searchable: %(fields)s)")
                % {"field": field, "fields": fields}
            )
        if op == "!=":
            raise BadFilter(_("only =, >, >=, < and <= compare"))
        value = _normal(raw)
        if op != "=" and not isinstance(value, int | float):
            raise BadFilter(
                _("%(field)s%(op)s compares numbers, and %(value)s is not one")
                % {"field": field, "op": op, "value": repr(raw)}
            )
        conditions.append(Condition(field=field, op=op, value=value))
    return tuple(conditions)


def as_q(conditions: tuple[Condition, ...], *, column: str = "data") -> Q:
    """The conditions on a JSON column holding the searchable values."""
    q = Q()
    for condition in conditions:
        key = f"{column}__{condition.field}"
        q &= Q(**{f"{key}__{_LOOKUPS[condition.op]}": condition.value})
        if condition.op != "=":
            q &= Q(**{f"{key}__gte": _LOWEST, f"{key}__lte": _HIGHEST})
    return q


def _normal(value: Any) -> Any:
    """A number (or text that is one) as a JSON number; anything else as text."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value
    text = str(value).strip()
    if _NUMBER.fullmatch(text):
        try:
            number = Decimal(text)
        except InvalidOperation:
            return text
        return int(number) if number == number.to_integral_value() else float(number)
    return text


def _storable(value: Any) -> bool:
    return value is not None and not isinstance(value, dict | list)
