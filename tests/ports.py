"""Ports on 127.0.0.1 for the servers the tests start (PostgreSQL, PgBouncer, gunicorn, ...).

A port the kernel picks for `bind(("127.0.0.1", 0))` comes from its ephemeral range,
the range every outgoing connection takes its own local port from. Released before the
server binds it, that port can be taken in between by any connection the machine opens,
or handed to a second test process probing at the same moment (the unit tests run in
two). So a port is drawn at random from below that range and checked free.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

# Linux's default ephemeral range starts at 32768; /proc says where it starts here.
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10_000


def _first_ephemeral() -> int:
    try:
        return int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on now, outside the ephemeral range."""
    highest = max(_first_ephemeral(), _LOWEST + 1_000)
    for _ in range(200):
        port = random.randrange(_LOWEST, highest)  # nosec B311: a port, not a secret
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port on 127.0.0.1 between {_LOWEST} and {highest}")
