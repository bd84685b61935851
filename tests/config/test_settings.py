"""config/settings.py on a bare machine: production's defaults, and the demo's few changes.

Each test loads the settings in a fresh Python process with an environment made
for it (nothing inherited from this test run but PATH), as a server would.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KEY = "k" * 20 + "-a-long-random-looking-key-for-these-tests-only-0123456789"


def bare_env(tmp_path: Path, **variables: str) -> dict[str, str]:
    """A machine with nothing set but PATH, its var/ in tmp_path, and `variables`."""
    return {"PATH": os.environ["PATH"], "BATON_VAR_DIR": str(tmp_path / "var"), **variables}


def load_settings(env: dict[str, str], *names: str) -> subprocess.CompletedProcess[str]:
    """Load config.settings in a new process; print the named settings as JSON."""
    script = (
        "import json, django; from django.conf import settings; django.setup(); "
        f"print(json.dumps({{name: getattr(settings, name) for name in {list(names)!r}}}, "
        "default=str))"
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def loaded(env: dict[str, str], *names: str) -> dict[str, object]:
    result = load_settings(env, *names)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def demo_variables() -> dict[str, str]:
    """The variables the Makefile's demo target exports, besides its key file."""
    makefile = (ROOT / "Makefile").read_text()
    exported = dict(re.findall(r"^demo: export (\w+) = (.*)$", makefile, flags=re.MULTILINE))
    exported.pop("DJANGO_SECRET_KEY_FILE")
    return exported


class TestSecretKey:
    def test_nothing_starts_without_one_and_the_refusal_says_how_to_make_one(self, tmp_path):
        result = load_settings(bare_env(tmp_path), "SECRET_KEY")

        assert result.returncode != 0
        assert "ImproperlyConfigured: DJANGO_SECRET_KEY is not set" in result.stderr
        assert "secrets.token_urlsafe(50)" in result.stderr
        assert "DJANGO_SECRET_KEY_FILE" in result.stderr

    def test_debug_on_does_not_bring_back_a_built_in_key(self, tmp_path):
        result = load_settings(bare_env(tmp_path, DJANGO_DEBUG="true"), "SECRET_KEY")

        assert result.returncode != 0
        assert "DJANGO_SECRET_KEY is not set" in result.stderr

    def test_it_is_read_from_the_environment(self, tmp_path):
        settings = loaded(bare_env(tmp_path, DJANGO_SECRET_KEY=KEY), "SECRET_KEY")

        assert settings["SECRET_KEY"] == KEY

    def test_it_is_read_from_the_file_named_in_the_environment(self, tmp_path):
        key_file = tmp_path / "secret_key"
        key_file.write_text(KEY + "\n")

        settings = loaded(bare_env(tmp_path, DJANGO_SECRET_KEY_FILE=str(key_file)), "SECRET_KEY")

        assert settings["SECRET_KEY"] == KEY

    @pytest.mark.parametrize(
        ("contents", "problem"), [(None, "cannot be read"), ("\n", "is empty")]
    )
    def test_a_missing_or_empty_key_file_is_refused_by_name(self, tmp_path, contents, problem):
        key_file = tmp_path / "secret_key"
        if contents is not None:
            key_file.write_text(contents)

        result = load_settings(
            bare_env(tmp_path, DJANGO_SECRET_KEY_FILE=str(key_file)), "SECRET_KEY"
        )

        assert result.returncode != 0
        assert f"DJANGO_SECRET_KEY_FILE names '{key_file}', which {problem}" in result.stderr


class TestDebug:
    def test_is_off_unless_asked_for(self, tmp_path):
        settings = loaded(bare_env(tmp_path, DJANGO_SECRET_KEY=KEY), "DEBUG", "STORAGES")

        assert settings["DEBUG"] is False
        assert settings["STORAGES"]["staticfiles"]["BACKEND"] == (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )

    def test_is_on_when_asked_for(self, tmp_path):
        settings = loaded(bare_env(tmp_path, DJANGO_SECRET_KEY=KEY, DJANGO_DEBUG="true"), "DEBUG")

        assert settings["DEBUG"] is True

    def test_a_value_that_is_not_a_boolean_is_refused(self, tmp_path):
        result = load_settings(bare_env(tmp_path, DJANGO_SECRET_KEY=KEY, DJANGO_DEBUG="maybe"))

        assert "DJANGO_DEBUG must be a boolean (true/false), not 'maybe'." in result.stderr


