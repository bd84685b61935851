"""workflows/replica.py on a real primary and its streaming replica (tests/replica.py).

The heavy read-only pages read the replica; a person who just wrote reads the
primary; a replica that is stopped sends the pages to the primary with a
warning; writes never reach the replica. Proofs use the replica's lag: with
replay paused, a row committed on the primary is missing from the replica only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.db import connections, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from prometheus_client import REGISTRY

from approvals.models import HumanTask
from tests.replica import ReplicaPair, wait_until
from workflows import replica
from workflows.replica import PIN_COOKIE, REPLICA

TASK = "Expense: Train to Lyon — €120.00 (alice)"
# The heavy read-only pages, as the console's operator sees them.
HEAVY_PAGES = [
    "/",
    "/console/",
    "/console/tasks/",
    "/console/sla/",
    "/api/v1/workflows",
    "/api/v1/tasks",
]


pytestmark = pytest.mark.django_db(transaction=True, databases=["default", REPLICA])


@pytest.fixture(scope="module", autouse=True)
def _on_the_pair(on_replica_pair: ReplicaPair) -> ReplicaPair:
    """Every test here runs on the pair, set up before pytest-django's."""
    return on_replica_pair


@pytest.fixture(autouse=True)
def _a_fresh_process_standing(monkeypatch) -> None:
    """Each test starts as a new process would: the replica neither failed nor lagged lately."""
    monkeypatch.setattr(replica, "_standing", replica._Standing())


@pytest.fixture
def pair(on_replica_pair: ReplicaPair) -> Iterator[ReplicaPair]:
    """The pair, its replica replaying again after the test (which may have paused it)."""
    yield on_replica_pair
    on_replica_pair.resume_replay()


@pytest.fixture
def carol_client(carol) -> Client:
    client = Client()
    client.force_login(carol)
    return client


@pytest.fixture
def operator_client(operator) -> Client:
    operator.is_staff = True
    operator.save()
    client = Client()
    client.force_login(User.objects.get(pk=operator.pk))
    return client


@pytest.fixture(scope="class")
def stopped_replica(on_replica_pair: ReplicaPair) -> Iterator[None]:
    """The replica's server stopped for a class's tests, then started again and caught up."""
    on_replica_pair.replica.stop()
    try:
        yield
    finally:
        on_replica_pair.replica.start()
        wait_until(on_replica_pair.caught_up, timeout=60, what="the restarted replica to catch up")


def fallbacks() -> float:
    return REGISTRY.get_sample_value("baton_replica_fallbacks_total") or 0.0


def lag_skips() -> float:
    return REGISTRY.get_sample_value("baton_replica_lag_skips_total") or 0.0


class TestHeavyPages:
    def test_the_inbox_lists_and_counts_what_the_replica_holds(
        self, pair, carol_client, start_expense
    ):
        pair.pause_replay()
        start_expense()  # carol's task, on the primary only

        lagging = carol_client.get(reverse("approvals:inbox"))
        pair.resume_replay()
        pair.wait_for_replay()
        caught_up = carol_client.get(reverse("approvals:inbox"))

        assert lagging.status_code == 200
        assert TASK not in lagging.text
        assert 'aria-label="0 tasks"' in lagging.text
        assert TASK in caught_up.text
        assert 'aria-label="1 tasks"' in caught_up.text

    @pytest.mark.parametrize("page", HEAVY_PAGES)
    def test_each_heavy_page_reads_the_replica(self, pair, operator_client, manager_task, page):
        pair.wait_for_replay()

        with CaptureQueriesContext(connections[REPLICA]) as on_replica:
            response = operator_client.get(page)

        assert response.status_code == 200
        assert on_replica.captured_queries

    def test_a_task_page_reads_the_primary(self, pair, carol_client, manager_task):
        pair.wait_for_replay()

        with CaptureQueriesContext(connections[REPLICA]) as on_replica:
            response = carol_client.get(reverse("approvals:task", args=[manager_task.pk]))

        assert response.status_code == 200
        assert on_replica.captured_queries == []


class TestReadingYourOwnWrites:
    def test_a_reviewer_who_decides_no_longer_sees_the_task_though_the_replica_lags(
        self, pair, carol_client, manager_task
    ):
        pair.wait_for_replay()
        pair.pause_replay()

        decided = carol_client.post(reverse("approvals:approve", args=[manager_task.pk]))
        own_inbox = carol_client.get(reverse("approvals:inbox"))
        del carol_client.cookies[PIN_COOKIE]
        unpinned_inbox = carol_client.get(reverse("approvals:inbox"))

        assert decided.status_code == 302
        assert own_inbox.status_code == 200
        assert TASK not in own_inbox.text
        assert 'aria-label="0 tasks"' in own_inbox.text
        # The replica still lags: without the pin, the decided task is still listed there.
        assert TASK in unpinned_inbox.text

    def test_the_pin_lasts_the_configured_seconds(self, pair, settings, carol_client, manager_task):
        settings.BATON_REPLICA_PIN_SECONDS = 30

        carol_client.post(reverse("approvals:approve", args=[manager_task.pk]))

        assert carol_client.cookies[PIN_COOKIE]["max-age"] == 30

    def test_a_refused_write_does_not_pin(self, carol_client, eve, manager_task):
        carol_client.force_login(eve)

        refused = carol_client.post(
            reverse("approvals:approve", args=[manager_task.pk]), HTTP_HX_REQUEST="true"
        )

        assert refused.status_code == 404
        assert PIN_COOKIE not in carol_client.cookies

    def test_a_read_inside_a_transaction_on_the_primary_stays_there(self):
        read = replica.reads_replica(replica.read_alias)

        with transaction.atomic():
            inside = read()
        outside = read()

        assert (inside, outside) == ("default", REPLICA)


