"""The scale seed leaves the database as the migrations and the engine would: every index
the migrations made, valid and on every partition, and the counts of rows it promises,
though it fills the tables without their indexes and from several connections at once."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest
from django.db import connection

from approvals.console.selectors import RunFilters, filtered_runs
from approvals.models import HumanTask, InboxEntry, Notification
from bench import scale, scale_seed
from bench.profiles import PROFILES
from workflows.models import WorkflowRun

pytestmark = [
    # The seed fills from connections of its own and vacuums: no test transaction.
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the seeder is PostgreSQL's"),
]

RUNS = 40


def indexes_of(tables: list[str]) -> set[tuple[str, str]]:
    """Each index of `tables`, as (table, index). (Not their definitions: a definition
    printed by PostgreSQL and read back prints its casts differently.)"""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indrelid::regclass::text, indexrelid::regclass::text FROM pg_index "
            "WHERE indrelid = ANY(%s::regclass[])",
            [tables],
        )
        return set(cursor.fetchall())


def partitions_missing_an_index() -> list[str]:
    """Each partition whose indexes are fewer than its partitioned table's."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.oid::regclass::text FROM pg_inherits h "
            "JOIN pg_class c ON c.oid = h.inhrelid JOIN pg_class p ON p.oid = h.inhparent "
            "WHERE p.relkind = 'p' AND "
            "(SELECT count(*) FROM pg_index WHERE indrelid = c.oid) "
            "< (SELECT count(*) FROM pg_index WHERE indrelid = p.oid)"
        )
        return [name for (name,) in cursor.fetchall()]


def invalid_indexes() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexrelid::regclass::text FROM pg_index WHERE NOT indisvalid")
        return [name for (name,) in cursor.fetchall()]


class TestSeedScale:
    def test_every_index_the_migrations_made_is_back_and_valid_on_every_partition(self):
        tables = scale_seed.filled_tables()
        migrated = indexes_of(tables)

        scale_seed.seed_scale(runs=RUNS, log=lambda *_: None)

        assert indexes_of(tables) == migrated
        assert invalid_indexes() == []
        assert partitions_missing_an_index() == []

    def test_each_group_task_copied_has_its_templates_notifications_and_entries(self):
        made = scale_seed.seed_scale(runs=RUNS, log=lambda *_: None)
        template = HumanTask.objects.get(pk=made["templates"]["other_open_task"])
        copies = HumanTask.objects.filter(title__startswith=f"{template.title} #")
        notices = Notification.objects.filter(task=template).count()
        entries = InboxEntry.objects.filter(task=template).count()

        assert WorkflowRun.objects.filter(correlation_id__startswith="order-").count() == RUNS
        assert copies.count() == RUNS // 10 - RUNS // 20
        assert notices > 1  # one for each member of the template's group
        assert Notification.objects.filter(task__in=copies).count() == copies.count() * notices
        assert InboxEntry.objects.filter(task__in=copies).count() == copies.count() * entries

    def test_copy_g_has_its_own_run_id_and_starts_at_its_place_in_the_three_years(self):
        made = scale_seed.seed_scale(runs=RUNS, log=lambda *_: None)
        start = datetime.fromisoformat(made["history_from"])
        copies = WorkflowRun.objects.filter(correlation_id__startswith="order-")

        found = {
            int(run.correlation_id[len("order-") :]): (run.pk, run.created_at) for run in copies
        }

        assert found == {
            g: (
                uuid.UUID(int=(1 << 120) | g),
                start + timedelta(microseconds=(g - 1) * scale_seed.SPAN_US // RUNS),
            )
            for g in range(1, RUNS + 1)
        }

    def test_the_by_key_pages_ask_for_the_same_kind_of_run_at_every_size(self):
        scale_seed.seed_scale(runs=RUNS, log=lambda *_: None)
        sizes = [
            RUNS,
            *(runs for p in PROFILES.values() for runs in (p.scale_small_runs, p.scale_large_runs)),
        ]
        numbers = {runs: scale._measured_key_number(runs) for runs in [*sizes, 10_000_000]}
        asked = WorkflowRun.objects.get(correlation_id=scale_seed.business_key(numbers[RUNS]))
        # Copies alternate between the two finished templates, copy 1 the same as any odd one.
        odd = WorkflowRun.objects.get(correlation_id=scale_seed.business_key(1))
        even = WorkflowRun.objects.get(correlation_id=scale_seed.business_key(2))

        assert {number % 2 for number in numbers.values()} == {1}
        assert all(number <= runs for runs, number in numbers.items())
        assert asked.workflow_type == odd.workflow_type != even.workflow_type
        assert HumanTask.objects.filter(run=asked).exists()  # the richer row of the two

    def test_the_console_search_finds_each_copy_by_its_order_id_as_the_engine_wrote_it(self):
        scale_seed.seed_scale(runs=RUNS, log=lambda *_: None)
        keys = {g: scale_seed.business_key(g) for g in range(1, RUNS + 1)}

        found = {
            g: list(filtered_runs(RunFilters(search=key)).values_list("pk", flat=True))
            for g, key in keys.items()
        }
        # The approval copies' tasks carry the key too, as the engine gives a task its
        # run's searchable values (the inbox's run-data filter reads them).
        carried = {
            task.run_id: task.search_data
            for task in HumanTask.objects.filter(run_id__in=[scale_seed.run_id(g) for g in keys])
        }

        assert found == {g: [scale_seed.run_id(g)] for g in keys}
        assert carried == {
            scale_seed.run_id(g): {"order_id": key} for g, key in keys.items() if g % 2
        }

    def test_the_by_key_pages_show_the_one_run_they_ask_for(self):
        scale_seed.seed_scale(runs=RUNS, log=lambda *_: None)
        paths = scale._paths(deep_pages=1)
        wanted = [str(scale_seed.run_id(scale._measured_key_number(RUNS)))]

        shown = {
            name: scale.shown_runs(name, paths[name][0].get(paths[name][1]).content)
            for name in scale.BY_KEY
        }
        operator, _ = paths["console_search"]
        nothing = operator.get(f"/console/?q={scale_seed.business_key(RUNS + 1)}").content

        assert shown == dict.fromkeys(scale.BY_KEY, wanted)
        # The bench refuses to time a page that found nothing.
        with pytest.raises(RuntimeError, match="showed 0 runs"):
            scale.check_found("console_search", "/console/", nothing, runs=RUNS)
