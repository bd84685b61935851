"""Django's PostgreSQL backend whose health check asks the socket before the server.

With CONN_HEALTH_CHECKS, Django checks a kept connection before the first query of each
request, and a Celery task is a request too (`config.celery.reuse_database_connections`).
Django's check is `SELECT 1`: one more round trip to PostgreSQL for every page served and
every step a worker ran from a message (a step's own are its claim and its record).

A connection the server has ended (a restart, `pg_terminate_backend`, an idle timeout,
PgBouncer closing a client) has something to read while it should be silent: the
server's last error, or the end of the stream. So the socket is asked first, without
waiting, and a quiet one is taken as healthy; anything else gets Django's `SELECT 1`.
(Go's MySQL driver checks its connections the same way before reusing them.) A peer
that vanished without a word (a cut cable) is seen by neither check before TCP's own
timeouts, so nothing is lost.
"""

from __future__ import annotations

import select
from typing import Any

from django.db.backends.postgresql import base
from psycopg import pq

# The states in which a connection waits for its next query, with nothing to read.
_WAITING = (pq.TransactionStatus.IDLE, pq.TransactionStatus.INTRANS)


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's wrapper, with `is_usable` asking the socket first."""

    def is_usable(self) -> bool:
        if self.connection is not None and quiet(self.connection):
            return True
        return super().is_usable()


def quiet(connection: Any) -> bool:
    """Whether psycopg's `connection` is open, waiting for a query, and has nothing to
    read: nothing the server said since its last answer, not even goodbye."""
    if connection.closed or connection.broken:
        return False
    pgconn = connection.pgconn
    if pgconn.status != pq.ConnStatus.OK or pgconn.transaction_status not in _WAITING:
        return False
    poller = select.poll()
    poller.register(pgconn.socket, select.POLLIN | select.POLLPRI)  # and errors, always
    return not poller.poll(0)