class TestDemo:
    """`make demo` alone: a key made once, and pages served with DEBUG off."""

    def test_its_key_is_made_once_and_readable_by_its_owner_only(self, tmp_path):
        key_file = tmp_path / "var" / "secret_key"
        make = ["make", "--no-print-directory", "-s", f"DEMO_SECRET_KEY={key_file}", str(key_file)]

        subprocess.run(make, cwd=ROOT, check=True, timeout=60)
        first = key_file.read_text()
        subprocess.run(make, cwd=ROOT, check=True, timeout=60)

        assert key_file.read_text() == first
        assert len(first.strip()) >= 50
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600

    def test_its_settings_serve_the_sign_in_page_and_its_styles_with_debug_off(self, tmp_path):
        key_file = tmp_path / "secret_key"
        key_file.write_text(KEY)
        env = bare_env(
            tmp_path,
            DJANGO_SECRET_KEY_FILE=str(key_file),
            **demo_variables(),
        )
        script = (
            "import django; django.setup(); from django.conf import settings; "
            "from django.test import Client; client = Client(HTTP_HOST='127.0.0.1'); "
            "page = client.get('/accounts/login/'); css = client.get('/static/baton.css'); "
            "print(settings.DEBUG, page.status_code, css.status_code, "
            "'/static/baton.css' in page.content.decode())"
        )

        result = subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
            capture_output=True,
            text=True,
            timeout=60,
        )

        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["False", "200", "200", "True"]

    def test_every_audiences_pages_answer_on_its_sqlite_with_its_seeded_data(self, tmp_path):
        key_file = tmp_path / "secret_key"
        key_file.write_text(KEY)
        env = {
            **bare_env(tmp_path, DJANGO_SECRET_KEY_FILE=str(key_file), **demo_variables()),
            "DJANGO_SETTINGS_MODULE": "config.settings",
        }
        pages = {
            "alice": ["/", "/requests/", "/requests/new/", "/preferences/", "/notifications/"],
            "carol": ["/", "/?tab=queue", "/?tab=decided", "/?tab=decided&q=Expense", "/away/"],
            "olga": ["/console/", "/console/sla/", "/console/tasks/", "/console/audit/"],
        }
        script = (
            "import django, json, sys; django.setup(); "
            "from django.contrib.auth.models import User; from django.test import Client; "
            "answers = {}\n"
            f"for name, paths in {pages!r}.items():\n"
            "    client = Client(HTTP_HOST='127.0.0.1', raise_request_exception=False)\n"
            "    client.force_login(User.objects.get(username=name))\n"
            "    answers.update({f'{name} {p}': client.get(p).status_code for p in paths})\n"
            "print(json.dumps(answers))"
        )
        for command in (["migrate", "--noinput", "-v0"], ["seed_demo"]):
            subprocess.run(
                [sys.executable, "manage.py", *command],
                cwd=ROOT,
                env=env,
                check=True,
                capture_output=True,
                timeout=300,
            )

        result = subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

        assert result.returncode == 0, result.stderr
        answers = json.loads(result.stdout.splitlines()[-1])
        assert {page: status for page, status in answers.items() if status != 200} == {}
        assert len(answers) == 14


HTTPS = (
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
)


