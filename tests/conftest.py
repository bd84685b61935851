"""Fixtures shared by every test: personas, run factories and in-process driving.

Personas: alice and bob are reviewers who report to carol (their manager); bob
is in finance and security, alice in legal; carol manages finance; olga is an
operator; eve is an outsider who may see nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import DEFAULT_DB_ALIAS, connection, connections

import tests.workflows.definitions  # noqa: F401  (registers the test workflow types)
from approvals.models import GroupManager, HumanTask, ReportingLine
from tests.pgbouncer import PgBouncer
from tests.replica import DATABASE as replica_database
from tests.replica import ReplicaPair
from workflows import engine
from workflows.examples.models import ServiceEffect
from workflows.models import StepRun, WorkflowRun
from workflows.states import StepState

# The test kit for workflow authors (the `workflow_env` fixture), used as they would.
pytest_plugins = ["approvals.testing"]

ORDER_INPUT = {
    "order_id": "A-1001",
    "customer_email": "ada@example.com",
    "items": [{"sku": "BOOK-1", "quantity": 2}],
    "amount": "42.50",
    "currency": "EUR",
}


# A table with more dead rows than this once a module is done is compacted. Over
# tests/workflows (70 modules, in file order), 1,000 compacts 20 tables in 1.4 s in
# all, 5,000 4 tables in 0.4 s; every table with a dead row, 0.3 s a module.
DEAD_ROWS_TO_COMPACT = 1_000
# The fixtures through which a test reaches the database (pytest-django's).
DATABASE_FIXTURES = {"db", "transactional_db", "live_server"}


@pytest.fixture(scope="module", autouse=True)
def compact_what_the_module_left_dead(request, django_db_blocker) -> Iterator[None]:
    """Once a module is done, compact the tables its tests left thousands of dead rows in,
    as autovacuum would: vacuum and reindex them, and read their size again.

    Every test's rows are rolled back, but they stay on disk (dead rows, and their index
    entries) until a vacuum, and the suite's PostgreSQL runs without autovacuum (CI's
    does). An ANALYZE inside a test, as the plan tests run, records its table's size for
    good, even rolled back. After test_request_plans (twice 20,000 runs, rolled back)
    the runs table and its indexes were mostly dead and said to hold one row, and
    PostgreSQL checked the run of each of test_decided_plans' 22,000 tasks, at the end
    of each test, by reading the whole of run_created_idx rather than the primary key:
    17 to 34 s for a check that takes 0.3 s in a compact table. Compacted, a module
    finds the tables as small as their live rows, whatever ran before it.
    """
    yield
    # The e2e tests commit what they make and empty the tables after each test
    # (TRUNCATE, no dead rows), while workers they started may still be writing.
    rolled_back = any(
        (item.get_closest_marker("django_db") or DATABASE_FIXTURES & set(item.fixturenames))
        and not item.get_closest_marker("e2e")
        for item in request.session.items
        if item.module is request.module
    )
    if not rolled_back or connection.vendor != "postgresql" or connection.in_atomic_block:
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        # This connection's own counts reach pg_stat_user_tables when it is next idle.
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute(
            "SELECT format('%%I.%%I', schemaname, relname) FROM pg_stat_user_tables"
            " WHERE n_dead_tup > %s",
            [DEAD_ROWS_TO_COMPACT],
        )
        for (table,) in cursor.fetchall():
            cursor.execute(f"VACUUM ANALYZE {table}")
            cursor.execute(f"REINDEX TABLE {table}")


@pytest.fixture(autouse=True)
def fast_password_hashing(settings) -> None:
    """Hash test passwords cheaply; the real hasher is deliberately slow."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def one_step_per_execute(settings) -> None:
    """Let `engine.execute_step` run one step, so a test can look between steps.

    Eager dispatch (BATON_EAGER_STEPS) is on by default and proven on its own
    (tests/workflows/test_engine.py's TestEagerDispatch) and in every e2e test,
    whose workers run with the default settings.
    """
    settings.BATON_EAGER_STEPS = 0


@pytest.fixture(autouse=True)
def no_webhook_subscriptions_yet() -> None:
    """Start each test knowing that no endpoint subscribes to anything, as a process does
    once it has read them: otherwise the first event of the process would read them, a
    statement the query-count tests would see. A test that registers an endpoint (through
    its use case) makes the next event read them again."""
    from approvals.notify import webhooks

    webhooks.remember_subscriptions(frozenset())


