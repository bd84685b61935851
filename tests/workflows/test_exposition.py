"""/metrics: refused unless configured and asked with the token; gauges read at scrape time."""

from __future__ import annotations

import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tests.ports import free_port
from workflows import exposition
from workflows.states import StepState

pytestmark = pytest.mark.django_db

TOKEN = "metrics-token-for-tests-0123456789"


def samples(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


@pytest.fixture
def token(settings) -> str:
    settings.BATON_METRICS_TOKEN = TOKEN
    return TOKEN


class TestTheWebEndpoint:
    def test_is_off_until_a_token_is_set_and_says_how_to_turn_it_on(self, client):
        response = client.get("/metrics")

        assert response.status_code == 404
        assert b"set BATON_METRICS_TOKEN" in response.content

    def test_refuses_a_scrape_without_the_token(self, client, token):
        response = client.get("/metrics", headers={"Authorization": "Bearer wrong"})

        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert b"Authorization: Bearer" in response.content

    def test_answers_the_token_by_any_host_name_with_the_engine_and_inbox_gauges(
        self, client, token
    ):
        response = client.get(
            "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, HTTP_HOST="web:8000"
        )

        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/plain; version=")
        found = samples(response.content)
        assert found[("baton_due_steps", ())] == 0
        assert found[("baton_oldest_due_step_age_seconds", ())] == 0
        assert ("baton_open_human_tasks", (("sla", "overdue"),)) in found

    def test_refuses_other_methods(self, client, token):
        response = client.post("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})

        assert response.status_code == 405


class TestGaugesReadAtScrapeTime:
    def test_the_due_backlog_and_how_late_its_oldest_step_is(self, start, token, client):
        run = start("test_linear")
        run.steps.filter(state=StepState.SCHEDULED).update(
            due_at=timezone.now() - timedelta(minutes=5)
        )

        found = samples(
            client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).content
        )

        assert found[("baton_due_steps", ())] == 1
        assert 300 <= found[("baton_oldest_due_step_age_seconds", ())] < 360

    def test_open_human_tasks_by_sla_and_queued_by_group(self, start_expense, groups, token):
        run = start_expense(amount="5000.00")  # the manager's task first
        task = run.human_tasks.get()
        task.due_at = timezone.now() - timedelta(hours=1)
        task.save(update_fields=["due_at"])

        found = samples(exposition.exposition(with_database=True))

        assert found[("baton_open_human_tasks", (("sla", "overdue"),))] == 1
        assert found[("baton_open_human_tasks", (("sla", "on_time"),))] == 0
        assert all(("baton_queued_human_tasks", (("group", name),)) in found for name in groups)

    def test_cost_a_fixed_number_of_queries_whatever_is_due(self, start, token):
        def queries() -> int:
            with CaptureQueriesContext(connection) as captured:
                exposition.exposition(with_database=True)
            return len(captured)

        empty = queries()
        for _ in range(5):
            start("test_linear").steps.update(due_at=timezone.now() - timedelta(minutes=1))

        # Backlog and oldest due step; four SLA counts; the groups, then one count each.
        assert empty == 2 + 4 + 1 + Group.objects.count()
        assert queries() == empty


class TestAWorkersPort:
    def test_serves_its_metrics_to_the_token_only(self, settings, token):
        settings.BATON_METRICS_PORT = 0
        assert exposition.serve_worker_metrics() is None  # no port asked for: none opened
        settings.BATON_METRICS_PORT = free_port()
        settings.BATON_METRICS_ADDRESS = "127.0.0.1"
        server = exposition.serve_worker_metrics()
        url = f"http://127.0.0.1:{settings.BATON_METRICS_PORT}/metrics"
        try:
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(url, timeout=5)
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
            with urllib.request.urlopen(request, timeout=5) as answer:
                body = answer.read()
        finally:
            server.shutdown()
            server.server_close()

        assert refused.value.code == 401
        assert b"# TYPE baton_runs_started_total counter" in body
        assert b"baton_due_steps" not in body  # the web app serves the database's gauges
