"""Money in the reader's locale (approvals.money)."""

from __future__ import annotations

import pytest
from django.utils import translation

from approvals.money import money


class TestMoney:
    @pytest.mark.parametrize(
        ("language", "amount", "currency", "shown"),
        [
            ("en", "1500.00", "EUR", "€1,500.00"),
            ("de", "1500.00", "EUR", "1.500,00 €"),
            ("en", "120", "USD", "$120.00"),
            ("de", "12.5", "CHF", "12,50 CHF"),
            ("en", "12.5", "CHF", "CHF 12.50"),
            ("en", "5000", "JPY", "¥5,000"),
        ],
    )
    def test_the_amount_and_its_currency_are_written_as_the_language_writes_them(
        self, language, amount, currency, shown
    ):
        with translation.override(language):
            assert money(amount, currency) == shown

    @pytest.mark.parametrize(
        ("amount", "currency"),
        [("lots", "EUR"), ("NaN", "EUR"), (True, "EUR"), ("12.00", "euro"), ("12.00", "")],
    )
    def test_what_is_not_money_is_left_to_the_caller(self, amount, currency):
        assert money(amount, currency) is None
