"""pydantic's field-by-field validation errors, said in the reader's language.

pydantic writes its messages in English ("Field required", "Input should be greater
than 0"). Each error also has a `type` that never changes with the language and a
`ctx` holding its numbers, so the sentence is chosen here by type and filled in from
ctx, through gettext, in the language active when the error is described: the API's
problem details (workflows.api, config.api) and the forms (approvals.start_forms) all
describe errors through `described`. A type not listed keeps pydantic's English
message, which is better than no message; the list covers what the shipped types and
the API's own schemas can raise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.utils.translation import gettext, ngettext_lazy

# Each type's sentence, from its ctx. The numbers are pydantic's own (a limit, a count).
_Say = Callable[[Mapping[str, Any]], str]


def _counted(key: str, sentence: Any) -> _Say:
    """Say `sentence` (a lazy ngettext keyed by "count") with ctx's number at `key`; ""
    without one, so that pydantic's own sentence is said rather than "at least 0"."""

    def say(context: Mapping[str, Any]) -> str:
        count = context.get(key)
        return str(sentence % {"count": count}) if isinstance(count, int) else ""

    return say


def _compared(sentence: Callable[[], str], key: str) -> _Say:
    return lambda context: sentence() % {"limit": context.get(key, "")}


def _author_says(context: Mapping[str, Any]) -> str:
    """A validator's own ValueError: its author's sentence (translated by its author)."""
    return str(context.get("error", ""))


_SAY: dict[str, _Say] = {
    "missing": lambda context: gettext("Field required"),
    "extra_forbidden": lambda context: gettext("Extra inputs are not permitted"),
    "string_type": lambda context: gettext("Input should be a valid string"),
    "string_too_short": _counted(
        "min_length",
        ngettext_lazy(
            "String should have at least %(count)s character",
            "String should have at least %(count)s characters",
            "count",
        ),
    ),
    "string_too_long": _counted(
        "max_length",
        ngettext_lazy(
            "String should have at most %(count)s character",
            "String should have at most %(count)s characters",
            "count",
        ),
    ),
    "string_pattern_mismatch": lambda context: (
        gettext("String should match pattern '%(pattern)s'")
        % {"pattern": context.get("pattern", "")}
    ),
    "too_short": _counted(
        "min_length",
        ngettext_lazy(
            "List should have at least %(count)s item",
            "List should have at least %(count)s items",
            "count",
        ),
    ),
    "too_long": _counted(
        "max_length",
        ngettext_lazy(
            "List should have at most %(count)s item",
            "List should have at most %(count)s items",
            "count",
        ),
    ),
    "greater_than": _compared(lambda: gettext("Input should be greater than %(limit)s"), "gt"),
    "greater_than_equal": _compared(
        lambda: gettext("Input should be greater than or equal to %(limit)s"), "ge"
    ),
    "less_than": _compared(lambda: gettext("Input should be less than %(limit)s"), "lt"),
    "less_than_equal": _compared(
        lambda: gettext("Input should be less than or equal to %(limit)s"), "le"
    ),
    "multiple_of": _compared(
        lambda: gettext("Input should be a multiple of %(limit)s"), "multiple_of"
    ),
    "int_type": lambda context: gettext("Input should be a valid integer"),
    "int_parsing": lambda context: gettext("Input should be a valid integer"),
    "int_from_float": lambda context: gettext(
        "Input should be a valid integer, not a number with a fractional part"
    ),
    "float_type": lambda context: gettext("Input should be a valid number"),
    "float_parsing": lambda context: gettext("Input should be a valid number"),
    "decimal_type": lambda context: gettext("Input should be a valid decimal"),
    "decimal_parsing": lambda context: gettext("Input should be a valid decimal"),
    "decimal_max_digits": _counted(
        "max_digits",
        ngettext_lazy(
            "Decimal input should have no more than %(count)s digit in total",
            "Decimal input should have no more than %(count)s digits in total",
            "count",
        ),
    ),
    "decimal_max_places": _counted(
        "decimal_places",
        ngettext_lazy(
            "Decimal input should have no more than %(count)s decimal place",
            "Decimal input should have no more than %(count)s decimal places",
            "count",
        ),
    ),
    "bool_type": lambda context: gettext("Input should be a valid boolean"),
    "bool_parsing": lambda context: gettext("Input should be a valid boolean"),
    "literal_error": lambda context: (
        gettext("Input should be one of: %(options)s") % {"options": context.get("expected", "")}
    ),
    "enum": lambda context: (
        gettext("Input should be one of: %(options)s") % {"options": context.get("expected", "")}
    ),
    "date_type": lambda context: gettext("Input should be a valid date"),
    "date_parsing": lambda context: gettext("Input should be a valid date"),
    "date_from_datetime_parsing": lambda context: gettext("Input should be a valid date"),
    "date_from_datetime_inexact": lambda context: gettext("Input should be a valid date"),
    "datetime_type": lambda context: gettext("Input should be a valid datetime"),
    "datetime_parsing": lambda context: gettext("Input should be a valid datetime"),
    "datetime_from_date_parsing": lambda context: gettext("Input should be a valid datetime"),
    "uuid_type": lambda context: gettext("Input should be a valid UUID"),
    "uuid_parsing": lambda context: gettext("Input should be a valid UUID"),
    "dict_type": lambda context: gettext("Input should be a valid object"),
    "model_type": lambda context: gettext("Input should be a valid object"),
    "model_attributes_type": lambda context: gettext("Input should be a valid object"),
    "list_type": lambda context: gettext("Input should be a valid list"),
    "json_invalid": lambda context: gettext("Invalid JSON"),
    "value_error": _author_says,
    "assertion_error": _author_says,
}


def message(error: Mapping[str, Any]) -> str:
    """Return one of pydantic's `ErrorDetails` as a sentence in the active language."""
    say = _SAY.get(error.get("type", ""))
    if say is None:
        return str(error.get("msg", ""))
    return say(error.get("ctx") or {}) or str(error.get("msg", ""))


def described(error: Mapping[str, Any], *, field: str) -> dict[str, str]:
    """Return an error as the API and the forms carry it: the field it is about, the
    sentence, and pydantic's type, which stays the same in every language (a caller
    that acts on an error matches the type, never the sentence)."""
    return {"field": field, "message": message(error), "type": str(error.get("type", ""))}
