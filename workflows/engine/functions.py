"""PostgreSQL functions for the engine's compiled statements: one short call instead of
a long statement that the server parses and plans again on every step.

A compiled statement of the hot path (the straight path's record, the claim, the
start) is sent with its values bound on the client, as Django's psycopg cursors
send every query: PostgreSQL parses and plans the whole CTE each time. The same
statement inside a PL/pgSQL function is planned once per server connection and
kept, which server-side prepared statements would also give, but a function
stays correct behind PgBouncer in transaction mode: it is an ordinary statement,
whichever server connection runs it (procrastinate's `procrastinate_fetch_job`
and `procrastinate_finish_job` work the same way).

A function's text is compiled from the models, as its statement is, and its name
ends with a hash of that text (`Function.name`): a state machine changed on a model
changes the name, so the code never calls a function a migration installed from an
older state machine. `tests/workflows/test_functions.py` checks that the migrations
install every function the code compiles (as `makemigrations --check` does for
tables; the inbox's functions have tests of their own in tests/approvals), and the web
and the worker refuse to start on a database that lacks one
(`workflows.checks.check_functions`): every step would otherwise fail on it. Each app
names the functions it calls (`register`) when Django starts. BATON_DB_FUNCTIONS=false
sends the statements instead (the benchmark's comparison); SQLite always does.

The call itself is a statement too, parsed, analysed and planned again on each step
when sent as Django sends queries (its values written into its text): about 75 µs of
the server's CPU a call, a fifth of a remote step's. On a connection straight to the
server its calls are prepared instead (`cursor`); behind PgBouncer, whose server
connections change with each transaction, they are sent as every other query is.
"""

from __future__ import annotations

import enum
import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.postgresql.base import ServerBindingCursor
from django.db.models import Model
from psycopg import sql


@dataclass(frozen=True)
class Function:
    """A PL/pgSQL function that returns its one query's rows; `$n` is its nth argument."""

    prefix: str
    arguments: tuple[str, ...]
    returns: str
    body: str
    # Statements run before the query (PL/pgSQL, each ending with ";").
    prelude: str = ""
    # Planner settings the function is planned and run with, as (name, value): a kept
    # plan is made for any argument values (a generic plan), from average estimates
    # that can favour reading a whole range and sorting it over reading it in order.
    planner: tuple[tuple[str, str], ...] = ()
    # Queries returned instead of `body` when a condition on the arguments holds, as
    # (condition, query), tried in turn: one function for a few shapes of one query,
    # each shape planned apart (PL/pgSQL keeps a plan per statement).
    cases: tuple[tuple[str, str], ...] = ()

    @functools.cached_property
    def name(self) -> str:
        text = "\n".join([", ".join(self.arguments), self.returns, self.prelude, self.body])
        text += "".join(f"\nSET {setting} = {value}" for setting, value in self.planner)
        # Only a function with cases has them in its text: the others keep their names.
        text += "".join(f"\nIF {condition} THEN {query}" for condition, query in self.cases)
        return f"{self.prefix}_{hashlib.sha256(text.encode()).hexdigest()[:12]}"

    @property
    def signature(self) -> str:
        """The name and argument types PostgreSQL knows the function by."""
        return f"{self.name}({', '.join(self.arguments)})"

    def create_sql(self) -> str:
        """The `CREATE FUNCTION` a migration runs."""
        planner = "".join(f" SET {setting} = {value}" for setting, value in self.planner)
        cases = "".join(
            f"IF {condition} THEN\nRETURN QUERY {query};\nRETURN;\nEND IF;\n"
            for condition, query in self.cases
        )
        return (
            f"CREATE OR REPLACE FUNCTION {self.signature}\n"
            f"RETURNS TABLE ({self.returns})\nLANGUAGE plpgsql{planner} AS $baton$\nBEGIN\n"
            f"{self.prelude}{cases}RETURN QUERY {self.body};\nEND\n$baton$"
        )

    def drop_sql(self) -> str:
        return f"DROP FUNCTION IF EXISTS {self.signature}"

    @functools.cached_property
    def call_sql(self) -> str:
        """The call, each value cast to its argument's type (they are bound as literals)."""
        values = ", ".join(f"%s::{type_}" for type_ in self.arguments)
        # The function's name and its arguments' types come from model metadata; every
        # value is a bound parameter.
        return f"SELECT * FROM {self.name}({values})"  # nosec B608


