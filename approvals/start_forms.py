"""The forms people fill in, drawn from pydantic models: a workflow type's start form
(its input schema) and an approval's task form (`Approval.form`).

The form is read off the schema's JSON Schema, the document the API's callers
see: a label from each field's name (or its explicit title), help from its
description, a required mark, a select for choices (Literal, Enum), a date
picker for dates, a decimal keyboard for amounts, repeated rows for lists (order
items) and one select per key for a mapping with named keys. What a person
typed is read back into the input the API would take; it is validated by the
type's own `Workflow.validate_input`, never here, and the errors it names are put
back beside their fields, in plain words. Plain data in and out: no ORM, no clock.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import pydantic
from django.utils.translation import gettext, gettext_lazy

from workflows.cleaning import Refused, clean_text

# What a choice's options read, in the reader's language (by default, each value in
# words): `Field(json_schema_extra=choice_labels(low=gettext_lazy("low"), ...))`.
CHOICE_LABELS = "choice_labels"


def choice_labels(**labels: str) -> Callable[[dict[str, Any]], None]:
    """Return a `json_schema_extra` that labels a choice's values. A function rather than
    a dict, so that pydantic puts the lazy translations in the schema as they are (it
    would try to serialise a dict's values) and they are said in each reader's language."""

    def label(schema: dict[str, Any]) -> None:
        schema[CHOICE_LABELS] = labels

    return label


# Rows a list offers at most, whatever its schema allows: more belongs in the API.
MAX_ROWS = 50
# Text longer than this gets a text area rather than a one-line box.
LONG_TEXT = 200


@dataclass(frozen=True)
class FieldSpec:
    """One input box: a field of the schema, or a column of a list's rows."""

    name: str
    label: str
    help: str = ""
    required: bool = False
    # text, textarea, email, decimal, integer, number, date, datetime, checkbox or select
    widget: str = "text"
    # (value as posted, label); the JSON value each stands for is in `values`.
    choices: tuple[tuple[str, str], ...] = ()
    values: Mapping[str, Any] = field(default_factory=dict)
    nullable: bool = False
    max_length: int | None = None
    minimum: float | None = None
    maximum: float | None = None
    initial: str = ""


@dataclass(frozen=True)
class ListSpec:
    """A list, entered as repeated rows of `columns` (one nameless column for a list of
    plain values)."""

    name: str
    label: str
    help: str = ""
    required: bool = False
    columns: tuple[FieldSpec, ...] = ()
    min_rows: int = 0
    max_rows: int = MAX_ROWS

    @property
    def of_values(self) -> bool:
        return len(self.columns) == 1 and self.columns[0].name == ""


@dataclass(frozen=True)
class MapSpec:
    """A mapping whose keys are named in the schema: one optional box per key."""

    name: str
    label: str
    help: str = ""
    keys: tuple[FieldSpec, ...] = ()


Spec = FieldSpec | ListSpec | MapSpec


@dataclass(frozen=True)
class FormSpec:
    fields: tuple[Spec, ...]
    # Optional fields the form leaves to the API (their schema has no box that fits).
    left_out: tuple[str, ...] = ()
    # Required fields the form cannot fill: the type cannot be started from a browser.
    cannot_fill: tuple[str, ...] = ()
    # Put before each posted name, so a task form's fields never meet the decision
    # panel's own ("comment", "version").
    prefix: str = ""

    @property
    def usable(self) -> bool:
        return not self.cannot_fill


# ---------------------------------------------------------------------------
# From a schema to a form
# ---------------------------------------------------------------------------


def spec_for(
    schema: type[pydantic.BaseModel] | None,
    *,
    leave_out: tuple[str, ...] = (),
    prefix: str = "",
) -> FormSpec:
    """Return the form of `schema`, without the fields named in `leave_out` (filled in by
    the server, such as an expense's requester), its boxes posted as `prefix` + name."""
    if schema is None:
        return FormSpec(fields=(), prefix=prefix)
    document = _json_schema(schema)
    definitions = document.get("$defs", {})
    required = set(document.get("required", []))
    fields: list[Spec] = []
    left_out: list[str] = []
    cannot_fill: list[str] = []
    for name, prop in document.get("properties", {}).items():
        if name in leave_out:
            continue
        made = _spec(name, prop, definitions, required=name in required)
        if made is not None:
            fields.append(made)
        elif name in required:
            cannot_fill.append(name)
        else:
            left_out.append(name)
    return FormSpec(
        fields=tuple(fields),
        left_out=tuple(left_out),
        cannot_fill=tuple(cannot_fill),
        prefix=prefix,
    )


@cache
def _json_schema(schema: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The schema's JSON Schema, made once per class (definitions never change)."""
    return schema.model_json_schema()


def _resolve(prop: Mapping[str, Any], definitions: Mapping[str, Any]) -> dict[str, Any]:
    """Follow `$ref` (and a lone `allOf`), keeping what the outer schema says beside it."""
    outer = dict(prop)
    if "allOf" in outer and len(outer["allOf"]) == 1:
        outer = {**outer.pop("allOf")[0], **outer}
    ref = outer.pop("$ref", None)
    if ref:
        target = definitions.get(ref.rsplit("/", 1)[-1], {})
        outer = {**target, **{key: value for key, value in outer.items() if key != "title"}}
    return outer


def _unwrap(prop: Mapping[str, Any], definitions: Mapping[str, Any]) -> tuple[dict, bool]:
    """Return the schema behind an Optional (anyOf X or null), and whether null is allowed."""
    prop = _resolve(prop, definitions)
    options = prop.get("anyOf")
    if not options:
        return prop, False
    kept = [_resolve(option, definitions) for option in options if option.get("type") != "null"]
    nullable = len(kept) < len(options)
    outer = {key: value for key, value in prop.items() if key != "anyOf"}
    if len(kept) == 1:
        return {**kept[0], **outer}, nullable
    if {option.get("type") for option in kept} == {"number", "string"}:
        # pydantic's Decimal: a number, or a string of digits.
        return {**outer, "type": "string", "format": "decimal"}, nullable
    return {**outer, "anyOf": kept}, nullable


def _label(name: str, prop: Mapping[str, Any]) -> str:
    """The field's explicit title, or its name in words ("order_id" reads "Order id")."""
    automatic = name.replace("_", " ").title()
    title = prop.get("title")
    if title and title != automatic:
        return title
    words = name.replace("_", " ")
    return words[:1].upper() + words[1:]


def _help(prop: Mapping[str, Any]) -> str:
    text = prop.get("description", "")
    return text[:1].upper() + text[1:] if text else ""


def _spec(name: str, prop: Mapping[str, Any], definitions: Mapping[str, Any], *, required: bool):
    schema, nullable = _unwrap(prop, definitions)
    kind = schema.get("type")
    if kind == "array":
        return _list_spec(name, schema, definitions, required=required)
    if kind == "object":
        return _map_spec(name, schema, definitions)
    return _field_spec(name, schema, required=required, nullable=nullable)


def _field_spec(
    name: str, schema: Mapping[str, Any], *, required: bool, nullable: bool = False
) -> FieldSpec | None:
    common = {
        "name": name,
        "label": _label(name, schema) if name else "",
        "help": _help(schema),
        "required": required,
        "nullable": nullable,
    }
    default = schema.get("default")
    if "enum" in schema:
        values = {str(value): value for value in schema["enum"]}
        labels = schema.get(CHOICE_LABELS) or {}
        choices = tuple((key, labels.get(key) or key.replace("_", " ")) for key in values)
        initial = str(default) if default is not None else ""
        return FieldSpec(**common, widget="select", choices=choices, values=values, initial=initial)
    kind = schema.get("type")
    initial = "" if default is None or isinstance(default, dict | list) else str(default)
    if kind == "boolean":
        return FieldSpec(**common, widget="checkbox", initial="on" if default else "")
    if kind in ("integer", "number"):
        return FieldSpec(
            **common,
            widget="integer" if kind == "integer" else "number",
            minimum=schema.get("minimum", schema.get("exclusiveMinimum")),
            maximum=schema.get("maximum", schema.get("exclusiveMaximum")),
            initial=initial,
        )
    if kind != "string":
        return None
    text_format = schema.get("format", "")
    max_length = schema.get("maxLength")
    if text_format in ("date", "email", "decimal"):
        widget = text_format
    elif text_format == "date-time":
        widget = "datetime"
    elif max_length is not None and max_length > LONG_TEXT:
        widget = "textarea"
    else:
        widget = "text"
    return FieldSpec(**common, widget=widget, max_length=max_length, initial=initial)


def _list_spec(
    name: str, schema: Mapping[str, Any], definitions: Mapping[str, Any], *, required: bool
) -> ListSpec | None:
    item, _ = _unwrap(schema.get("items", {}), definitions)
    if item.get("type") == "object":
        item_required = set(item.get("required", []))
        columns = [
            _field_spec(
                column,
                _unwrap(column_schema, definitions)[0],
                required=column in item_required,
            )
            for column, column_schema in item.get("properties", {}).items()
        ]
    else:
        columns = [_field_spec("", item, required=True)]
    if not columns or None in columns:
        return None
    min_rows = schema.get("minItems", 0)
    return ListSpec(
        name=name,
        label=_label(name, schema),
        help=_help(schema),
        required=required and min_rows > 0,
        columns=tuple(column for column in columns if column is not None),
        min_rows=min_rows,
        max_rows=min(schema.get("maxItems", MAX_ROWS), MAX_ROWS),
    )


def _map_spec(
    name: str, schema: Mapping[str, Any], definitions: Mapping[str, Any]
) -> MapSpec | None:
    keys = schema.get("propertyNames", {}).get("enum")
    values = schema.get("additionalProperties")
    if not keys or not isinstance(values, Mapping) or not values:
        return None  # any key, or any value: only the API can say it
    value_schema, _ = _unwrap(values, definitions)
    boxes = [_field_spec(str(key), value_schema, required=False) for key in keys]
    if None in boxes:
        return None
    return MapSpec(
        name=name,
        label=_label(name, schema),
        help=_help(schema),
        keys=tuple(box for box in boxes if box is not None),
    )


# ---------------------------------------------------------------------------
# A filled-in form
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Form:
    """A form as shown: its spec, what is in each box (by posted name), the rows each
    list shows, and the errors beside each box and above the form."""

    spec: FormSpec
    values: Mapping[str, str] = field(default_factory=dict)
    rows: Mapping[str, int] = field(default_factory=dict)
    errors: Mapping[str, str] = field(default_factory=dict)
    form_errors: tuple[str, ...] = ()
    # For each list, which shown row each item of the input came from (blank rows
    # are left out of the input, so the two can differ).
    row_of_item: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    # The box to put the cursor in: the first of a row just added.
    focus: str = ""

    @property
    def has_errors(self) -> bool:
        return bool(self.errors or self.form_errors)

    def groups(self) -> list[BoxGroup]:
        """What the template draws, in the schema's order."""
        return [self._group(spec) for spec in self.spec.fields]

    def _box(self, spec: FieldSpec, name: str, *, in_row: bool = False) -> Box:
        return Box(
            spec=spec,
            name=name,
            prefix=self.spec.prefix,
            value=self.values.get(name, ""),
            error=self.errors.get(name, ""),
            in_row=in_row,
            focus=name == self.focus,
        )

    def _group(self, spec: Spec) -> BoxGroup:
        if isinstance(spec, FieldSpec):
            return BoxGroup(spec=spec, kind="field", box=self._box(spec, spec.name))
        if isinstance(spec, MapSpec):
            boxes = [self._box(key, f"{spec.name}-{key.name}") for key in spec.keys]
            return BoxGroup(
                spec=spec, kind="map", boxes=boxes, error=self.errors.get(spec.name, "")
            )
        count = self.rows.get(spec.name, initial_rows(spec))
        rows = [
            Row(
                index=index,
                boxes=[
                    self._box(column, row_name(spec, index, column), in_row=True)
                    for column in spec.columns
                ],
                error=self.errors.get(f"{spec.name}-{index}", ""),
            )
            for index in range(count)
        ]
        return BoxGroup(
            spec=spec,
            kind="list",
            rows=rows,
            error=self.errors.get(spec.name, ""),
            can_add=count < spec.max_rows,
            can_remove=count > max(spec.min_rows, 1),
        )

    def group(self, name: str) -> BoxGroup:
        """The one list or field named `name`, for an htmx swap of just its rows."""
        for spec in self.spec.fields:
            if spec.name == name:
                return self._group(spec)
        raise KeyError(name)


_INPUT_TYPES = {
    "email": "email",
    "integer": "number",
    "number": "number",
    "date": "date",
    "datetime": "datetime-local",
}
_INPUT_MODES = {"decimal": "decimal", "integer": "numeric"}


@dataclass(frozen=True)
class Box:
    spec: FieldSpec
    name: str
    value: str
    error: str
    # A box of a list's row: a blank row is skipped, so the browser must not insist.
    in_row: bool = False
    focus: bool = False
    prefix: str = ""

    @property
    def posted_name(self) -> str:
        return f"{self.prefix}{self.name}"

    @property
    def id(self) -> str:
        return f"field-{self.posted_name}"

    @property
    def checked(self) -> bool:
        return self.value == "on"

    @property
    def input_type(self) -> str:
        return _INPUT_TYPES.get(self.spec.widget, "text")

    @property
    def inputmode(self) -> str:
        return _INPUT_MODES.get(self.spec.widget, "")

    @property
    def html_required(self) -> bool:
        return self.spec.required and not self.in_row


@dataclass(frozen=True)
class Row:
    index: int
    boxes: list[Box]
    error: str = ""


@dataclass(frozen=True)
class BoxGroup:
    spec: Spec
    kind: str
    box: Box | None = None
    boxes: list[Box] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    error: str = ""
    can_add: bool = False
    can_remove: bool = False

    @property
    def id(self) -> str:
        return f"field-{self.spec.name}"


def initial_rows(spec: ListSpec) -> int:
    return max(spec.min_rows, 1)


def row_name(spec: ListSpec, index: int, column: FieldSpec) -> str:
    return f"{spec.name}-{index}-{column.name}" if column.name else f"{spec.name}-{index}"


def blank(spec: FormSpec) -> Form:
    """The form before anything is typed: each box holds its schema's default."""
    values: dict[str, str] = {}
    for item in spec.fields:
        if isinstance(item, FieldSpec):
            values[item.name] = item.initial
    return Form(spec=spec, values=values)


def filled(spec: FormSpec, data: Mapping[str, Any]) -> Form:
    """The form showing `data` (a run's input) in its boxes, as `read` would read it
    back: the start form of a request sent back for changes, ready to edit."""
    values: dict[str, str] = {}
    rows: dict[str, int] = {}
    for item in spec.fields:
        if isinstance(item, FieldSpec):
            present = item.name in data
            values[item.name] = _shown(item, data[item.name]) if present else item.initial
        elif isinstance(item, MapSpec):
            mapping = data.get(item.name) or {}
            for key in item.keys:
                values[f"{item.name}-{key.name}"] = _shown(key, mapping.get(key.name))
        else:
            entries = list(data.get(item.name) or [])[: item.max_rows]
            rows[item.name] = max(len(entries), initial_rows(item))
            for index, entry in enumerate(entries):
                for column in item.columns:
                    value = entry if item.of_values else (entry or {}).get(column.name)
                    values[row_name(item, index, column)] = _shown(column, value)
    return Form(spec=spec, values=values, rows=rows)


def _shown(spec: FieldSpec, value: Any) -> str:
    """What a box shows for a JSON value: the inverse of `_value`."""
    if value is None:
        return ""
    if spec.widget == "checkbox":
        return "on" if value else ""
    if spec.widget == "select":
        posted = next((key for key, json in spec.values.items() if json == value), None)
        return posted if posted is not None else str(value)
    return str(value)


# ---------------------------------------------------------------------------
# Reading what was posted
# ---------------------------------------------------------------------------


def read(spec: FormSpec, posted: Mapping[str, str]) -> tuple[dict[str, Any], Form]:
    """Return the input the posted form stands for, and the form to show it again.

    Text is trimmed; a blank box is left out of the input (so the schema's default,
    or its "required" error, applies); a blank row of a list is skipped. Text that
    workflows.cleaning refuses is left out too, and the form says why beside its
    box: the caller must not start anything from a form with such errors.
    """
    data: dict[str, Any] = {}
    values: dict[str, str] = {}
    refused: dict[str, str] = {}
    prefix = spec.prefix

    def box(name: str, spec: FieldSpec) -> str:
        raw = _posted(posted, prefix + name, spec)
        try:
            values[name] = clean_text(raw, max_length=None, multiline=spec.widget == "textarea")
        except Refused as error:
            # The subject of cleaning's sentences ("must not contain control characters").
            refused[name] = gettext("%(label)s %(error)s.") % {
                "label": spec.label or gettext("The text"),
                "error": error,
            }
            values[name] = "".join(c for c in raw if unicodedata.category(c) not in ("Cc", "Cs"))
            return ""
        return values[name]

    rows: dict[str, int] = {}
    row_of_item: dict[str, tuple[int, ...]] = {}
    for item in spec.fields:
        if isinstance(item, FieldSpec):
            present, value = _value(item, box(item.name, item))
            if present:
                data[item.name] = value
        elif isinstance(item, MapSpec):
            mapping = {}
            for key in item.keys:
                present, value = _value(key, box(f"{item.name}-{key.name}", key))
                if present:
                    mapping[key.name] = value
            if mapping:
                data[item.name] = mapping
        else:
            count = _row_count(posted, item)
            rows[item.name] = count
            entries, kept = [], []
            for index in range(count):
                row: dict[str, Any] = {}
                for column in item.columns:
                    present, value = _value(column, box(row_name(item, index, column), column))
                    if present:
                        row[column.name] = value
                if not any(values[row_name(item, index, column)] for column in item.columns):
                    continue
                entries.append(row[""] if item.of_values and "" in row else row)
                kept.append(index)
            row_of_item[item.name] = tuple(kept)
            if entries or item.required:
                data[item.name] = entries
    form = Form(spec=spec, values=values, rows=rows, row_of_item=row_of_item, errors=refused)
    return data, form


def _posted(posted: Mapping[str, str], name: str, spec: FieldSpec) -> str:
    raw = posted.get(name, "") or ""
    if spec.widget == "checkbox":
        return "on" if raw else ""
    return raw if spec.widget == "textarea" else raw.strip()


def _value(spec: FieldSpec, raw: str) -> tuple[bool, Any]:
    """Return whether the box contributes to the input, and the JSON value it gives."""
    if spec.widget == "checkbox":
        return True, raw == "on"
    if not raw.strip():
        if spec.required and spec.nullable:
            return True, None
        return False, None
    if spec.widget == "select":
        return True, spec.values.get(raw, raw)
    if spec.widget == "integer" and re.fullmatch(r"[+-]?[0-9]{1,18}", raw):
        return True, int(raw)
    return True, raw


def _row_count(posted: Mapping[str, str], spec: ListSpec) -> int:
    raw = posted.get(f"{spec.name}-rows", "")
    count = int(raw) if re.fullmatch(r"[0-9]{1,3}", raw) else initial_rows(spec)
    return min(max(count, initial_rows(spec)), spec.max_rows)


def with_rows(form: Form, *, add: str = "", remove: str = "") -> Form:
    """Return the form with a row added to the list `add`, or the row `remove`
    ("items-2") taken out of its list; nothing else changes, nothing is checked."""
    rows = dict(form.rows)
    values = dict(form.values)
    focus = ""
    for spec in form.spec.fields:
        if not isinstance(spec, ListSpec):
            continue
        count = rows.get(spec.name, initial_rows(spec))
        if spec.name == add and count < spec.max_rows:
            rows[spec.name] = count + 1
            focus = row_name(spec, count, spec.columns[0])
        prefix = f"{spec.name}-"
        if remove.startswith(prefix) and remove[len(prefix) :].isdigit():
            gone = int(remove[len(prefix) :])
            if gone < count and count > max(spec.min_rows, 1):
                for index in range(gone, count):
                    for column in spec.columns:
                        following = row_name(spec, index + 1, column)
                        values[row_name(spec, index, column)] = values.pop(following, "")
                rows[spec.name] = count - 1
    return replace(form, rows=rows, values=values, focus=focus)


# ---------------------------------------------------------------------------
# Errors, beside their fields and in plain words
# ---------------------------------------------------------------------------


def with_errors(form: Form, errors: list[dict[str, str]]) -> Form:
    """Put each error of `InvalidInput.errors` beside the box it names; errors about
    fields the form does not show go above it, with the field's name."""
    placed: dict[str, str] = dict(form.errors)
    above: list[str] = []
    specs = {spec.name: spec for spec in form.spec.fields}
    for error in errors:
        parts = error["field"].split(".")
        spec = specs.get(parts[0])
        box, box_spec = _box_for(form, spec, parts[1:]) if spec else (None, None)
        if box is None:
            name = parts[0] if parts[0] != "input" else ""
            label = spec.label if spec else name.replace("_", " ").capitalize()
            said = plain(error, capital=not name)
            above.append(f"{label}: {said}" if name else said)
        elif box not in placed and error.get("type") == "too_short" and isinstance(spec, ListSpec):
            placed[box] = gettext("Add at least %(count)s.") % {"count": spec.min_rows}
        elif box not in placed:
            placed[box] = plain(error, box_spec)
    return replace(form, errors=placed, form_errors=(*form.form_errors, *above))


def _box_for(form: Form, spec: Spec, rest: list[str]) -> tuple[str | None, FieldSpec | None]:
    """Return the posted name of the box an error's path points at, and its spec."""
    if isinstance(spec, FieldSpec):
        return spec.name, spec
    if isinstance(spec, MapSpec):
        key = next((key for key in spec.keys if rest and key.name == rest[0]), None)
        return (f"{spec.name}-{key.name}", key) if key else (spec.name, None)
    if not rest or not rest[0].isdigit():
        return spec.name, None
    kept = form.row_of_item.get(spec.name, ())
    item = int(rest[0])
    if item >= len(kept):
        return spec.name, None
    index = kept[item]
    column = next(
        (column for column in spec.columns if column.name == (rest[1] if len(rest) > 1 else "")),
        None,
    )
    if column is None:
        return f"{spec.name}-{index}", None
    return row_name(spec, index, column), column


# Errors in the words of a person filling in a form, by pydantic's error type (the API
# says them as workflows.field_errors does); other types keep that sentence.
_PLAIN = {
    "missing": gettext_lazy("This is required."),
    "int_type": gettext_lazy("Enter a whole number."),
    "int_parsing": gettext_lazy("Enter a whole number."),
    "int_from_float": gettext_lazy("Enter a whole number."),
    "float_type": gettext_lazy("Enter a number."),
    "float_parsing": gettext_lazy("Enter a number."),
    "decimal_type": gettext_lazy("Enter a number."),
    "decimal_parsing": gettext_lazy("Enter a number."),
    "date_type": gettext_lazy("Enter a date (YYYY-MM-DD)."),
    "date_parsing": gettext_lazy("Enter a date (YYYY-MM-DD)."),
    "date_from_datetime_parsing": gettext_lazy("Enter a date (YYYY-MM-DD)."),
    "date_from_datetime_inexact": gettext_lazy("Enter a date (YYYY-MM-DD)."),
    "datetime_type": gettext_lazy("Enter a date and a time."),
    "datetime_parsing": gettext_lazy("Enter a date and a time."),
    "datetime_from_date_parsing": gettext_lazy("Enter a date and a time."),
    "literal_error": gettext_lazy("Choose one of the options."),
    "enum": gettext_lazy("Choose one of the options."),
}


def plain(error: Mapping[str, str], spec: FieldSpec | None = None, *, capital: bool = True) -> str:
    """Say an error of `InvalidInput.errors` (its `type` is pydantic's, its `message`
    already in the reader's language) in words a person filling in a form uses
    (`capital`: as a sentence of its own, rather than after a field's name, where a
    username that starts it keeps its case)."""
    kind = error.get("type", "")
    if kind == "string_pattern_mismatch":
        if spec and spec.help:
            return gettext("Enter %(what)s.") % {"what": f"{spec.help[:1].lower()}{spec.help[1:]}"}
        return gettext("This is not in the expected form.")
    if kind in _PLAIN:
        return str(_PLAIN[kind])
    # An error described elsewhere than workflows.field_errors keeps pydantic's prefix.
    message = error.get("message", "").removeprefix("Value error, ")
    if capital:
        message = message[:1].upper() + message[1:]
    return message if message.endswith((".", "!", "?", ")")) else f"{message}."
