"""Metrics and traces from real processes: gunicorn, a Celery worker and beat.

A run is started over the API (gunicorn, two processes), its steps run on a real
worker (two pool processes) with one step retried by the sweep (beat). Then both
/metrics endpoints are scraped as Prometheus would, and the spans every process
exported over OTLP/HTTP are read by a small OTLP receiver this test runs, so the
traces travel the way they do in production: the standard OTEL_* variables, the
OTLP exporter, Celery message headers and the context stored on the run.

These processes are this module's own; it runs before the shared cluster starts
(see conftest), so no other worker takes its steps.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from celery import current_app
from django.contrib.auth.models import User
from django.db import connection
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import BIN, ROOT, end_processes, wait_until
from tests.ports import free_port
from workflows.models import WorkflowRun
from workflows.states import RunState
from workflows.tokens import issue_token

# Committed rows, seen by the processes (and the database set up for this module alone).
pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

TOKEN = "e2e-metrics-token-0123456789abcdef"


class Receiver:
    """An OTLP/HTTP trace receiver: keeps every span it is sent, with its service's name."""

    def __init__(self) -> None:
        self.spans: list[dict] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.keep(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def keep(self, request: ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            service = next(
                a.value.string_value
                for a in resource_spans.resource.attributes
                if a.key == "service.name"
            )
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    attributes = {a.key: _value(a.value) for a in span.attributes}
                    with self.lock:
                        self.spans.append(
                            {
                                "service": service,
                                "name": span.name,
                                "kind": span.kind,
                                "trace": span.trace_id.hex(),
                                "id": span.span_id.hex(),
                                "parent": span.parent_span_id.hex(),
                                "attributes": attributes,
                            }
                        )

    def named(self, prefix: str) -> list[dict]:
        with self.lock:
            return [span for span in self.spans if span["name"].startswith(prefix)]


def _value(value) -> object:
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None


class Processes:
    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env, self.logs = env, logs
        self.running: list[subprocess.Popen] = []

    def spawn(self, name: str, command: list[str], **env: str) -> Path:
        log = self.logs / f"{name}.log"
        with open(log, "ab") as output:
            self.running.append(
                subprocess.Popen(
                    command,
                    cwd=ROOT,
                    env={**self.env, **env},
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        return log

    def stop(self) -> None:
        end_processes(self.running, grace=20)


@pytest.fixture(scope="module")
def observed(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[dict]:
    """gunicorn, a worker and a beat exporting traces to a receiver, with metrics on."""
    with django_db_blocker.unblock():
        if connection.vendor != "postgresql":
            pytest.fail("End-to-end tests need PostgreSQL: set DATABASE_URL (see README).")
    receiver = Receiver()
    database = connection.settings_dict
    logs = tmp_path_factory.mktemp("observability")
    (logs / "worker-metrics").mkdir()
    web_port, worker_port = free_port(), free_port()
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{database['USER']}:{database['PASSWORD'] or ''}@{database['HOST']}:"
            f"{database['PORT']}/{database['NAME']}"
        ),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "BATON_SWEEP_INTERVAL": "0.5",
        "BATON_WORKFLOW_MODULES": "workflows.examples.order,tests.workflows.definitions",
        "BATON_METRICS_TOKEN": TOKEN,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    current_app.control.purge()
    processes = Processes(env, logs)
    try:
        processes.spawn(
            "web",
            [
                str(BIN / "gunicorn"),
                "config.wsgi:application",
                "--workers",
                "2",
                "--bind",
                f"127.0.0.1:{web_port}",
            ],
            OTEL_SERVICE_NAME="baton-web",
        )
        worker_log = processes.spawn(
            "worker",
            [
                str(BIN / "celery"),
                "-A",
                "config",
                "worker",
                "-n",
                "observed@%h",
                "--concurrency=2",
                "-Q",
                "baton.steps,baton.sweep",
                "--without-mingle",
                "--without-gossip",
                "--loglevel=INFO",
            ],
            OTEL_SERVICE_NAME="baton-worker",
            BATON_METRICS_PORT=str(worker_port),
            BATON_METRICS_ADDRESS="127.0.0.1",
            PROMETHEUS_MULTIPROC_DIR=str(logs / "worker-metrics"),
        )
        processes.spawn(
            "beat",
            [
                str(BIN / "celery"),
                "-A",
                "config",
                "beat",
                "-S",
                "celery.beat:PersistentScheduler",
                "-s",
                str(logs / "beat-schedule"),
            ],
            OTEL_SERVICE_NAME="baton-beat",
        )
        wait_until(lambda: b" ready." in worker_log.read_bytes(), timeout=60, what="worker up")
        wait_until(lambda: _answers(web_port), timeout=60, what="gunicorn up")
        yield {"receiver": receiver, "web": web_port, "worker": worker_port, "logs": logs}
    finally:
        processes.stop()
        receiver.server.shutdown()


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
            return True
    except OSError:
        return False


def scrape(port: int, token: str = TOKEN) -> dict[tuple[str, tuple], float]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.fixture(scope="module")
def finished_run(observed, django_db_blocker) -> WorkflowRun:
    """A test_linear run started over the API, its second step failing twice first."""
    with django_db_blocker.unblock():
        operator = User.objects.create_user("obs-operator", is_staff=True)
        _, secret = issue_token(user=operator)
    request = urllib.request.Request(
        f"http://127.0.0.1:{observed['web']}/api/v1/workflows",
        data=json.dumps(
            {"type": "test_linear", "input": {"simulate": {"second": "flaky"}}}
        ).encode(),
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        run_id = json.loads(answer.read())["id"]

    def state() -> str:
        with django_db_blocker.unblock():
            return WorkflowRun.objects.get(pk=run_id).state

    wait_until(lambda: state() == RunState.SUCCEEDED, timeout=60, what="the run to succeed")
    with django_db_blocker.unblock():
        return WorkflowRun.objects.get(pk=run_id)


class TestMetricsAfterARun:
    def test_the_workers_port_counts_every_attempt_retry_and_the_runs_end(
        self, observed, finished_run
    ):
        second = (("kind", "forward"), ("node", "second"), ("type", "test_linear"))

        wait_until(
            lambda: scrape(observed["worker"]).get(("baton_step_attempts_total", second)) == 3,
            timeout=10,
            what="three attempts of the second step on the worker's port",
        )
        found = scrape(observed["worker"])

        assert found[("baton_step_retries_total", second)] == 2
        ended = (("state", "succeeded"), ("type", "test_linear"))
        assert found[("baton_runs_ended_total", ended)] == 1
        assert (
            found[
                (
                    "baton_step_duration_seconds_count",
                    (*second[:2], ("outcome", "errored"), second[2]),
                )
            ]
            == 2
        )
        assert found[("baton_sweep_duration_seconds_count", ())] >= 1

    def test_the_web_apps_endpoint_counts_the_start_and_reads_the_gauges(
        self, observed, finished_run
    ):
        found = scrape(observed["web"])

        assert found[("baton_runs_started_total", (("type", "test_linear"),))] == 1
        assert found[("baton_due_steps", ())] == 0
        assert ("baton_open_human_tasks", (("sla", "overdue"),)) in found

    @pytest.mark.parametrize("endpoint", ["web", "worker"])
    def test_a_scrape_without_the_token_is_refused(self, observed, endpoint):
        with pytest.raises(urllib.error.HTTPError) as refused:
            scrape(observed[endpoint], token="wrong")

        assert refused.value.code == 401


class TestOneTraceAcrossProcesses:
    def test_the_request_the_start_and_every_attempt_share_the_runs_trace(
        self, observed, finished_run
    ):
        receiver = observed["receiver"]
        wait_until(
            lambda: len(receiver.named("baton.step")) >= 5, timeout=20, what="five step spans"
        )

        [start] = receiver.named("baton.start")
        [request] = [s for s in receiver.spans if s["id"] == start["parent"]]
        steps = receiver.named("baton.step")

        assert start["service"] == request["service"] == "baton-web"
        assert request["kind"] == 2  # SPAN_KIND_SERVER: the API call that started the run
        assert start["attributes"]["baton.run_id"] == str(finished_run.pk)
        assert finished_run.trace_context["traceparent"].split("-")[1] == start["trace"]
        assert sorted((s["name"], s["attributes"]["baton.attempt"]) for s in steps) == [
            ("baton.step first", 1),
            ("baton.step second", 1),
            ("baton.step second", 2),
            ("baton.step second", 3),
            ("baton.step third", 1),
        ]
        for span in steps:
            assert span["service"] == "baton-worker"
            assert span["trace"] == start["trace"]
            assert span["parent"] == start["id"]
        outcomes = sorted(s["attributes"]["baton.outcome"] for s in steps)
        assert outcomes == ["completed", "completed", "completed", "errored", "errored"]


class TestLogs:
    def test_the_workers_lines_are_json_celerys_own_included_with_run_node_and_trace(
        self, observed, finished_run
    ):
        text = (observed["logs"] / "worker.log").read_text()

        lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]

        assert any(
            line["name"] == "celery.apps.worker" and line["message"].endswith(" ready.")
            for line in lines
        )
        [step] = [
            line
            for line in lines
            if line["message"] == "step.completed" and line.get("node") == "third"
        ]
        assert step["run_id"] == str(finished_run.pk)
        assert step["levelname"] == "INFO"
        assert step["trace_id"] == finished_run.trace_context["traceparent"].split("-")[1]
