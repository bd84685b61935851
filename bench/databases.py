"""The benchmark's own PostgreSQL databases: created, migrated, marked, reused or dropped.

A run uses only databases whose names start with its base name (`baton_bench` by
default): `<base>_template`, migrated once per migration state and copied with
`CREATE DATABASE ... TEMPLATE` (a fraction of a second, where migrating takes
seconds); `<base>`, a fresh copy per run; and `<base>_<seed>`, the seeded ones,
kept between runs. Each kept database carries a marker in its comment (the
migration leaves it was built with, and for a seeded one its size and template
rows), so a database built by other code or another size is rebuilt, never reused.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql


def url_for(server_url: str, name: str) -> str:
    """Return `server_url` pointing at database `name`."""
    parts = urlsplit(server_url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


class Server:
    """Administrative statements on the server, through its maintenance database."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url

    def _connect(self) -> psycopg.Connection:
        return psycopg.connect(url_for(self.server_url, "postgres"), autocommit=True)

    def exists(self, name: str) -> bool:
        with self._connect() as connection:
            found = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
            return found.fetchone() is not None

    def marker(self, name: str) -> dict[str, Any] | None:
        with self._connect() as connection:
            row = connection.execute(
                "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                [name],
            ).fetchone()
        if row is None or not row[0]:
            return None
        try:
            return json.loads(row[0])
        except ValueError:
            return None

    def set_marker(self, name: str, marker: dict[str, Any]) -> None:
        with self._connect() as connection:
            connection.execute(
                sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                    sql.Identifier(name), sql.Literal(json.dumps(marker))
                )
            )

    def drop(self, name: str) -> None:
        with self._connect() as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def create(self, name: str, *, template: str | None = None) -> None:
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template:
            statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
        with self._connect() as connection:
            if template:
                # PostgreSQL copies a template no one is connected to; behind PgBouncer
                # (BATON_DB_POOLER) a server connection of the migration stays pooled
                # on it. The template is the benchmark's own: end them.
                connection.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    [template],
                )
            connection.execute(statement)

    def names_starting(self, prefix: str) -> list[str]:
        with self._connect() as connection:
            rows = connection.execute(
                "SELECT datname FROM pg_database WHERE starts_with(datname, %s)", [prefix]
            ).fetchall()
        return [row[0] for row in rows]
