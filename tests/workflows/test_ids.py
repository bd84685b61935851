"""Run ids sort by the time they were made (workflows.ids), whichever way a run starts."""

from __future__ import annotations

import uuid

import pytest

from workflows import engine
from workflows.ids import time_ordered_id

pytestmark = pytest.mark.django_db(transaction=True)


class TestTimeOrderedIds:
    def test_an_id_is_a_standard_uuid_of_version_7(self):
        made = time_ordered_id()
        assert type(made) is uuid.UUID
        assert made.version == 7

    def test_ids_made_one_after_another_sort_in_the_order_they_were_made(self):
        made = [time_ordered_id() for _ in range(1_000)]
        assert made == sorted(made)
        assert len(set(made)) == len(made)

    def test_runs_started_in_one_statement_or_the_general_way_get_them_in_order(
        self, start, order_input
    ):
        first = start("order", order_input())
        second, _ = engine.start_workflow(
            workflow_type="order", input=order_input(), idempotency_key="keyed"
        )
        assert first.pk.version == second.pk.version == 7
        assert first.pk < second.pk