class TestHttps:
    def test_is_on_by_default_as_production_needs_it(self, tmp_path):
        settings = loaded(bare_env(tmp_path, DJANGO_SECRET_KEY=KEY), *HTTPS)

        assert settings == dict.fromkeys(HTTPS, True) | {"SECURE_HSTS_SECONDS": 3600}

    def test_the_demo_turns_it_off_explicitly_for_plain_http(self, tmp_path):
        settings = loaded(bare_env(tmp_path, DJANGO_SECRET_KEY=KEY, **demo_variables()), *HTTPS)

        assert settings == dict.fromkeys(HTTPS, False) | {"SECURE_HSTS_SECONDS": 0}

    def test_the_tests_turn_it_off_explicitly_for_plain_http(self):
        from django.conf import settings

        assert [getattr(settings, name) for name in HTTPS] == [False, False, False, 0]

    def test_the_proxy_header_is_read_as_django_expects_it(self, tmp_path):
        env = bare_env(
            tmp_path,
            DJANGO_SECRET_KEY=KEY,
            DJANGO_SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto: https",
            DJANGO_SECURE_HSTS_SECONDS="3600",
        )

        settings = loaded(env, "SECURE_PROXY_SSL_HEADER", "SECURE_HSTS_SECONDS")

        assert settings == {
            "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
            "SECURE_HSTS_SECONDS": 3600,
        }

    @pytest.mark.parametrize(
        ("name", "value", "message"),
        [
            (
                "DJANGO_SECURE_PROXY_SSL_HEADER",
                "X-Forwarded-Proto",
                'DJANGO_SECURE_PROXY_SSL_HEADER must be "Header-Name: value", such as '
                "\"X-Forwarded-Proto: https\", not 'X-Forwarded-Proto'.",
            ),
            (
                "DJANGO_SECURE_HSTS_SECONDS",
                "a year",
                "DJANGO_SECURE_HSTS_SECONDS must be a whole number, not 'a year'.",
            ),
        ],
    )
    def test_a_malformed_value_is_refused_by_name(self, tmp_path, name, value, message):
        result = load_settings(bare_env(tmp_path, DJANGO_SECRET_KEY=KEY, **{name: value}))

        assert result.returncode != 0
        assert message in result.stderr


class TestTrustedProxies:
    def test_none_is_trusted_by_default(self, tmp_path):
        names = ("BATON_TRUSTED_PROXIES", "BATON_TRUSTED_PROXY_COUNT")

        settings = loaded(bare_env(tmp_path, DJANGO_SECRET_KEY=KEY), *names)

        assert settings == {"BATON_TRUSTED_PROXIES": [], "BATON_TRUSTED_PROXY_COUNT": 0}

    def test_addresses_and_networks_are_read(self, tmp_path):
        env = bare_env(
            tmp_path, DJANGO_SECRET_KEY=KEY, BATON_TRUSTED_PROXIES="10.0.0.5, 172.16.0.0/12,::1"
        )

        settings = loaded(env, "BATON_TRUSTED_PROXIES")

        assert settings == {"BATON_TRUSTED_PROXIES": ["10.0.0.5/32", "172.16.0.0/12", "::1/128"]}

    @pytest.mark.parametrize(
        ("name", "value", "message"),
        [
            (
                "BATON_TRUSTED_PROXIES",
                "10.0.0.5,caddy",
                "BATON_TRUSTED_PROXIES must list IP addresses or networks, such as "
                "\"10.0.0.5,172.16.0.0/12\"; 'caddy' is neither.",
            ),
            (
                "BATON_TRUSTED_PROXY_COUNT",
                "-1",
                "BATON_TRUSTED_PROXY_COUNT must be 0 or more, not -1.",
            ),
        ],
    )
    def test_a_malformed_value_is_refused_by_name(self, tmp_path, name, value, message):
        result = load_settings(bare_env(tmp_path, DJANGO_SECRET_KEY=KEY, **{name: value}))

        assert result.returncode != 0
        assert message in result.stderr


class TestExpenseEscalation:
    def test_it_counts_two_business_days_unless_told_otherwise(self, tmp_path):
        settings = loaded(
            bare_env(tmp_path, DJANGO_SECRET_KEY=KEY), "BATON_EXPENSE_ESCALATE_AFTER_BUSINESS_DAYS"
        )

        assert settings == {"BATON_EXPENSE_ESCALATE_AFTER_BUSINESS_DAYS": 2}

    @pytest.mark.parametrize(
        ("variables", "message"),
        [
            (
                {"BATON_EXPENSE_ESCALATE_AFTER_HOURS": "48"},
                "BATON_EXPENSE_ESCALATE_AFTER_HOURS is no longer read",
            ),
            ({"BATON_EXPENSE_ESCALATE_AFTER_BUSINESS_DAYS": "0"}, "must be 1 or more, not 0"),
        ],
    )
    def test_the_old_hours_and_a_day_count_below_one_are_refused_saying_why(
        self, tmp_path, variables, message
    ):
        result = load_settings(bare_env(tmp_path, DJANGO_SECRET_KEY=KEY, **variables))

        assert result.returncode != 0
        assert message in result.stderr


