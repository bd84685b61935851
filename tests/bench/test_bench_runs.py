"""The benchmark suite runs to its end and reports every figure (never judging a value).

It runs `python -m bench --tiny` in a subprocess against the tests' PostgreSQL
server (in databases of its own, dropped afterwards) and broker, with real
Celery workers and gunicorn, so it is marked e2e.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from bench.report import CATALOGUE
from tests.e2e.conftest import scaled

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], dict]:
    database = settings.DATABASES["default"]
    if database["ENGINE"] != settings.POSTGRESQL_ENGINE:
        pytest.fail("The benchmarks need PostgreSQL: set DATABASE_URL (see README).")
    if settings.CELERY_BROKER_URL.startswith("filesystem"):
        pytest.fail("The benchmarks need a broker server: set CELERY_BROKER_URL (see README).")
    out = tmp_path_factory.mktemp("bench") / "results.json"
    server = (
        f"postgres://{database['USER']}:{database['PASSWORD'] or ''}@{database['HOST']}:"
        f"{database['PORT']}/postgres"
    )
    env = {
        **os.environ,
        "DATABASE_URL": server,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "BATON_VAR_DIR": str(out.parent),
    }
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--tiny",
            "--json",
            str(out),
            "--database",
            f"test_{database['NAME']}_bench",
            "--cleanup",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(600),
    )
    return run, json.loads(out.read_text()) if out.exists() else {}


@pytest.mark.timeout(scaled(660))
class TestTinyBenchmarkRun:
    def test_every_group_runs_to_its_end(self, tiny_run):
        run, _ = tiny_run

        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    def test_the_table_lists_every_figure(self, tiny_run):
        run, _ = tiny_run

        missing = [spec.what for spec in CATALOGUE.values() if spec.what not in run.stdout]
        assert missing == []
        assert "not measured" not in run.stdout

    def test_the_json_holds_every_figure_with_a_value(self, tiny_run):
        _, document = tiny_run

        figures = document["figures"]
        assert sorted(figures) == sorted(CATALOGUE)
        assert [key for key, figure in figures.items() if figure["value"] is None] == []
        assert document["meta"]["failures"] == {}
