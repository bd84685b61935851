"""What real worker and beat processes write to their logs while nothing happens."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.e2e


class TestIdleLogs:
    def test_idle_sweeps_leave_no_line_in_the_worker_and_beat_logs(self, workers):
        time.sleep(3)  # beats send a sweep every 0.5 s (see conftest)

        logs = {path.name: path.read_text() for path in workers.logs.glob("*.log")}

        assert {"beat-a.log", "beat-b.log", "worker-a.log", "worker-b.log"} <= set(logs)
        noisy = {
            name: line
            for name, text in logs.items()
            for line in text.splitlines()
            if "Task baton.sweep[" in line or "Sending due task baton-sweep" in line
        }
        assert noisy == {}
