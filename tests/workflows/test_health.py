"""/healthz and /readyz, as a container healthcheck or a load balancer probes them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import connections
from django.db.migrations.recorder import MigrationRecorder
from django.db.utils import load_backend
from django.utils import timezone

from tests.ports import free_port
from workflows import health, heartbeats


@pytest.fixture
def swept(db) -> None:
    """A sweep ran a moment ago."""
    heartbeats.record(name=heartbeats.SWEEP, now=timezone.now())


@pytest.fixture
def database_down(monkeypatch, db) -> Iterator[None]:
    """Point the readiness checks at a database server that is not there."""
    settings_dict = {**connections["default"].settings_dict, "PORT": str(free_port())}
    down = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, alias="down")
    monkeypatch.setattr(health, "connections", {"default": down})
    yield
    down.close()


class TestHealthz:
    def test_the_process_answers_alive_without_touching_the_database(self, client):
        # No `db` fixture: pytest-django fails any database access in this test.
        response = client.get("/healthz")

        assert response.status_code == 200
        assert response.json() == {"status": "alive"}
        assert "no-cache" in response["Cache-Control"]

    def test_it_answers_a_probe_by_any_host_even_behind_the_https_redirect(self, client, settings):
        settings.SECURE_SSL_REDIRECT = True
        settings.ALLOWED_HOSTS = ["baton.example.com"]

        response = client.get("/healthz", HTTP_HOST="10.0.0.7:8000")

        assert response.status_code == 200

    def test_it_refuses_to_be_posted_to_and_says_what_it_allows(self, client):
        response = client.post("/healthz")

        assert response.status_code == 405
        assert response["Allow"] == "GET, HEAD"


@pytest.mark.django_db
class TestReadyz:
    def test_ready_when_database_broker_migrations_and_sweep_are_fine(self, client, swept):
        response = client.get("/readyz")

        assert response.status_code == 200
        assert response.json() == {
            "status": "ready",
            "checks": {"database": "ok", "migrations": "ok", "sweep": "ok", "broker": "ok"},
        }

    def test_an_unreachable_database_is_named_without_its_address(
        self, client, swept, database_down
    ):
        response = client.get("/readyz")

        assert response.status_code == 503
        body = response.json()
        assert body["failed"] == ["database", "migrations", "sweep"]
        assert body["checks"]["database"] == "failed: OperationalError (see the web app's log)"
        assert body["checks"]["sweep"] == "not checked: the database is unreachable"
        assert "127.0.0.1" not in response.content.decode()

    def test_a_migration_not_applied_is_named(self, client, swept):
        applied = MigrationRecorder.Migration.objects.filter(app="workflows")
        latest = max(applied.values_list("name", flat=True))
        applied.filter(name=latest).delete()

        response = client.get("/readyz")

        assert response.status_code == 503
        assert response.json()["failed"] == ["migrations"]
        assert response.json()["checks"]["migrations"] == (
            f"failed: 1 not applied: workflows.{latest}"
        )

    def test_a_stale_sweep_says_how_stale_and_what_to_look_at(self, client, settings):
        settings.BATON_SWEEP_STALE_AFTER = 60
        heartbeats.record(name=heartbeats.SWEEP, now=timezone.now() - timedelta(seconds=300))

        response = client.get("/readyz")

        assert response.status_code == 503
        assert response.json()["failed"] == ["sweep"]
        reason = response.json()["checks"]["sweep"]
        assert reason.startswith("failed: the last sweep was 30")
        assert reason.endswith("is beat running, and a worker consuming baton.sweep?")

    def test_no_sweep_ever_is_not_ready(self, client):
        response = client.get("/readyz")

        assert response.status_code == 503
        assert response.json()["checks"]["sweep"] == (
            "failed: no sweep has been recorded yet: is beat running, and a worker consuming "
            "baton.sweep?"
        )

    def test_an_unreachable_broker_is_named(self, client, swept, monkeypatch):
        # Celery reads CELERY_BROKER_URL from the environment before its settings.
        monkeypatch.setenv("CELERY_BROKER_URL", f"redis://127.0.0.1:{free_port()}/0")

        response = client.get("/readyz")

        assert response.status_code == 503
        assert response.json()["failed"] == ["broker"]
        assert response.json()["checks"]["broker"].startswith("failed: OperationalError")