class TestWrites:
    def test_a_row_read_from_the_replica_is_saved_to_the_primary(self, pair, manager_task):
        pair.wait_for_replay()

        @replica.reads_replica
        def read_and_rename() -> tuple[str, str]:
            task = HumanTask.objects.get(pk=manager_task.pk)
            read_from = task._state.db
            task.title = "Renamed"
            task.save(update_fields=["title"])
            return read_from, task._state.db

        with CaptureQueriesContext(connections[REPLICA]) as on_replica:
            read_from, saved_to = read_and_rename()

        assert (read_from, saved_to) == (REPLICA, "default")
        on_replica_sql = [query["sql"] for query in on_replica.captured_queries]
        # The replica was only read: the task, and the process's first check of its lag.
        assert [sql.split()[0] for sql in on_replica_sql] == ["SELECT", "SELECT"]
        assert "approvals_humantask" in on_replica_sql[1]
        on_primary = f"SELECT title FROM approvals_humantask WHERE id = '{manager_task.pk}'"
        assert pair.primary.sql(on_primary) == "Renamed"

    def test_a_decision_writes_nothing_to_the_replica(self, pair, carol_client, manager_task):
        with CaptureQueriesContext(connections[REPLICA]) as on_replica:
            decided = carol_client.post(reverse("approvals:approve", args=[manager_task.pk]))

        assert decided.status_code == 302
        assert on_replica.captured_queries == []


class TestLag:
    def test_a_replica_too_far_behind_is_left_alone_until_its_next_check(
        self, pair, settings, monkeypatch, carol_client, start_expense, caplog
    ):
        settings.BATON_REPLICA_MAX_LAG_SECONDS = 1
        pair.wait_for_replay()
        pair.pause_replay()
        start_expense()  # carol's task, which the replica receives but does not replay
        written = pair.primary.sql("SELECT pg_current_wal_lsn()")
        wait_until(
            lambda: pair.replica.sql(f"SELECT pg_last_wal_receive_lsn() >= '{written}'::pg_lsn"),
            timeout=30,
            what="the replica to receive the new task",
        )
        time.sleep(1.5)  # past the largest lag allowed, since the replica's last replay
        skips = lag_skips()

        with caplog.at_level(logging.WARNING, logger="baton.replica"):
            behind = carol_client.get(reverse("approvals:inbox"))
            with CaptureQueriesContext(connections[REPLICA]) as on_replica:
                still_behind = carol_client.get(reverse("approvals:inbox"))
            monkeypatch.setattr(replica, "LAG_CHECK_SECONDS", 0)
            replica._standing.avoid_until = 0  # as once the check's interval has passed
            pair.resume_replay()
            pair.wait_for_replay()
            caught_up = carol_client.get(reverse("approvals:inbox"))

        # The primary answered, so the new task is listed while the replica lacks it.
        assert TASK in behind.text
        assert TASK in still_behind.text
        assert on_replica.captured_queries == []  # not even a check until the next one is due
        [warning] = [record for record in caplog.records if record.name == "baton.replica"]
        assert warning.getMessage() == "replica.lagging"
        assert warning.lag_seconds > 1
        assert lag_skips() == skips + 1
        assert TASK in caught_up.text

    def test_a_lag_within_the_limit_keeps_the_replica(
        self, pair, settings, carol_client, start_expense
    ):
        settings.BATON_REPLICA_MAX_LAG_SECONDS = 600
        pair.wait_for_replay()
        pair.pause_replay()
        start_expense()

        lagging = carol_client.get(reverse("approvals:inbox"))

        assert TASK not in lagging.text


@pytest.mark.usefixtures("stopped_replica")
class TestFallback:
    @pytest.mark.parametrize("page", HEAVY_PAGES)
    def test_each_heavy_page_answers_from_the_primary_and_warns_once(
        self, operator_client, manager_task, page, caplog
    ):
        before = fallbacks()

        with caplog.at_level(logging.WARNING, logger="baton.replica"):
            response = operator_client.get(page)

        assert response.status_code == 200
        [warning] = [record for record in caplog.records if record.name == "baton.replica"]
        assert warning.getMessage() == "replica.fallback"
        assert fallbacks() == before + 1

    def test_the_process_reads_the_primary_without_trying_again_until_the_retry_time(
        self, settings, operator_client, carol_client, manager_task, caplog
    ):
        settings.BATON_REPLICA_RETRY_SECONDS = 0.5
        before = fallbacks()

        with caplog.at_level(logging.WARNING, logger="baton.replica"):
            first = carol_client.get(reverse("approvals:inbox"))
            soon_after = operator_client.get("/console/")
            time.sleep(0.6)
            once_due = carol_client.get(reverse("approvals:inbox"))

        assert [first.status_code, soon_after.status_code, once_due.status_code] == [200] * 3
        warnings = [record for record in caplog.records if record.name == "baton.replica"]
        # One try when the first page came, none for the next, one again once it was due.
        assert [warning.getMessage() for warning in warnings] == ["replica.fallback"] * 2
        assert fallbacks() == before + 2

    def test_the_inbox_shows_the_primarys_tasks(self, carol_client, manager_task):
        response = carol_client.get(reverse("approvals:inbox"))

        assert response.status_code == 200
        assert TASK in response.text
