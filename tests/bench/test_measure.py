"""Counting statements and commits, and percentiles, as the benchmarks use them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import transaction

from bench.measure import counting, median, percentile


@pytest.mark.django_db(transaction=True)
class TestCounting:
    def test_a_statement_in_autocommit_is_its_own_commit(self):
        with counting() as counts:
            Group.objects.count()

        assert (counts.statements, counts.commits) == (1, 1)

    def test_an_atomic_block_is_one_commit_for_all_its_statements(self):
        with counting() as counts, transaction.atomic():
            Group.objects.create(name="finance")
            Group.objects.count()

        assert (counts.statements, counts.commits) == (2, 1)

    def test_a_nested_block_is_a_savepoint_not_a_commit(self):
        with counting() as counts, transaction.atomic(), transaction.atomic():
            Group.objects.create(name="legal")

        assert counts.commits == 1
        assert counts.statements == 3  # SAVEPOINT, INSERT, RELEASE SAVEPOINT

    def test_a_block_rolled_back_commits_nothing(self):
        def fail_inside_a_block() -> None:
            with transaction.atomic():
                Group.objects.create(name="security")
                raise RuntimeError("undo")

        with counting() as counts, pytest.raises(RuntimeError):
            fail_inside_a_block()

        assert (counts.statements, counts.commits) == (1, 0)

    def test_nothing_is_counted_after_the_block(self):
        with counting() as counts:
            pass
        Group.objects.count()

        assert (counts.statements, counts.commits) == (0, 0)


class TestPercentile:
    def test_the_median_of_an_odd_count_is_the_middle_value(self):
        assert median([5.0, 1.0, 3.0]) == 3.0

    def test_p99_of_a_hundred_values_is_the_99th(self):
        assert percentile([float(value) for value in range(1, 101)], 0.99) == 99.0

    def test_no_samples_is_an_error(self):
        with pytest.raises(ValueError, match="no samples"):
            percentile([], 0.5)
