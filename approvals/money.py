"""Money as the reader's language writes it: "1.500,00 €" in German, "€1,500.00" in English.

Django's number formatting gives the digits in the active locale (decimal mark and
thousands separator); where the currency goes, and whether a space stands between,
is a translated pattern ("%(symbol)s%(amount)s" in English, "%(amount)s %(symbol)s"
in German). A currency without a symbol here is written with its ISO 4217 code. This
is not Babel (not a dependency): a few symbols and each language's one pattern, which
is what Baton's two languages need.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from django.utils import formats
from django.utils.translation import pgettext

# The symbols people read for the currencies they meet most; others show their code.
SYMBOLS = {"EUR": "€", "USD": "$", "GBP": "£", "JPY": "¥", "INR": "₹"}
# ISO 4217's minor units where they are not two.
_MINOR_UNITS = {"JPY": 0, "KRW": 0, "ISK": 0, "CLP": 0, "BHD": 3, "KWD": 3, "JOD": 3, "TND": 3}
_CODE = re.compile(r"^[A-Z]{3}$")


def is_currency(value: Any) -> bool:
    """Whether `value` is written as an ISO 4217 code ("EUR")."""
    return isinstance(value, str) and bool(_CODE.fullmatch(value))


def money(amount: Any, currency: str) -> str | None:
    """Return `amount` of `currency` as the active language writes it, or None when
    `amount` is no finite number or `currency` no ISO 4217 code (the caller shows it
    as it is)."""
    if not is_currency(currency) or isinstance(amount, bool):
        return None
    try:
        number = Decimal(str(amount))
    except InvalidOperation:
        return None
    if not number.is_finite():
        return None
    digits = formats.number_format(
        number, decimal_pos=_MINOR_UNITS.get(currency, 2), use_l10n=True, force_grouping=True
    )
    symbol = SYMBOLS.get(currency)
    if symbol is None:
        # Translators: an amount with its ISO 4217 currency code, e.g. "CHF 1,500.00".
        return pgettext("money with a currency code", "%(code)s %(amount)s") % {
            "code": currency,
            "amount": digits,
        }
    # Translators: an amount with its currency symbol, e.g. "€1,500.00".
    return pgettext("money with a currency symbol", "%(symbol)s%(amount)s") % {
        "symbol": symbol,
        "amount": digits,
    }
