"""Text and times from outside, cleaned in one place before anything else reads them.

Forms, query parameters, cursors and API schemas pass what people and other
systems send through these functions, so a value PostgreSQL or Python cannot
hold is refused with a reason in plain words instead of failing deep inside as
a 500. Each refusal is a `Refused` whose message is a predicate ("must not
contain control characters (found U+0000)"), for the caller to put after the
field's name.

Text: NUL and the other control characters are refused (tab, line feed and
carriage return only where a field takes several lines), and so are lone UTF-16
surrogates, which cannot be encoded for the database.

Times: a moment is read as ISO 8601, made aware, converted to UTC (PostgreSQL
refuses offsets past 15:59, Python accepts up to 23:59) and refused unless it
lies a full day inside the years Python can represent, so that showing it in
any time zone still works.

`neutralise_bidi` is the other side: text already stored, made safe to show.
"""

from __future__ import annotations

import math
import unicodedata
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from django.utils.translation import gettext as _

# A day inside Python's range, so that any time zone's offset (under 24 hours)
# still lands on a representable date when the moment is shown.
EARLIEST = datetime.min.replace(tzinfo=UTC) + timedelta(days=1)
LATEST = datetime.max.replace(tzinfo=UTC) - timedelta(days=1)
ISO_EXAMPLE = "2026-11-30T12:00:00Z"
_LINE_BREAKS = frozenset("\t\n\r")
# Explicit embeddings, overrides and isolates: they reorder the text around them,
# so "invoice\u202egpj.exe" shows as "invoiceexe.jpg". The implicit marks (LRM,
# RLM, ALM) only nudge neutral characters and are left alone.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class Refused(ValueError):
    """A value from outside that Baton will not take; the message says why."""


def clean_text(value: str, *, max_length: int | None, multiline: bool = False) -> str:
    """Return `value` unchanged if Baton can store and show it; raise Refused otherwise.

    `max_length=None` leaves the length to a caller that checks it already (an API
    schema's field). Trimming is the caller's choice, made before this check.
    """
    if not isinstance(value, str):
        raise Refused(_("must be text"))
    for position, character in enumerate(value):
        category = unicodedata.category(character)
        if category == "Cc" and not (multiline and character in _LINE_BREAKS):
            raise Refused(
                _("must not contain control characters (found %(code)s at position %(position)s)")
                % {"code": _code(character), "position": position + 1}
            )
        if category == "Cs":
            raise Refused(
                _("must not contain lone surrogates (found %(code)s)") % {"code": _code(character)}
            )
    if max_length is not None and len(value) > max_length:
        raise Refused(
            _("must be at most %(most)s characters (this has %(count)s)")
            % {"most": max_length, "count": len(value)}
        )
    return value


def refuse_unstorable(value: Any) -> None:
    """Raise Refused if any text in a JSON value (keys too) holds a NUL or a lone surrogate,
    or a number is NaN or infinite (Python's JSON reader takes them, PostgreSQL's refuses
    them): what PostgreSQL cannot store. Other control characters are data and pass."""
    if isinstance(value, float) and not math.isfinite(value):
        raise Refused(_("numbers must be finite (JSON has no NaN or Infinity)"))
    if isinstance(value, str):
        if "\x00" in value:
            raise Refused(_("text must not contain NUL characters"))
        if any(unicodedata.category(character) == "Cs" for character in value):
            raise Refused(_("text must not contain lone surrogates"))
    elif isinstance(value, dict):
        for key, item in value.items():
            refuse_unstorable(key)
            refuse_unstorable(item)
    elif isinstance(value, list):
        for item in value:
            refuse_unstorable(item)


def clean_datetime(value: str | datetime, *, naive_in: tzinfo = UTC) -> datetime:
    """Return the moment in UTC, reading ISO 8601 text and a naive time as in `naive_in`;
    raise Refused for anything else, or for a moment outside EARLIEST..LATEST."""
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise Refused(
                _("must be an ISO 8601 date-time, e.g. %(example)s") % {"example": ISO_EXAMPLE}
            ) from None
    elif isinstance(value, datetime):
        moment = value
    else:
        raise Refused(
            _("must be an ISO 8601 date-time, e.g. %(example)s") % {"example": ISO_EXAMPLE}
        )
    if moment.tzinfo is None or moment.utcoffset() is None:
        moment = moment.replace(tzinfo=naive_in)
    try:
        moment = moment.astimezone(UTC)
    except (OverflowError, ValueError):
        moment = None
    if moment is None or not EARLIEST <= moment <= LATEST:
        raise Refused(
            _("must lie between %(earliest)s and %(latest)s (UTC) once its time zone is applied")
            % {"earliest": EARLIEST.date().isoformat(), "latest": LATEST.date().isoformat()}
        )
    return moment


def neutralise_bidi(text: str) -> str:
    """Return `text` with each bidi embedding, override or isolate shown as its code point,
    so a title cannot reorder what is shown after it; other text is unchanged."""
    if not any(character in BIDI_CONTROLS for character in text):
        return text
    return "".join(
        f"[{_code(character)}]" if character in BIDI_CONTROLS else character for character in text
    )


def _code(character: str) -> str:
    return f"U+{ord(character):04X}"
