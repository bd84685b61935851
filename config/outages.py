"""Answer 503 while the database cannot be reached, for pages and the API alike.

While PostgreSQL restarts (a failover, an upgrade, a crash), every query fails:
the server refuses new connections, or closes those it had. That is not a bug
in Baton, and it passes by itself, so it is answered as such: 503 with
`Retry-After`, a page that says the service is briefly unavailable (the API:
application/problem+json), and one warning in the log, without a traceback.

Only a lost or refused connection counts (`is_unreachable`). A deadlock, a
serialization failure, a cancelled statement or a constraint broken are answers
the server gave on a working connection: they stay 500s and are logged as bugs.

The pages reach `unavailable` through `DatabaseOutageMiddleware` (an error a
view raised) and `server_error` (one raised in a middleware, such as a session
saved after the view); the API through its own exception handler in
config.api, since django-ninja answers every error a view raises itself.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable

import psycopg
from django.contrib.auth.models import AnonymousUser
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext
from django.views import defaults

logger = logging.getLogger("baton.database")

# Seconds a client is asked to wait: about what a PostgreSQL restart or a
# failover takes. A reader retrying sooner gets another 503, nothing worse.
RETRY_AFTER = 5

PROBLEM = "application/problem+json"

# PostgreSQL's SQLSTATEs for a connection going away: class 08 (connection
# exception), and the server shutting down, crashing or still starting up.
_SHUTTING_DOWN = frozenset({"57P01", "57P02", "57P03"})


def is_unreachable(error: BaseException) -> bool:
    """Say whether `error` means the database could not be reached: a connection
    refused, lost or closed by a server going down; not an error the server answered.

    Django wraps the driver's error (its cause). One the server sent has a
    SQLSTATE, and counts only in the connection classes above; one without is
    psycopg's own, raised when it found the connection broken or could not open it.
    """
    if not isinstance(error, (OperationalError, InterfaceError)):
        return False
    cause = error.__cause__
    if not isinstance(cause, psycopg.Error):
        return False
    if cause.sqlstate is not None:
        return cause.sqlstate.startswith("08") or cause.sqlstate in _SHUTTING_DOWN
    return _connection_is_broken(cause)


def _connection_is_broken(cause: psycopg.Error) -> bool:
    """Say whether psycopg raised `cause` about a connection that failed or broke,
    rather than about a call made at the wrong time (an InterfaceError on a busy one)."""
    connection = cause.pgconn
    if connection is not None:
        return connection.status == psycopg.pq.ConnStatus.BAD
    return isinstance(cause, psycopg.OperationalError)


def unavailable(request: HttpRequest, error: BaseException) -> HttpResponse:
    """Return the 503 for `request` while the database is unreachable, and log it once
    as a warning (the error's first line, no traceback)."""
    logger.warning(
        "database.unavailable",
        extra={"path": request.path, "error": (str(error).strip().splitlines() or [""])[0]},
    )
    if request.path_info.startswith("/api/"):
        body = {
            "type": "about:blank",
            "title": gettext("Service unavailable"),
            "status": 503,
            "detail": gettext(
                "The database cannot be reached for a moment (a restart or a failover)."
                " Nothing was done; try again in %(seconds)s seconds."
            )
            % {"seconds": RETRY_AFTER},
        }
        response = HttpResponse(json.dumps(body), status=503, content_type=PROBLEM)
    else:
        # Nothing on this page may read the database: the signed-in person and any
        # messages are both in it, so the page is drawn as for a visitor.
        response = render(
            request,
            "unavailable.html",
            {"user": AnonymousUser(), "messages": (), "retry_after": RETRY_AFTER},
            status=503,
        )
    response["Retry-After"] = str(RETRY_AFTER)
    # Logged above as what it is; Django would log any 5xx again, as an error.
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response


class DatabaseOutageMiddleware:
    """Answer a view's unreachable-database error with `unavailable`."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if is_unreachable(exception):
            return unavailable(request, exception)
        return None


def server_error(request: HttpRequest) -> HttpResponse:
    """The 500 view (handler500), except for an unreachable database raised outside a
    view (in a middleware), which gets `unavailable`."""
    error = sys.exc_info()[1]
    if error is not None and is_unreachable(error):
        return unavailable(request, error)
    return defaults.server_error(request)