class TestMetricsAndLogs:
    def test_metrics_are_off_and_logs_json_unless_asked_otherwise(self, tmp_path):
        found = loaded(
            bare_env(tmp_path, DJANGO_SECRET_KEY=KEY),
            "BATON_METRICS_TOKEN",
            "BATON_METRICS_PORT",
            "BATON_LOG_FORMAT",
        )

        assert found == {
            "BATON_METRICS_TOKEN": "",
            "BATON_METRICS_PORT": 0,
            "BATON_LOG_FORMAT": "json",
        }

    def test_the_demo_asks_for_plain_text_lines(self, tmp_path):
        env = bare_env(tmp_path, DJANGO_SECRET_KEY=KEY, BATON_LOG_FORMAT="text")

        logging = loaded(env, "LOGGING")["LOGGING"]

        assert logging["handlers"]["console"]["formatter"] == "text"

    @pytest.mark.parametrize(
        ("variables", "message"),
        [
            ({"BATON_LOG_FORMAT": "xml"}, "BATON_LOG_FORMAT must be json or text, not 'xml'."),
            (
                {"BATON_METRICS_PORT": "9100"},
                "BATON_METRICS_PORT is set but BATON_METRICS_TOKEN is not",
            ),
            (
                {"BATON_METRICS_PORT": "9100", "BATON_METRICS_TOKEN": "t" * 32},
                "BATON_METRICS_PORT is set but PROMETHEUS_MULTIPROC_DIR is not",
            ),
        ],
    )
    def test_a_bad_log_format_or_an_unsafe_metrics_port_is_refused(
        self, tmp_path, variables, message
    ):
        result = load_settings(bare_env(tmp_path, DJANGO_SECRET_KEY=KEY, **variables))

        assert result.returncode != 0
        assert message in result.stderr


class TestBroker:
    def test_rabbitmq_gets_quorum_queues_and_no_visibility_timeout(self, tmp_path) -> None:
        env = bare_env(
            tmp_path, DJANGO_SECRET_KEY=KEY, CELERY_BROKER_URL="amqp://guest:guest@rabbit//"
        )

        values = loaded(
            env,
            "CELERY_TASK_CREATE_MISSING_QUEUE_TYPE",
            "CELERY_WORKER_DETECT_QUORUM_QUEUES",
            "CELERY_BROKER_TRANSPORT_OPTIONS",
        )

        assert values == {
            "CELERY_TASK_CREATE_MISSING_QUEUE_TYPE": "quorum",
            "CELERY_WORKER_DETECT_QUORUM_QUEUES": True,
            "CELERY_BROKER_TRANSPORT_OPTIONS": {},
        }

    def test_redis_gets_a_visibility_timeout_socket_timeouts_and_classic_queues(
        self, tmp_path
    ) -> None:
        env = bare_env(tmp_path, DJANGO_SECRET_KEY=KEY, CELERY_BROKER_URL="redis://redis:6379/0")

        values = loaded(
            env, "CELERY_TASK_CREATE_MISSING_QUEUE_TYPE", "CELERY_BROKER_TRANSPORT_OPTIONS"
        )

        assert values == {
            "CELERY_TASK_CREATE_MISSING_QUEUE_TYPE": "classic",
            "CELERY_BROKER_TRANSPORT_OPTIONS": {
                "visibility_timeout": 3600,
                "socket_timeout": 10,
                "socket_connect_timeout": 5,
            },
        }


