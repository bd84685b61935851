"""Ports on 127.0.0.1 for the servers the tests start (PostgreSQL, PgBouncer, gunicorn, ...).

A port the kernel picks for `bind(("127.0.0.1", 0))` comes from its ephemeral range,
the range every outgoing connection takes its own local port from. Released before the
server binds it, that port can be taken in between by any connection the machine opens,
or handed to a second test process probing at the same moment (the unit tests run in
two). So a port is drawn at random from outside that range (from the OS's randomness:
pytest-randomly reseeds `random` alike in every process), checked free, and never handed
out twice by one process (a server given it may not have bound it yet).
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LINUX_DEFAULT = (32_768, 60_999)
_LOWEST = 10_000  # below: ports other services on the machine are configured with
_draw = random.SystemRandom()
_handed_out: set[int] = set()


def _ephemeral() -> tuple[int, int]:
    try:
        first, last = map(int, _EPHEMERAL.read_text().split())
    except (OSError, ValueError):
        return _LINUX_DEFAULT
    return first, last


def _outside_ephemeral() -> range:
    first, last = _ephemeral()
    below, above = range(_LOWEST, first), range(last + 1, 65_536)
    return below if len(below) >= len(above) else above


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on now, outside the ephemeral
    range, and not returned before by this process."""
    ports = _outside_ephemeral()
    for _ in range(200):
        port = _draw.choice(ports)
        if port in _handed_out:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port on 127.0.0.1 in {ports.start}-{ports.stop - 1}")
