"""Filtering the inbox by the run's data: `amount>1000`, `vendor_name=Acme`, on the page
and in the API, through the person's own index range."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from approvals import run_data_filters
from approvals.inbox import selectors
from approvals.models import InboxEntry
from approvals.run_data_filters import BadFilter, Condition


class TestReadingAFilter:
    def test_reads_conditions_numbers_as_numbers(self):
        assert run_data_filters.parse("amount>1000, currency=EUR") == (
            Condition("amount", ">", 1000),
            Condition("currency", "=", "EUR"),
        )

    @pytest.mark.parametrize(
        ("text", "why"),
        [
            ("amount>lots", "compares numbers, and 'lots' is not one"),
            ("colour=red", "colour is not a searchable field"),
            ("amount", "is not a condition"),
            ("amount!=3", "only =, >, >=, < and <= compare"),
            ("a=1,b=2,c=3,d=4,e=5", "at most 4 conditions"),
        ],
    )
    def test_says_what_is_wrong(self, text, why):
        with pytest.raises(BadFilter, match=why):
            run_data_filters.parse(text)

    def test_a_type_narrows_the_fields_to_its_own(self):
        with pytest.raises(BadFilter, match="vendor_name is not a searchable field"):
            run_data_filters.parse("vendor_name=Acme", workflow_type="expense")

    def test_a_typed_amount_is_kept_as_a_number(self):
        assert run_data_filters.searchable_values(
            "expense", 1, {"amount": "1500.00", "currency": "EUR", "requester": "alice"}
        ) == {"amount": 1500, "currency": "EUR"}


def page_for(user, **query):
    filters = selectors.InboxFilters.from_query(query)
    return selectors.inbox(user=user, filters=filters, now=timezone.now())


class TestTheInbox:
    def test_a_task_carries_its_runs_searchable_values_into_its_rows(self, two_expenses):
        small, _ = two_expenses

        assert small.search_data == {"title": "Train to Lyon", "amount": 120, "currency": "EUR"}
        assert {entry.data["amount"] for entry in InboxEntry.objects.filter(task=small)} == {120}

    def test_amount_over_a_thousand_shows_the_big_one_only(self, two_expenses, carol):
        _, big = two_expenses

        page = page_for(carol, where="amount>1000")

        assert [task.pk for task in page.tasks] == [big.pk]

    def test_conditions_combine(self, two_expenses, carol):
        page = page_for(carol, where="amount>=100, amount<1000, currency=EUR")

        assert [task.pk for task in page.tasks] == [two_expenses[0].pk]

    def test_text_never_passes_for_a_number(self, start_expense, carol):
        task = start_expense().human_tasks.get()
        InboxEntry.objects.filter(task=task).update(data={"amount": "lots"})

        assert page_for(carol, where="amount<1000000").tasks == []
        assert page_for(carol, where="amount>0").tasks == []

    def test_a_bad_filter_is_left_out_and_named_on_the_page(self, client, two_expenses, carol):
        client.force_login(carol)

        response = client.get(reverse("approvals:inbox"), {"where": "amount>lots"})

        assert response.status_code == 400  # as for any part of the query left out
        assert "The run data filter was left out" in response.text
        assert two_expenses[0].title in response.text

    def test_the_page_keeps_the_filter_in_its_box(self, client, two_expenses, carol):
        client.force_login(carol)

        response = client.get(reverse("approvals:inbox"), {"where": "amount>1000"})

        assert 'value="amount&gt;1000"' in response.text
        assert two_expenses[1].title in response.text
        assert "€120.00" not in response.text