class TestDatabasePooler:
    def test_straight_to_postgresql_jit_is_turned_off_at_connection(self, tmp_path) -> None:
        env = bare_env(tmp_path, DJANGO_SECRET_KEY=KEY, DATABASE_URL="postgres://b@db:5432/baton")

        (database,) = loaded(env, "DATABASES")["DATABASES"].values()

        # And psycopg prepares only what asks for it: the engine's function calls.
        assert database["OPTIONS"] == {"options": "-c jit=off", "prepare_threshold": 2**31 - 1}
        assert database.get("DISABLE_SERVER_SIDE_CURSORS", False) is False

    def test_behind_pgbouncer_nothing_outlives_a_transaction(self, tmp_path) -> None:
        env = bare_env(
            tmp_path,
            DJANGO_SECRET_KEY=KEY,
            DATABASE_URL="postgres://b@pgbouncer:6432/baton",
            BATON_DB_POOLER="pgbouncer",
        )

        (database,) = loaded(env, "DATABASES")["DATABASES"].values()

        # PgBouncer refuses the `options` startup parameter; the rest would outlive
        # a transaction on a server connection the next one may not get.
        assert database["OPTIONS"] == {"prepare_threshold": None}
        assert database["DISABLE_SERVER_SIDE_CURSORS"] is True

    def test_an_unknown_pooler_is_refused_by_name(self, tmp_path) -> None:
        env = bare_env(
            tmp_path,
            DJANGO_SECRET_KEY=KEY,
            DATABASE_URL="postgres://b@db:5432/baton",
            BATON_DB_POOLER="pgpool",
        )

        result = load_settings(env, "DATABASES")

        assert result.returncode != 0
        assert "BATON_DB_POOLER must be empty or 'pgbouncer'" in result.stderr


class TestReadReplica:
    def test_without_one_every_query_has_one_database(self, tmp_path) -> None:
        env = bare_env(tmp_path, DJANGO_SECRET_KEY=KEY, DATABASE_URL="postgres://b@db:5432/baton")

        databases = loaded(env, "DATABASES")["DATABASES"]

        assert list(databases) == ["default"]

    def test_one_is_a_second_database_reached_like_the_first(self, tmp_path) -> None:
        env = bare_env(
            tmp_path,
            DJANGO_SECRET_KEY=KEY,
            DATABASE_URL="postgres://b@db:5432/baton",
            DATABASE_REPLICA_URL="postgres://b@db-replica:5432/baton",
        )

        settings = loaded(
            env,
            "DATABASES",
            "BATON_REPLICA_PIN_SECONDS",
            "BATON_REPLICA_RETRY_SECONDS",
            "BATON_REPLICA_MAX_LAG_SECONDS",
        )
        replica = settings["DATABASES"]["replica"]

        assert (replica["HOST"], replica["NAME"]) == ("db-replica", "baton")
        # It gives up connecting soon, and then the pages read the primary.
        assert replica["OPTIONS"] == {
            "options": "-c jit=off",
            "prepare_threshold": 2**31 - 1,
            "connect_timeout": 2,
        }
        # Under tests it is the test database: nothing to create, nothing to flush.
        assert replica["TEST"]["MIRROR"] == "default"
        assert settings["BATON_REPLICA_PIN_SECONDS"] == 5.0
        # A failed replica is left alone for 10 s; one over 30 s behind, until its next check.
        assert settings["BATON_REPLICA_RETRY_SECONDS"] == 10.0
        assert settings["BATON_REPLICA_MAX_LAG_SECONDS"] == 30.0

    @pytest.mark.parametrize(
        ("variables", "message"),
        [
            (
                {"DATABASE_REPLICA_URL": "sqlite:///replica.sqlite3"},
                "DATABASE_REPLICA_URL must be a PostgreSQL URL",
            ),
            (
                {"BATON_REPLICA_PIN_SECONDS": "-1"},
                "BATON_REPLICA_PIN_SECONDS must be a number, 0 or more, not -1",
            ),
            (
                {"BATON_REPLICA_RETRY_SECONDS": "nan"},
                "BATON_REPLICA_RETRY_SECONDS must be a number, 0 or more, not nan",
            ),
            (
                {"BATON_REPLICA_MAX_LAG_SECONDS": "soon"},
                "BATON_REPLICA_MAX_LAG_SECONDS must be a number, not 'soon'",
            ),
        ],
    )
    def test_a_bad_value_is_refused_by_name(self, tmp_path, variables, message) -> None:
        env = bare_env(
            tmp_path, DJANGO_SECRET_KEY=KEY, DATABASE_URL="postgres://b@db:5432/baton", **variables
        )

        result = load_settings(env, "DATABASES")

        assert result.returncode != 0
        assert message in result.stderr
