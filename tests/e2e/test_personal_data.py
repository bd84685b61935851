"""A real worker reads a sealed personal value, the database never holds it in clear, and
erasing the run afterwards leaves the audit chain verifying."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from workflows.examples.models import ServiceEffect
from workflows.models import StepRun, WorkflowRun
from workflows.personal import TOMBSTONE
from workflows.states import RunState

pytestmark = pytest.mark.e2e

EMAIL = "grace.hopper@example.com"


def stored_documents(run: WorkflowRun) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT concat_ws(' ', r.input::text, r.result::text, string_agg(s.result::text, ' '))"
            f" FROM {WorkflowRun._meta.db_table} r JOIN {StepRun._meta.db_table} s"
            " ON s.run_id = r.id WHERE r.id = %s GROUP BY r.id",
            [run.pk],
        )
        return cursor.fetchone()[0]


class TestPersonalDataWithARealWorker:
    def test_the_worker_sends_the_email_the_rows_keep_it_sealed_and_erasure_verifies(
        self, workers, start, finished, order_input, olga
    ):
        run = start("order", order_input(order_id="E-1", customer_email=EMAIL))

        run = finished(run, RunState.SUCCEEDED, timeout=60)

        notified = ServiceEffect.objects.get(run_id=str(run.pk), service="notifications")
        assert notified.data["to"] == EMAIL  # what the activity sent to the other system
        assert EMAIL not in stored_documents(run)
        assert '"$personal"' in stored_documents(run)

        out = StringIO()
        call_command("erase_personal_data", run=str(run.pk), by="olga", stdout=out)
        call_command("verify_audit", stdout=out)

        run.refresh_from_db()
        assert run.input["customer_email"] == TOMBSTONE
        assert run.result["to"] == TOMBSTONE
        assert "intact" in out.getvalue()
