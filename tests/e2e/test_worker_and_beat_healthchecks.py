"""docker-compose's healthcheck commands, run as Docker would against real processes."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest
import yaml

from tests.e2e.conftest import BIN, ROOT, wait_until
from workflows import heartbeats
from workflows.beat import beat_heartbeat_name

pytestmark = pytest.mark.e2e


def healthcheck(service: str) -> list[str]:
    """The service's healthcheck as an argv, with compose's `$$` unescaped."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    kind, *command = compose["services"][service]["healthcheck"]["test"]
    command = [part.replace("$$", "$") for part in command]
    return ["sh", "-c", command[0]] if kind == "CMD-SHELL" else command


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**env, "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"}
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)


class TestWorkerHealthcheck:
    def test_a_live_worker_passes_and_a_frozen_one_fails(self, workers):
        # In a container the node is celery@<container hostname>; here it is worker-a@<host>.
        env = {**workers.env, "HOSTNAME": socket.gethostname()}
        argv = [
            part.replace("celery@$HOSTNAME", "worker-a@$HOSTNAME") for part in healthcheck("worker")
        ]

        alive = run(argv, env)
        with workers.workers_paused():
            frozen = run(argv, env)

        assert alive.returncode == 0, alive.stdout + alive.stderr
        assert "pong" in alive.stdout
        assert frozen.returncode != 0


class TestSweepLiveness:
    def test_it_passes_while_beat_and_workers_sweep(self, workers):
        result = run([str(BIN / "python"), "manage.py", "liveness", "sweep"], workers.env)

        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.startswith("Alive: the last sweep was")


class TestBeatHealthcheck:
    def test_it_passes_while_this_hosts_beat_ticks_and_fails_without_one(self, workers):
        # The cluster's beats run Baton's scheduler, which records a heartbeat as it ticks.
        wait_until(
            lambda: heartbeats.last_seen(name=beat_heartbeat_name()) is not None,
            timeout=60,
            what="a beat's heartbeat",
        )

        alive = run(healthcheck("beat"), workers.env)
        elsewhere = run([*healthcheck("beat"), "--hostname", "no-beat-here"], workers.env)

        assert alive.returncode == 0, alive.stdout + alive.stderr
        assert alive.stdout.startswith(f"Alive: the last {beat_heartbeat_name()} was")
        assert elsewhere.returncode != 0
        assert "no beat@no-beat-here has been recorded yet" in elsewhere.stderr
