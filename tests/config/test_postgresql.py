"""The PostgreSQL backend's health check (config.postgresql): the socket first, then the server.

A kept connection is checked before the first query of each request and of each Celery
task. A quiet one is taken as healthy without a round trip; one the server ended is
found out all the same, and replaced before the query that follows.
"""

from __future__ import annotations

import select

import pytest
from django.db import DEFAULT_DB_ALIAS, DataError, connection, connections
from django.db.utils import load_backend

from config.postgresql.base import quiet

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def kept():
    """A connection of its own to the test database, open, as a worker keeps one between
    two tasks."""
    settings_dict = connections[DEFAULT_DB_ALIAS].settings_dict
    wrapper = load_backend(settings_dict["ENGINE"]).DatabaseWrapper({**settings_dict}, alias="kept")
    wrapper.ensure_connection()
    yield wrapper
    wrapper.close()


def _backend_pid(wrapper) -> int:
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _queries_sent(monkeypatch, wrapper) -> list[str]:
    """Record what is sent through the raw psycopg connection's cursors from now on."""
    sent: list[str] = []
    make_cursor = wrapper.connection.cursor

    def recording_cursor(*args, **kwargs):
        cursor = make_cursor(*args, **kwargs)
        execute = cursor.execute

        def recording_execute(query, *rest, **options):
            sent.append(str(query))
            return execute(query, *rest, **options)

        cursor.execute = recording_execute
        return cursor

    monkeypatch.setattr(wrapper.connection, "cursor", recording_cursor)
    return sent


def _wait_until_readable(wrapper, *, seconds: float = 10.0) -> None:
    poller = select.poll()
    poller.register(wrapper.connection.pgconn.socket, select.POLLIN)
    assert poller.poll(seconds * 1000), "the server's goodbye never reached the socket"


class TestAKeptConnection:
    def test_that_is_quiet_passes_its_check_without_a_round_trip(self, kept, monkeypatch):
        pid = _backend_pid(kept)
        kept.close_if_unusable_or_obsolete()  # a request or a task ended
        sent = _queries_sent(monkeypatch, kept)

        kept.close_if_health_check_failed()

        assert sent == []
        assert kept.health_check_done
        assert _backend_pid(kept) == pid

    def test_the_server_ended_is_replaced_before_the_next_query(self, kept):
        pid = _backend_pid(kept)
        kept.close_if_unusable_or_obsolete()
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        _wait_until_readable(kept)

        with kept.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (new_pid,) = cursor.fetchone()

        assert new_pid != pid

    def test_in_a_failed_transaction_gets_the_servers_check(self, kept):
        kept.set_autocommit(False)
        with pytest.raises(DataError), kept.cursor() as cursor:
            cursor.execute("SELECT 1/0")

        assert not quiet(kept.connection)

        kept.rollback()
        kept.set_autocommit(True)

    def test_closed_on_this_side_is_not_quiet(self, kept):
        raw = kept.connection

        raw.close()

        assert not quiet(raw)
        assert not kept.is_usable()
