"""An unreachable database answers 503 with Retry-After, logged as a warning; nothing else does.

The errors here are real: a connection refused by a port nobody listens on, and
one terminated by the server (as a restart does). tests/e2e/test_database_outage.py
stops a real PostgreSQL under a running gunicorn.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connection, connections
from django.db.utils import load_backend

from config import outages
from tests.ports import free_port
from workflows.tokens import issue_token

PROBLEM = "application/problem+json"


def a_connection(**overrides):
    """A connection of its own to the test database (or, with overrides, elsewhere)."""
    settings_dict = {**connections[DEFAULT_DB_ALIAS].settings_dict, **overrides}
    backend = load_backend(settings_dict["ENGINE"])
    return backend.DatabaseWrapper(settings_dict, alias="outage-probe")


def raised_by(call) -> BaseException:
    with pytest.raises((OperationalError, InterfaceError)) as caught:
        call()
    return caught.value


def wrapped(cause: psycopg.Error) -> OperationalError:
    """Django's error around a driver's, as Django raises it."""
    error = OperationalError(str(cause))
    error.__cause__ = cause
    return error


@contextmanager
def database_refusing() -> Iterator[None]:
    """Point the default connection at a port nobody listens on, for the client's requests."""
    connection.close()
    port = connection.settings_dict["PORT"]
    connection.settings_dict["PORT"] = str(free_port())
    try:
        yield
    finally:
        connection.settings_dict["PORT"] = port
        connection.close()


@pytest.mark.django_db
class TestWhatCountsAsUnreachable:
    def test_a_refused_connection_does(self):
        probe = a_connection(PORT=str(free_port()))

        error = raised_by(probe.ensure_connection)

        assert isinstance(error, OperationalError)
        assert outages.is_unreachable(error)

    def test_a_connection_the_server_terminated_does(self):
        probe = a_connection()
        with probe.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            [pid] = cursor.fetchone()
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])

        error = raised_by(lambda: probe.cursor().execute("SELECT 1"))
        probe.close()

        assert isinstance(error, (OperationalError, InterfaceError))
        assert outages.is_unreachable(error)

    @pytest.mark.parametrize(
        "cause",
        [psycopg.errors.AdminShutdown, psycopg.errors.CannotConnectNow],
        ids=["shutting down", "starting up"],
    )
    def test_a_server_going_down_or_coming_up_does(self, cause):
        assert outages.is_unreachable(wrapped(cause("the server said so")))

    @pytest.mark.parametrize(
        "cause",
        [
            psycopg.errors.DeadlockDetected,
            psycopg.errors.SerializationFailure,
            psycopg.errors.QueryCanceled,
            psycopg.errors.LockNotAvailable,
        ],
        ids=["deadlock", "serialization failure", "statement timeout", "lock not available"],
    )
    def test_an_answer_from_a_working_server_does_not(self, cause):
        assert not outages.is_unreachable(wrapped(cause("the server said so")))

    def test_an_error_that_is_not_the_databases_does_not(self):
        assert not outages.is_unreachable(ValueError("no"))
        assert not outages.is_unreachable(OperationalError("no cause"))


@pytest.mark.django_db(transaction=True)
class TestAnsweringWhileTheDatabaseIsUnreachable:
    def test_a_page_says_the_service_is_briefly_unavailable(self, client, alice, caplog):
        client.force_login(alice)

        with caplog.at_level(logging.WARNING), database_refusing():
            response = client.get("/")

        assert response.status_code == 503
        assert response["Retry-After"] == str(outages.RETRY_AFTER)
        assert "Baton is briefly unavailable" in response.text
        assert '<a class="brand"' in response.text  # the site's own page, not a bare error
        [line] = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert (line.name, line.levelname, line.message) == (
            "baton.database",
            "WARNING",
            "database.unavailable",
        )
        assert line.exc_info is None

    def test_the_api_answers_503_problem_json(self, client, alice, caplog):
        _, secret = issue_token(user=alice)

        with caplog.at_level(logging.WARNING), database_refusing():
            response = client.get(
                "/api/v1/workflows", headers={"Authorization": f"Bearer {secret}"}
            )

        assert response.status_code == 503
        assert response["Content-Type"] == PROBLEM
        assert response["Retry-After"] == str(outages.RETRY_AFTER)
        assert response.json()["status"] == 503
        assert "Nothing was done" in response.json()["detail"]
        assert [(r.name, r.levelname) for r in caplog.records if r.levelno >= logging.WARNING] == [
            ("baton.database", "WARNING")
        ]

    def test_once_it_is_back_the_same_client_is_served_again(self, client, alice):
        client.force_login(alice)
        with database_refusing():
            client.get("/")

        response = client.get("/")

        assert response.status_code == 200

    def test_an_error_raised_outside_a_view_is_answered_alike(self, rf, alice):
        request = rf.get("/")
        with database_refusing():
            try:
                connection.ensure_connection()
            except OperationalError:
                response = outages.server_error(request)

        assert response.status_code == 503
        assert response["Retry-After"] == str(outages.RETRY_AFTER)

    def test_any_other_error_outside_a_view_is_still_a_500(self, rf):
        request = rf.get("/")
        try:
            raise psycopg.errors.DeadlockDetected("deadlock detected")
        except psycopg.Error:
            response = outages.server_error(request)

        assert response.status_code == 500
