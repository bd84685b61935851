"""The e2e harness ends every process it starts, and blames the test that left one running.

A process that ignores SIGTERM stands for a beat or worker that hangs on its way
out: it must still be gone when its test ends, and that test, not a later one,
must fail.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tests.e2e.conftest as harness
from tests.e2e.conftest import ROOT, Cluster, scaled, start_process, wait_until

pytestmark = pytest.mark.e2e

# A process that ignores SIGTERM and says when it does.
STUBBORN = [
    sys.executable,
    "-c",
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ignoring SIGTERM', flush=True)\n"
    "time.sleep(600)\n",
]


def running(pid: int) -> bool:
    """Whether `pid` is a live process (not gone, not a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def start_stubborn(name: str, tmp_path: Path):
    log = tmp_path / f"{name}.log"
    process = start_process(name, STUBBORN, env=dict(os.environ), log=log)
    wait_until(lambda: b"ignoring SIGTERM" in log.read_bytes(), timeout=30, what=name)
    return process


class TestStopBeat:
    def test_a_beat_that_ignores_sigterm_is_killed_and_named(self, tmp_path, monkeypatch):
        monkeypatch.setattr(harness, "GRACE", 1)
        cluster = Cluster(dict(os.environ), tmp_path)
        beat = start_stubborn("stubborn-beat", tmp_path)
        cluster.beats.append(("stubborn-beat", beat))

        with pytest.raises(AssertionError, match=r"stubborn-beat ignored SIGTERM for [\d.]+s"):
            cluster.stop_beat(beat)

        assert not running(beat.pid)
        assert cluster.beats == []


class TestClusterStop:
    def test_every_process_is_gone_and_the_stubborn_ones_are_named(self, tmp_path, monkeypatch):
        monkeypatch.setattr(harness, "GRACE", 1)
        cluster = Cluster(dict(os.environ), tmp_path)
        stubborn = start_stubborn("stubborn-worker", tmp_path)
        polite = start_process(
            "polite",
            [sys.executable, "-c", "import time; time.sleep(600)"],
            env=dict(os.environ),
            log=tmp_path / "polite.log",
        )
        cluster.workers["stubborn-worker"] = stubborn
        cluster.beats.append(("polite", polite))

        with pytest.raises(AssertionError, match=r"^stubborn-worker ignored SIGTERM"):
            cluster.stop()

        assert not running(stubborn.pid)
        assert not running(polite.pid)


LEAKY_TESTS = """
import json
import os
import time

from tests.e2e.conftest import start_process


def test_leaves_a_process(tmp_path):
    log = tmp_path / "stubborn.log"
    argv = json.loads(os.environ["BATON_TEST_STUBBORN"])
    start_process("stubborn", argv, env=dict(os.environ), log=log)
    while b"ignoring SIGTERM" not in log.read_bytes():
        time.sleep(0.1)


def test_the_next_test_passes():
    pass
"""


class TestATestThatLeavesAProcessRunning:
    def test_fails_on_its_own_and_the_process_is_ended(self, tmp_path):
        (tmp_path / "conftest.py").write_text(
            "from tests.e2e.conftest import pytest_runtest_teardown  # noqa: F401\n"
        )
        (tmp_path / "test_leaky.py").write_text(LEAKY_TESTS)
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "BATON_TEST_STUBBORN": json.dumps(STUBBORN),
        }

        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:randomly",
                "-p",
                "no:cacheprovider",
                "-o",
                "addopts=",
                "--rootdir",
                str(tmp_path),
                "test_leaky.py",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=scaled(120),
        )

        output = result.stdout + result.stderr
        assert "1 passed, 1 error" in output or "2 passed, 1 error" in output, output
        assert "ERROR at teardown of test_leaves_a_process" in output, output
        (pid,) = re.findall(r"left stubborn \(pid (\d+)\) running; ended it now", output)
        assert not running(int(pid))