def column_type(model: type[Model], name: str) -> str:
    """The SQL type of `model.name`'s column, as a function's argument or result names it
    (without a length: a function's types take none)."""
    connection = connections[DEFAULT_DB_ALIAS]
    field = model._meta.get_field(name)
    db_type = field.rel_db_type(connection) if field.primary_key else field.db_type(connection)
    return str(db_type).split("(")[0]


def literal(value: Any) -> str:
    """A constant of a compiled statement, written into a function's text as SQL."""
    if isinstance(value, enum.Enum):
        value = value.value
    return sql.Literal(value).as_string()


class _Prepared(ServerBindingCursor):
    """Django's cursor that binds values on the server, each of whose statements is
    prepared: parsed, analysed and planned once per server connection, then executed by
    name with only its values sent."""

    options: ClassVar[dict[str, bool]] = {"prepare": True}

    def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
        return super().execute(query, params, **{**options, **self.options})


class _PreparedBinary(_Prepared):
    """The same, its rows read in binary: psycopg parses ids and times in C, not from text."""

    options = {"prepare": True, "binary": True}


def cursor(connection: Any) -> Any:
    """A cursor to call the engine's functions on `connection` (`Function.call_sql`).

    Its calls are prepared where the engine calls functions (`used`) on a connection
    that allows prepared statements, that is where psycopg's `prepare_threshold` is set
    (`config.settings.database`: not behind PgBouncer); elsewhere, and for the
    statements sent instead of functions, it is the connection's own cursor. So it is
    where Django logs queries (DEBUG, a test capturing them): the log shows each call
    with its values, which a prepared statement's execution does not carry. Made as
    Django makes its cursors (`BaseDatabaseWrapper._cursor`): a kept connection that
    fails its health check is replaced first (after a PostgreSQL restart, a worker's
    next step reconnects instead of failing), errors are Django's, and
    `execute_wrapper`s see each call.
    """
    return prepared_cursor(connection) if prepares(connection) else connection.cursor()


def prepares(connection: Any) -> bool:
    """Whether calls of functions go prepared on `connection`: the engine calls its
    functions there (`used`), on a connection that allows prepared statements (psycopg's
    `prepare_threshold` set, `config.settings.database`: not behind PgBouncer), whose
    queries are not being logged (DEBUG, a test capturing them: the log shows each call
    with its values, which a prepared statement's execution does not carry)."""
    if not used(connection) or connection.queries_logged:
        return False
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    return getattr(connection.connection, "prepare_threshold", None) is not None


def prepared_cursor(connection: Any, *, binary: bool = False) -> Any:
    """A cursor whose statements are prepared on `connection` (where `prepares`), its
    rows read in binary if asked; made as Django makes its cursors."""
    prepared = _PreparedBinary if binary else _Prepared
    with connection.wrap_database_errors:
        return connection._prepare_cursor(prepared(connection.connection))


def used(connection: Any) -> bool:
    """Whether the engine calls its functions on `connection` (PostgreSQL, and
    BATON_DB_FUNCTIONS not turned off)."""
    return connection.vendor == "postgresql" and settings.BATON_DB_FUNCTIONS


_registered: list[Callable[[], Function]] = []


def register(*compilers: Callable[[], Function]) -> None:
    """Name functions the code calls, each by what compiles it (an app's `ready` does)."""
    _registered.extend(compiler for compiler in compilers if compiler not in _registered)


def registered() -> list[Function]:
    """Every function the code calls, compiled."""
    return [compile_function() for compile_function in _registered]


def missing(wanted: list[Function], *, using: str = DEFAULT_DB_ALIAS) -> list[Function]:
    """Those of `wanted` that the database `using` lacks (by name and argument types)."""
    signatures = [function.signature for function in wanted]
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT signature FROM unnest(%s::text[]) AS signature "
            "WHERE to_regprocedure(signature) IS NULL",
            [signatures],
        )
        absent = {signature for (signature,) in cursor.fetchall()}
    return [function for function in wanted if function.signature in absent]
