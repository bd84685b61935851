"""workflows/replica.py with no DATABASE_REPLICA_URL, as the rest of the suite runs:
nothing changes (tests/workflows/test_replica.py has the replica itself)."""

from __future__ import annotations

import pytest
from django.db import connections
from django.urls import reverse

from workflows import replica
from workflows.replica import PIN_COOKIE, ReplicaRouter

pytestmark = pytest.mark.django_db


class TestWithoutAReplica:
    def test_marked_reads_use_the_one_database(self):
        read_from = replica.reads_replica(replica.read_alias)()

        assert read_from == "default"
        assert list(connections) == ["default"]

    def test_the_router_has_no_opinion(self, manager_task):
        router = ReplicaRouter()

        answers = (
            router.db_for_read(type(manager_task), instance=manager_task),
            router.db_for_write(type(manager_task), instance=manager_task),
            router.allow_relation(manager_task, manager_task.run),
        )

        assert answers == (None, None, None)

    def test_a_write_pins_nobody(self, client, carol, manager_task):
        client.force_login(carol)

        decided = client.post(reverse("approvals:approve", args=[manager_task.pk]))

        assert decided.status_code == 302
        assert PIN_COOKIE not in client.cookies
