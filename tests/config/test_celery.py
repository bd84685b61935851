"""Worker processes keep one healthy database connection across tasks."""

from __future__ import annotations

import pytest
from django.db import connection

from config.celery import reuse_database_connections, run_system_checks
from workflows import registry
from workflows.dsl import Activity, Workflow
from workflows.models import WorkflowRun


@pytest.mark.django_db(transaction=True)
class TestReuseDatabaseConnections:
    def test_a_healthy_connection_is_kept_for_the_next_task(self) -> None:
        connection.close()  # a fresh one, well within CONN_MAX_AGE
        WorkflowRun.objects.count()
        before = connection.connection

        reuse_database_connections()
        WorkflowRun.objects.count()

        assert connection.connection is before

    def test_a_transaction_left_open_by_a_task_is_dropped_with_its_connection(self) -> None:
        connection.set_autocommit(False)
        with connection.cursor() as cursor:
            cursor.execute("CREATE TEMPORARY TABLE leaked (id int)")
        leaked = connection.connection

        reuse_database_connections()

        assert connection.connection is None
        assert WorkflowRun.objects.count() == 0
        assert connection.connection is not leaked
        assert connection.get_autocommit()

    def test_a_connection_past_its_maximum_age_is_replaced(self) -> None:
        WorkflowRun.objects.count()
        connection.close_at = 0

        reuse_database_connections()

        assert connection.connection is None


class TestRunSystemChecks:
    def test_a_definition_failing_its_static_check_stops_the_worker(self) -> None:
        # Celery logs and ignores an Exception raised by a worker_init handler.
        broken = Workflow(
            name="test_broken_at_start_up",
            version=1,
            start="only",
            nodes=(Activity("only", run=lambda context: None),),
        )
        registry.register(broken)
        try:
            with pytest.raises(SystemExit) as stopped:
                run_system_checks()
        finally:
            registry.unregister(broken)

        assert "mutating activity 'only' has no compensation" in str(stopped.value)
