"""Worker processes keep one healthy database connection across tasks."""

from __future__ import annotations

import pytest
from django.db import connection

from config.celery import reuse_database_connections
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
