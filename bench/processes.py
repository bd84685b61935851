"""Child processes of a benchmark (Celery workers, gunicorn), stopped whatever happens.

Each child runs in its own session, so it can be stopped whole (a worker and its
pool, gunicorn and its workers) and so a Ctrl-C in the terminal reaches only the
benchmark, whose `finally` then stops the children it started, by their ids.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

BIN = Path(sys.executable).parent
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
ROOT = Path(__file__).resolve().parent.parent


def stop_on_signals() -> None:
    """Turn SIGINT and SIGTERM into KeyboardInterrupt, so `finally` blocks stop the children.

    SIGINT too, explicitly: a process started in the background by a shell without
    job control inherits SIGINT ignored, and Python then installs no handler for it.
    """

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    for number in _STOP_SIGNALS:
        signal.signal(number, interrupt)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(condition: Callable[[], object], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


class Children:
    """Start named child processes; stop every one of them on leaving the `with` block."""

    def __init__(self, *, env: dict[str, str], logs: Path) -> None:
        self.env = env
        self.logs = logs
        self.logs.mkdir(parents=True, exist_ok=True)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def __enter__(self) -> Children:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop_all()

    def log_of(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def start(self, name: str, argv: list[str], *, env: dict[str, str] | None = None) -> int:
        """Start `argv` as `name`, logging to logs/<name>.log; return the log's offset."""
        log_path = self.log_of(name)
        offset = log_path.stat().st_size if log_path.exists() else 0
        with open(log_path, "ab") as log:
            self.processes[name] = subprocess.Popen(
                argv,
                cwd=ROOT,
                env={**self.env, **(env or {})},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return offset

    def wait_for_log(self, name: str, text: bytes, *, offset: int, timeout: float = 60) -> None:
        process = self.processes[name]

        def ready() -> bool:
            if process.poll() is not None:
                tail = self.log_of(name).read_bytes()[offset:][-2000:].decode(errors="replace")
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{tail}")
            return text in self.log_of(name).read_bytes()[offset:]

        wait_until(ready, timeout=timeout, what=f"{name} to start")

    def stop(self, name: str) -> None:
        process = self.processes.pop(name, None)
        if process is not None:
            _stop(process)

    def stop_all(self) -> None:
        # A second Ctrl-C or SIGTERM must not cut the clean-up short and orphan a child.
        previous = {number: signal.signal(number, signal.SIG_IGN) for number in _STOP_SIGNALS}
        try:
            for name in list(self.processes):
                self.stop(name)
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def celery_worker(children: Children, name: str, *, queue: str) -> None:
    """Start one worker process of Baton's Celery app (one pool process), with the bench tasks."""
    offset = children.start(
        name,
        [
            str(BIN / "celery"),
            "-A",
            "config",
            "worker",
            "-n",
            f"{name}@%h",
            "--concurrency=1",
            "-Q",
            queue,
            "--include",
            "bench.tasks",
            "--without-mingle",
            "--without-gossip",
            "--loglevel=INFO",
        ],
    )
    children.wait_for_log(name, b" ready.", offset=offset)


def gunicorn(
    children: Children,
    name: str,
    *,
    database_url: str,
    workers: int,
    threads: int,
    env: dict[str, str] | None = None,
) -> int:
    """Serve Baton (and the bare page) with gunicorn on 127.0.0.1, with `env` added to its
    environment; return its port."""
    port = free_port()
    offset = children.start(
        name,
        [
            str(BIN / "gunicorn"),
            "config.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--worker-class",
            "gthread",
            "--keep-alive",
            "30",
        ],
        env={"DATABASE_URL": database_url, **(env or {})},
    )
    children.wait_for_log(name, b"Booting worker", offset=offset)

    def answers() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    wait_until(answers, timeout=30, what=f"{name} to listen")
    return port
