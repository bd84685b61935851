"""Input fields the shipped workflow types share: money as a decimal string, a currency,
an email address. Each description reads as the end of "Enter ...", which is how the
start form says what a refused value should look like."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from django.utils.translation import gettext_lazy as _
from pydantic import AfterValidator, Field


def _positive(value: str) -> str:
    if Decimal(value) <= 0:
        raise ValueError(_("must be greater than zero"))
    return value


Amount = Annotated[
    str,
    Field(
        pattern=r"^\d{1,10}(\.\d{1,2})?$",
        description=_("an amount with up to two decimals, e.g. 42.50"),
        # A decimal kept as text, so no float ever rounds it; forms offer a number pad.
        json_schema_extra={"format": "decimal"},
    ),
    AfterValidator(_positive),
]
Currency = Annotated[
    str, Field(pattern=r"^[A-Z]{3}$", description=_("a three-letter ISO 4217 code, e.g. EUR"))
]
Email = Annotated[
    str,
    Field(
        pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$",
        max_length=254,
        description=_("an email address, e.g. ada@example.com"),
        json_schema_extra={"format": "email"},
    ),
]