@pytest.fixture
def order_input() -> Callable[..., dict[str, Any]]:
    def make(**overrides: Any) -> dict[str, Any]:
        return {**ORDER_INPUT, **overrides}

    return make


@pytest.fixture
def start() -> Callable[..., WorkflowRun]:
    """Start a run and return it (ignoring whether it was new)."""

    def start_run(workflow_type: str, input: dict[str, Any] | None = None, **options: Any):
        run, _ = engine.start_workflow(workflow_type=workflow_type, input=input or {}, **options)
        return run

    return start_run


@pytest.fixture
def drive() -> Callable[[WorkflowRun], WorkflowRun]:
    """Execute a run's scheduled steps in this process until none is left to do now.

    The fast way to test engine logic; tests in tests/e2e prove the same with real
    worker processes over a real broker.
    """

    def drive_run(run: WorkflowRun, *, max_steps: int = 100, now=None) -> WorkflowRun:
        for _ in range(max_steps):
            step = run.steps.filter(state=StepState.SCHEDULED).order_by("id").first()
            if step is None:
                break
            engine.execute_step(step_id=step.pk, now=now)
        run.refresh_from_db()
        return run

    return drive_run


@pytest.fixture
def effects() -> Callable[..., dict[str, int]]:
    """Count applied effects of a run by `service.action`."""

    def count(run: WorkflowRun) -> dict[str, int]:
        applied = ServiceEffect.objects.filter(run_id=run.id, applied_at__isnull=False)
        counts: dict[str, int] = {}
        for effect in applied:
            key = f"{effect.service}.{effect.action}"
            counts[key] = counts.get(key, 0) + 1
        return counts

    return count


