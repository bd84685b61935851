"""The start-up refusal (workflows.checks): a workflow version that still has unfinished runs
must stay registered, and a migrated database must have every PostgreSQL function the code
calls, or the worker and the web refuse to start, naming type, version and run count, or
the function. The checks read the database only when asked to, and pass on a database
that has no tables yet."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from config.celery import refuse_to_start
from tests.workflows.definitions import VERSIONED_V1, VERSIONED_V2
from workflows import engine, registry
from workflows.checks import (
    MISSING_FUNCTION,
    UNCHECKED_FUNCTIONS,
    UNCHECKED_VERSIONS,
    UNREGISTERED_VERSION,
    check_functions,
    check_live_versions,
)
from workflows.engine import functions, straight

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@contextmanager
def undeployed(workflow):
    """Take `workflow` out of the registry for the block, as a deploy without it would."""
    registry.unregister(workflow)
    try:
        yield
    finally:
        registry.register(workflow)


def start_waiting(count: int) -> list:
    return [
        engine.start_workflow(workflow_type="test_versioned", input={"n": n})[0]
        for n in range(count)
    ]


def environment(database: str, port: int | None = None) -> dict[str, str]:
    """A process of Baton's own, on `database`, with only the shipped types registered
    (the test types are not: as if their definitions were dropped by a deploy)."""
    settings = connection.settings_dict
    return {
        "PATH": os.environ["PATH"],
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        # The shipped types mark personal fields: sealed under a key derived from the above.
        "BATON_DATA_KEYS_DERIVED": "true",
        "DATABASE_URL": "postgres://{USER}@{HOST}:{port}/{database}".format(
            **settings, port=port or settings["PORT"], database=database
        ),
        "CELERY_BROKER_URL": os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15"),
    }


def baton(
    *args: str, database: str, port: int | None = None, timeout: int = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        cwd=ROOT,
        env=environment(database, port),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.django_db
class TestCheckLiveVersions:
    def test_reads_nothing_unless_told_which_databases(self, django_assert_num_queries):
        start_waiting(1)

        with undeployed(VERSIONED_V1), django_assert_num_queries(0):
            assert check_live_versions() == []

    def test_registered_versions_pass(self):
        start_waiting(2)

        assert check_live_versions(databases=["default"]) == []

    def test_a_version_gone_with_unfinished_runs_is_named_with_its_run_count(self):
        runs = start_waiting(3)
        engine.pause_run(run_id=runs[0].pk)

        with undeployed(VERSIONED_V1):
            [error] = check_live_versions(databases=["default"])

        assert error.id == UNREGISTERED_VERSION
        assert error.msg == (
            "Workflow type 'test_versioned' version 1 is not registered, but 3 unfinished "
            "run(s) of it remain (1 paused, 2 waiting)."
        )
        assert error.hint.startswith("Deploy test_versioned v1 again")

    def test_the_hint_names_the_command_that_moves_them_to_the_newest_version(self):
        start_waiting(1)
        registry.register(VERSIONED_V2)
        try:
            with undeployed(VERSIONED_V1):
                [error] = check_live_versions(databases=["default"])
        finally:
            registry.unregister(VERSIONED_V2)

        assert "manage.py migrate_runs test_versioned --from 1 --to 2" in error.hint

    def test_finished_runs_do_not_hold_a_version(self):
        [run] = start_waiting(1)
        engine.cancel_run(run_id=run.pk)

        with undeployed(VERSIONED_V1):
            assert check_live_versions(databases=["default"]) == []


def drop(function: functions.Function) -> None:
    """Drop `function` in the test's transaction (rolled back after it), as a database that
    never had the migration installing it would lack it."""
    with connection.cursor() as cursor:
        cursor.execute(function.drop_sql())


@pytest.mark.django_db
class TestCheckFunctions:
    def test_every_function_the_code_calls_is_checked(self):
        assert {function.prefix for function in functions.registered()} == {
            "baton_start_run",
            "baton_claim_step",
            "baton_record_straight",
            "baton_record_end",
            "baton_inbox_header",
            "baton_inbox_page",
        }

    def test_reads_nothing_unless_told_which_databases(self, django_assert_num_queries):
        drop(straight.function())

        with django_assert_num_queries(0):
            assert check_functions() == []

    def test_a_migrated_database_passes(self):
        assert check_functions(databases=["default"]) == []

    def test_a_missing_function_is_named_with_what_to_do(self):
        function = straight.function()
        drop(function)

        [error] = check_functions(databases=["default"])

        assert error.id == MISSING_FUNCTION
        assert error.msg == (
            f"The database 'default' lacks PostgreSQL functions this code calls: "
            f"{function.signature}."
        )
        assert "Deploy the code the migrations were made with" in error.hint
        assert "BATON_DB_FUNCTIONS=false" in error.hint

    def test_the_worker_refuses_to_start_without_it(self):
        function = straight.end_function()
        drop(function)

        with pytest.raises(SystemExit) as refused:
            refuse_to_start()

        assert f"lacks PostgreSQL functions this code calls: {function.signature}." in str(
            refused.value
        )

    def test_nothing_is_required_with_the_functions_turned_off(self, settings):
        drop(straight.function())
        settings.BATON_DB_FUNCTIONS = False

        assert check_functions(databases=["default"]) == []


@pytest.mark.django_db(transaction=True)
class TestWorkerStartUp:
    def test_the_worker_init_signal_refuses_naming_type_version_and_count(self):
        start_waiting(2)

        with undeployed(VERSIONED_V1), pytest.raises(SystemExit) as refused:
            refuse_to_start()

        assert "'test_versioned' version 1 is not registered, but 2 unfinished run(s)" in str(
            refused.value
        )

    def test_a_real_worker_does_not_start(self):
        start_waiting(2)

        result = baton(
            str(BIN / "celery"),
            "-A",
            "config",
            "worker",
            "--concurrency=1",
            "--without-mingle",
            "--without-gossip",
            database=connection.settings_dict["NAME"],
            timeout=60,
        )

        output = result.stdout + result.stderr
        assert result.returncode != 0
        assert "'test_versioned' version 1 is not registered, but 2 unfinished run(s)" in output
        assert " ready." not in output


@pytest.mark.django_db(transaction=True)
class TestWebStartUp:
    def test_the_wsgi_application_refuses_to_load(self):
        start_waiting(1)

        result = baton(
            sys.executable, "-c", "import config.wsgi", database=connection.settings_dict["NAME"]
        )

        assert result.returncode != 0
        assert "'test_versioned' version 1 is not registered, but 1 unfinished run(s)" in (
            result.stderr
        )

    def test_the_system_check_and_migrate_fail_when_given_the_database(self):
        start_waiting(1)
        database = connection.settings_dict["NAME"]

        plain = baton(sys.executable, "manage.py", "check", database=database)
        checked = baton(
            sys.executable, "manage.py", "check", "--database", "default", database=database
        )

        migrated = baton(sys.executable, "manage.py", "migrate", database=database)

        assert plain.returncode == 0
        assert migrated.returncode == 1
        assert "'test_versioned' version 1 is not registered" in migrated.stderr
        assert checked.returncode == 1
        assert f"({UNREGISTERED_VERSION}) Workflow type 'test_versioned' version 1" in (
            checked.stderr
        )


class TestBeforeTheFirstMigration:
    def test_the_check_passes_and_a_process_waits_for_migrate(self):
        name = f"wt_versions_empty_{uuid.uuid4().hex[:8]}"
        settings = connection.settings_dict
        server = f"host={settings['HOST']} port={settings['PORT']} user={settings['USER']}"
        with psycopg.connect(f"{server} dbname=postgres", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        try:
            checked = baton(
                sys.executable, "manage.py", "check", "--database", "default", database=name
            )
            web = baton(sys.executable, "-c", "import config.wsgi", database=name)
        finally:
            with psycopg.connect(f"{server} dbname=postgres", autocommit=True) as admin:
                admin.execute(f'DROP DATABASE "{name}"')

        # `migrate` runs the system check first: it must pass on a database it has yet to fill.
        assert checked.returncode == 0, checked.stderr
        assert "System check identified no issues" in checked.stdout
        # A worker or web started before `migrate` ended would fail every step and page.
        assert web.returncode != 0
        assert "lacks PostgreSQL functions this code calls: baton_" in web.stderr
        assert "run `manage.py migrate`" in web.stderr


class TestAnUnreachableDatabase:
    def test_warns_and_lets_the_process_start(self):
        where = {"database": "nowhere", "port": 1}  # nothing listens there

        web = baton(sys.executable, "-c", "import config.wsgi", **where)
        checked = baton(sys.executable, "manage.py", "check", "--database", "default", **where)

        assert web.returncode == 0, web.stderr
        assert "Could not check that every workflow version" in web.stderr
        assert UNCHECKED_VERSIONS in checked.stderr + checked.stdout
        assert UNCHECKED_FUNCTIONS in checked.stderr + checked.stdout
