"""Django's deployment check passes on the production shape, docker-compose.yml's environment.

The environment is read from docker-compose.yml itself, as compose would fill it
in with only DJANGO_SECRET_KEY supplied, so the check follows what is shipped.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parents[2]
# ${NAME}, ${NAME:-default} and ${NAME:?error}, as compose reads them.
INTERPOLATION = re.compile(r"\$\{(?P<name>\w+)(?::(?P<kind>[-?])(?P<rest>[^}]*))?\}")


def compose_environment(supplied: dict[str, str]) -> dict[str, str]:
    """The web service's environment in docker-compose.yml, filled in from `supplied`."""

    def fill(match: re.Match[str]) -> str:
        name, kind, rest = match["name"], match["kind"], match["rest"]
        if supplied.get(name):
            return supplied[name]
        if kind == "?":
            raise AssertionError(f"compose would refuse to start: {name}: {rest}")
        return rest if kind == "-" else ""

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    environment = compose["services"]["web"]["environment"]
    return {name: INTERPOLATION.sub(fill, str(value)) for name, value in environment.items()}


def deploy_check(environment: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={
            "PATH": os.environ["PATH"],
            "BATON_VAR_DIR": str(tmp_path),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            **environment,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def production() -> dict[str, str]:
    return compose_environment(
        {
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "BATON_AUDIT_KEY": secrets.token_urlsafe(50),
            "BATON_DATA_KEYS": Fernet.generate_key().decode(),
        }
    )


class TestDeployCheck:
    def test_is_clean_with_the_production_environment(self, production, tmp_path):
        result = deploy_check(production, tmp_path)

        assert result.returncode == 0, result.stderr
        assert "System check identified no issues" in result.stdout

    def test_compose_turns_https_on_behind_its_proxy(self, production):
        assert production["DJANGO_SECURE_SSL_REDIRECT"] == "true"
        assert production["DJANGO_SECURE_PROXY_SSL_HEADER"] == "X-Forwarded-Proto: https"
        assert production["DJANGO_ALLOWED_HOSTS"] == "localhost"
        assert production["DJANGO_CSRF_TRUSTED_ORIGINS"] == "https://localhost"

    def test_compose_refuses_to_start_without_a_secret_key(self):
        with pytest.raises(AssertionError, match="DJANGO_SECRET_KEY: set DJANGO_SECRET_KEY"):
            compose_environment({})

    def test_compose_refuses_to_start_without_an_audit_key(self):
        with pytest.raises(AssertionError, match="BATON_AUDIT_KEY: set BATON_AUDIT_KEY"):
            compose_environment({"DJANGO_SECRET_KEY": secrets.token_urlsafe(50)})

    def test_compose_refuses_to_start_without_keys_for_personal_data(self):
        with pytest.raises(AssertionError, match="BATON_DATA_KEYS: set BATON_DATA_KEYS"):
            compose_environment(
                {
                    "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
                    "BATON_AUDIT_KEY": secrets.token_urlsafe(50),
                }
            )

    def test_no_keys_for_personal_data_is_an_error(self, production, tmp_path):
        environment = {k: v for k, v in production.items() if k != "BATON_DATA_KEYS"}

        result = deploy_check(environment, tmp_path)

        assert result.returncode != 0
        assert "workflows.E010" in result.stderr
        assert "BATON_DATA_KEYS is not set" in result.stderr

    def test_an_audit_key_derived_from_the_secret_key_is_reported(self, production, tmp_path):
        environment = {k: v for k, v in production.items() if k != "BATON_AUDIT_KEY"}

        result = deploy_check(environment, tmp_path)

        assert result.returncode != 0
        assert "approvals.W001" in result.stderr

    @pytest.mark.parametrize(
        ("name", "value", "warning"),
        [
            ("DJANGO_SECURE_HSTS_SECONDS", "0", "security.W004"),
            ("DJANGO_SECURE_SSL_REDIRECT", "false", "security.W008"),
            ("DJANGO_SESSION_COOKIE_SECURE", "false", "security.W012"),
            ("DJANGO_CSRF_COOKIE_SECURE", "false", "security.W016"),
        ],
    )
    def test_each_https_setting_turned_off_is_reported(
        self, production, tmp_path, name, value, warning
    ):
        result = deploy_check({**production, name: value}, tmp_path)

        assert result.returncode != 0
        assert warning in result.stderr

    def test_is_clean_with_no_https_variable_set(self, tmp_path):
        environment = {
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "DJANGO_ALLOWED_HOSTS": "baton.example.com",
            "BATON_AUDIT_KEY": secrets.token_urlsafe(50),
            "BATON_DATA_KEYS": Fernet.generate_key().decode(),
        }

        result = deploy_check(environment, tmp_path)

        assert result.returncode == 0, result.stderr
        assert "System check identified no issues" in result.stdout

    def test_the_secure_defaults_hold_without_the_audit_key_too(self, tmp_path):
        environment = {
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "DJANGO_ALLOWED_HOSTS": "baton.example.com",
            "BATON_DATA_KEYS": Fernet.generate_key().decode(),
        }

        result = deploy_check(environment, tmp_path)

        assert "approvals.W001" in result.stderr
        for warning in ("W004", "W008", "W012", "W016"):
            assert f"security.{warning}" not in result.stderr

    def test_compose_trusts_its_one_proxy_for_the_clients_address(self, production):
        assert production["BATON_TRUSTED_PROXY_COUNT"] == "1"

    def test_debug_left_out_stays_off(self, production, tmp_path):
        environment = {name: value for name, value in production.items() if name != "DJANGO_DEBUG"}

        result = deploy_check(environment, tmp_path)

        assert result.returncode == 0, result.stderr
