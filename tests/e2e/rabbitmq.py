"""RabbitMQ for end-to-end tests: a virtual host of the tests' own, or a node of their own.

The machine's RabbitMQ (127.0.0.1:5672) is shared, so tests never stop it: they
work in a virtual host of their own (BATON_TEST_RABBITMQ_URL names it; it is
created when missing), and a test that must see the broker go down starts a
private node on free ports in a temporary folder (`RabbitMQNode`) and stops that.

A cluster of workers over either is started with `tests.e2e.clusters.cluster_on`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tests.ports import free_port

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/baton_tests"


def rabbitmq_url() -> str:
    """Return the URL of the tests' virtual host on the shared RabbitMQ."""
    return os.environ.get("BATON_TEST_RABBITMQ_URL", "").strip() or DEFAULT_URL


def ensure_virtual_host(url: str) -> None:
    """Create the virtual host `url` names, and let its user in (both idempotent).

    CI starts from a fresh machine, whose RabbitMQ has only the default host "/".
    """
    parts = urlsplit(url)
    vhost = unquote(parts.path[1:]) or "/"
    user = unquote(parts.username or "guest")
    if vhost == "/":
        return
    rabbitmqctl("add_vhost", vhost)
    rabbitmqctl("set_permissions", "-p", vhost, user, ".*", ".*", ".*")


def rabbitmqctl(*args: str, node: str | None = None, env: dict[str, str] | None = None) -> str:
    """Run `rabbitmqctl` (on `node`, else the machine's own) and return its output."""
    command = ["rabbitmqctl", *(["-n", node] if node else []), "-q", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr or done.stdout}")
    return done.stdout


def queue_types(url: str) -> dict[str, str]:
    """Return each queue's type ("quorum", "classic") in the virtual host `url` names."""
    vhost = unquote(urlsplit(url).path[1:]) or "/"
    listing = rabbitmqctl("list_queues", "-p", vhost, "name", "type", "--no-table-headers")
    return dict(line.split("\t") for line in listing.splitlines() if "\t" in line)


class RabbitMQNode:
    """A RabbitMQ node of the tests' own: its own name, ports and data, in `base`.

    It runs as the `rabbitmq` user (Debian's scripts do so) under the machine's
    Erlang cookie, so `rabbitmqctl -n NODE` reaches it, and serves AMQP on
    127.0.0.1 only, with no plugins.
    """

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.name = f"baton-tests-{self.port}@localhost"
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}//"
        base.mkdir(parents=True, exist_ok=True)
        (base / "rabbitmq.conf").write_text(f"listeners.tcp.local = 127.0.0.1:{self.port}\n")
        (base / "enabled_plugins").write_text("[].\n")
        shutil.chown(base, "rabbitmq", "rabbitmq")
        for path in base.iterdir():
            shutil.chown(path, "rabbitmq", "rabbitmq")
        self.env = {
            **os.environ,
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "RABBITMQ_BASE": str(base),
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(base / "log"),
            "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(base / "pid"),
            # The machine's rabbitmq-env.conf names the shared node: not this one.
            "RABBITMQ_CONF_ENV_FILE": os.devnull,
        }

    def start(self, *, timeout: float = 60) -> None:
        """Start the node and wait until it accepts AMQP connections."""
        server = ["/usr/lib/rabbitmq/bin/rabbitmq-server", "-detached"]
        if os.geteuid() == 0:  # as Debian's own wrapper does: the node runs as rabbitmq
            server = ["runuser", "-u", "rabbitmq", "--", *server]
        subprocess.run(
            server,
            cwd=self.base,
            env=self.env,
            check=True,
            timeout=30,
        )
        deadline = time.monotonic() + timeout
        while not self.accepts_connections():
            if time.monotonic() > deadline:
                log = self.base / "log" / f"{self.name}.log"
                tail = log.read_text()[-2000:] if log.exists() else "(no log)"
                raise AssertionError(f"RabbitMQ node {self.name} did not start: {tail}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the node (its queues and messages stay on disk for the next start)."""
        subprocess.run(
            ["rabbitmqctl", "-n", self.name, "-q", "stop"],
            env=self.env,
            capture_output=True,
            timeout=60,
        )
        deadline = time.monotonic() + 30
        while self.accepts_connections() and time.monotonic() < deadline:
            time.sleep(0.2)

    def accepts_connections(self) -> bool:
        """Return whether the node's AMQP port takes a connection (it opens last at boot)."""
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True
