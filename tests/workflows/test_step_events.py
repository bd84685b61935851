"""A step's events are its run's: found and deleted by run, never by the step alone, so
the events' table keeps no index of the step (migration 0027)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from workflows.models import StepEvent, StepRun

pytestmark = pytest.mark.django_db


class TestAStepsEvents:
    def test_go_with_a_run_deleted_through_django_by_the_run_alone(self, start, drive):
        run = drive(start("test_linear", {}))
        steps = list(StepRun.objects.filter(run=run).values_list("pk", flat=True))
        assert StepEvent.objects.filter(step__in=steps).count() > len(steps)

        with CaptureQueriesContext(connection) as queries:
            run.delete()

        assert not StepEvent.objects.filter(run_id=run.pk).exists()
        assert not StepEvent.objects.filter(step__in=steps).exists()
        events = [query["sql"] for query in queries if "workflows_stepevent" in query["sql"]]
        assert events
        assert not [sql for sql in events if '"step_id"' in sql]

    @pytest.mark.skipif(connection.vendor != "postgresql", reason="reads pg_indexes")
    def test_have_no_index_of_the_step(self):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT indexdef FROM pg_indexes WHERE tablename = 'workflows_stepevent'"
            )
            definitions = [definition for (definition,) in cursor.fetchall()]

        assert sorted(definitions) == [
            "CREATE INDEX event_run_at_idx ON ONLY public.workflows_stepevent "
            "USING btree (run_id, at)",
            "CREATE UNIQUE INDEX workflows_stepevent_pkey ON ONLY public.workflows_stepevent "
            "USING btree (id, at)",
        ]
