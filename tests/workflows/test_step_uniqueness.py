"""A run has one step per node, kind and round, and per item for a map's items, on
PostgreSQL and on the demo's SQLite alike; and the steps' table carries no index to
spare (migration 0026).

One unique index over (run, node, kind, round, COALESCE(item, -1)) says it on both
databases (a map's items are 0 and up; a step that is no item counts as item -1, so
two such steps clash), and its first column, the run, serves every lookup by run:
every version of a step takes one entry there, none in an index of the run alone.
SQLite is checked on a database migrated as `make demo` migrates one, in a process of
its own.
"""

from __future__ import annotations

import inspect
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from workflows.models import StepRun, WorkflowRun
from workflows.states import RunState

ROOT = Path(__file__).resolve().parents[2]

# Steps written one after the other into one run, each either kept or refused.
WRITES = [
    {"node": "a"},
    {"node": "a"},  # the same step again: refused
    {"node": "a", "round": 1},  # the node's next round
    {"node": "a", "kind": "compensation"},  # its undo
    {"node": "b", "item": 0},  # a map's item 0 beside a step of no item
    {"node": "b"},
    {"node": "b", "item": 0},  # the same item again: refused
    {"node": "b", "item": 1},
]
KEPT = [True, False, True, True, True, True, False, True]


def written(run: WorkflowRun, **fields) -> bool:
    """Write a step of `run`: True if kept, False if the database refused it (rolled back)."""
    try:
        with transaction.atomic():
            StepRun.objects.create(run=run, scheduled_at=timezone.now(), **fields)
        return True
    except IntegrityError:
        return False


STEP_INDEXES = {
    "workflows_steprun_pkey": "CREATE UNIQUE INDEX workflows_steprun_pkey "
    "ON public.workflows_steprun USING btree (id)",
    "step_unique_per_round_and_item": "CREATE UNIQUE INDEX step_unique_per_round_and_item "
    "ON public.workflows_steprun USING btree "
    "(run_id, node, kind, round, COALESCE(item, '-1'::integer))",
    "step_due_idx": "CREATE INDEX step_due_idx ON public.workflows_steprun USING btree (due_at) "
    "WHERE ((due_at IS NOT NULL) AND ((state)::text = ANY ((ARRAY['scheduled'::character varying, "
    "'running'::character varying, 'retry_wait'::character varying, 'waiting'::character varying])"
    "::text[])))",
    "step_live_idx": "CREATE INDEX step_live_idx ON public.workflows_steprun USING btree "
    "(run_id, state) WHERE ((state)::text = ANY ((ARRAY['scheduled'::character varying, "
    "'running'::character varying, 'retry_wait'::character varying, 'waiting'::character varying])"
    "::text[]))",
}


def a_run() -> WorkflowRun:
    return WorkflowRun.objects.create(
        workflow_type="test_linear", workflow_version=1, input={}, state=RunState.RUNNING
    )


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="the demo's SQLite, below")
class TestOnPostgreSQL:
    def test_a_duplicate_step_or_item_is_refused_and_every_other_step_kept(self):
        run = a_run()

        kept = [written(run, **fields) for fields in WRITES]

        assert kept == KEPT
        assert run.steps.count() == KEPT.count(True)

    def test_the_refusal_names_the_one_index(self):
        run = a_run()
        StepRun.objects.create(run=run, node="a", scheduled_at=timezone.now())

        with pytest.raises(IntegrityError) as refused, transaction.atomic():
            StepRun.objects.create(run=run, node="a", scheduled_at=timezone.now())

        assert 'violates unique constraint "step_unique_per_round_and_item"' in str(refused.value)

    def test_the_same_step_in_another_run_is_kept(self):
        first, second = a_run(), a_run()

        kept = [written(run, node="a", item=0) for run in (first, second)]

        assert kept == [True, True]

    def test_the_steps_table_has_these_indexes_and_no_other(self):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'workflows_steprun'"
            )
            found = dict(cursor.fetchall())

        assert found == STEP_INDEXES


# Run in a process of its own, on a SQLite database it migrates from nothing.
ON_SQLITE = f"""
import json
import django

django.setup()
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.utils import timezone
from workflows.models import StepRun, WorkflowRun

call_command("migrate", verbosity=0)

{inspect.getsource(written)}
run = WorkflowRun.objects.create(
    workflow_type="test_linear", workflow_version=1, input={{}}, state="running"
)
print(json.dumps([written(run, **fields) for fields in {WRITES!r}]))
"""


class TestOnSQLite:
    def test_a_duplicate_step_or_item_is_refused_and_every_other_step_kept(self, tmp_path):
        demo = {
            "PATH": os.environ["PATH"],
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "BATON_DATA_KEYS_DERIVED": "true",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
            "CELERY_BROKER_URL": "memory://",
        }

        done = subprocess.run(
            [sys.executable, "-c", ON_SQLITE],
            cwd=ROOT,
            env=demo,
            capture_output=True,
            text=True,
            timeout=120,
        )

        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.splitlines()[-1]) == KEPT