def at_once(*calls: Callable[[], Any]) -> list[Any]:
    """Run each call in its own thread, released together; return what each returned
    (or the exception it raised). Each thread has, and then closes, its own connection."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(index: int, call: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            results[index] = call()
        except Exception as error:
            results[index] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=item) for item in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def steps_by_node(run: WorkflowRun) -> dict[str, StepRun]:
    return {step.node: step for step in run.steps.filter(kind="forward")}


@pytest.fixture
def groups(db) -> dict[str, Group]:
    return make_groups()


@pytest.fixture
def people(groups) -> dict[str, User]:
    return make_people(groups)


def make_groups() -> dict[str, Group]:
    """finance, legal and security (the `groups` fixture's, for a seed of a whole class)."""
    return {name: Group.objects.create(name=name) for name in ("finance", "legal", "security")}


def make_people(groups: dict[str, Group]) -> dict[str, User]:
    """The personas in `groups` (the `people` fixture's, for a seed of a whole class)."""
    users = {
        name: User.objects.create_user(
            name, email=f"{name}@example.com", password="baton-demo", first_name=name.title()
        )
        for name in ("alice", "bob", "carol", "olga", "eve")
    }
    users["alice"].groups.add(groups["legal"])
    users["bob"].groups.add(groups["finance"], groups["security"])
    users["carol"].groups.add(groups["finance"])
    operators = Group.objects.create(name="operators")
    operators.permissions.add(Permission.objects.get(codename="operate_humantask"))
    users["olga"].groups.add(operators)
    for name in ("alice", "bob"):
        ReportingLine.objects.create(user=users[name], manager=users["carol"])
    GroupManager.objects.create(group=groups["finance"], manager=users["carol"])
    return users


@pytest.fixture
def alice(people) -> User:
    return people["alice"]


@pytest.fixture
def bob(people) -> User:
    return people["bob"]


@pytest.fixture
def carol(people) -> User:
    return people["carol"]


@pytest.fixture
def olga(people) -> User:
    return people["olga"]


@pytest.fixture
def eve(people) -> User:
    return people["eve"]


@pytest.fixture
def start_expense(people, start, drive) -> Callable[..., WorkflowRun]:
    """Start an expense and run it to its first human task."""

    def start_one(amount: str = "120.00", requester: str = "alice", **input: Any) -> WorkflowRun:
        run = start(
            "expense",
            {
                "requester": requester,
                "title": "Train to Lyon",
                "amount": amount,
                "currency": "EUR",
                **input,
            },
        )
        return drive(run)

    return start_one


@pytest.fixture
def manager_task(start_expense) -> HumanTask:
    """carol's approval of alice's 120 EUR expense."""
    run = start_expense()
    return run.human_tasks.get(node="manager_approval")


@pytest.fixture
def two_expenses(start_expense):
    """carol holds a 120 EUR and a 2,500 EUR expense (the manager's approval of each)."""
    small = start_expense(amount="120.00").human_tasks.get()
    big = start_expense(amount="2500.00").human_tasks.get()
    return small, big


@pytest.fixture
def finance_task(start_expense, carol, drive) -> HumanTask:
    """The finance group's approval of alice's 1,500 EUR expense, after carol approved;
    its form asks for a cost centre."""
    from approvals import human_tasks

    run = start_expense(amount="1500.00")
    human_tasks.approve_human_task(task_id=run.human_tasks.get().pk, user=carol, channel="inbox")
    return drive(run).human_tasks.get(node="finance_approval")


@pytest.fixture
def employees(people) -> Group:
    """The group that may start expenses: alice, bob and carol (not eve, nor olga)."""
    group = Group.objects.create(name="employees")
    group.user_set.add(people["alice"], people["bob"], people["carol"])
    return group


@pytest.fixture
def operator(olga) -> User:
    """olga, also allowed to operate runs: she may start any type, for anyone."""
    olga.user_permissions.add(Permission.objects.get(codename="operate_workflowrun"))
    return User.objects.get(pk=olga.pk)  # a fresh row: permissions are cached per object


@pytest.fixture(scope="session")
def pgbouncer(django_db_setup, django_db_blocker) -> Iterator[PgBouncer]:
    """PgBouncer in transaction mode in front of the test database's server (tests/pgbouncer.py).

    Stopped before the test database is dropped (it holds server connections to it).
    """
    database = connection.settings_dict
    if connection.vendor != "postgresql":
        pytest.fail("The PgBouncer tests need PostgreSQL: set DATABASE_URL (see README).")
    bouncer = PgBouncer(host=database["HOST"] or "127.0.0.1", port=int(database["PORT"] or 5432))
    try:
        yield bouncer
    finally:
        bouncer.stop()


@pytest.fixture
def through_pgbouncer(pgbouncer: PgBouncer, transactional_db) -> Iterator[PgBouncer]:
    """Send this test's queries through PgBouncer, as settings with BATON_DB_POOLER=pgbouncer do.

    Committed data (`transactional_db`): one transaction around the whole test would
    pin one server connection and prove nothing about pooling.
    """
    saved = connection.settings_dict
    connection.close()
    # This thread's connection, and those other threads open (from connections.settings).
    connection.settings_dict = connections.settings[DEFAULT_DB_ALIAS] = pgbouncer.database(saved)
    try:
        yield pgbouncer
    finally:
        connection.close()
        connection.settings_dict = connections.settings[DEFAULT_DB_ALIAS] = saved
        ContentType.objects.clear_cache()


@pytest.fixture(scope="session")
def replica_pair() -> Iterator[ReplicaPair]:
    """A PostgreSQL primary with Baton's migrated database, and its streaming replica,
    on ports of their own (tests/replica.py)."""
    pair = ReplicaPair()
    try:
        yield pair
    finally:
        pair.stop()


@pytest.fixture(scope="module")
def on_replica_pair(replica_pair: ReplicaPair, django_db_setup) -> Iterator[ReplicaPair]:
    """Point `default` at the pair's primary and add the `replica` database, as
    DATABASE_URL and DATABASE_REPLICA_URL do, for the tests of one module.

    Module-scoped, so that `replica` exists before pytest-django sets up each test of
    a module marked `django_db(transaction=True, databases=["default", "replica"])`:
    committed data, which the replica sees once it has replayed it, emptied from the
    primary after each test. The replica is a mirror: it is never flushed.
    """
    saved = connection.settings_dict
    connection.close()
    primary = {
        **saved,
        "NAME": replica_database,
        "HOST": "127.0.0.1",
        "PORT": replica_pair.primary.port,
    }
    connection.settings_dict = connections.settings[DEFAULT_DB_ALIAS] = primary
    # The content types' ids this process cached are the other database's (a flushed test
    # database numbers them anew): an audit entry would name one the pair has not.
    ContentType.objects.clear_cache()
    connections.settings["replica"] = {
        **primary,
        "PORT": replica_pair.replica.port,
        "TEST": {**primary["TEST"], "MIRROR": DEFAULT_DB_ALIAS},
    }
    try:
        yield replica_pair
    finally:
        connections["replica"].close()
        del connections["replica"]
        del connections.settings["replica"]
        connection.close()
        connection.settings_dict = connections.settings[DEFAULT_DB_ALIAS] = saved
        ContentType.objects.clear_cache()
