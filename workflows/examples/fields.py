"""Input fields the shipped workflow types share: money as a decimal string and a currency."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import AfterValidator, Field


def _positive(value: str) -> str:
    if Decimal(value) <= 0:
        raise ValueError("must be greater than zero")
    return value


Amount = Annotated[
    str,
    Field(pattern=r"^\d{1,10}(\.\d{1,2})?$", description="a decimal string, e.g. 42.50"),
    AfterValidator(_positive),
]
Currency = Annotated[str, Field(pattern=r"^[A-Z]{3}$", description="ISO 4217 code, e.g. EUR")]
Email = Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$", max_length=254)]
