"""A bounded HTTP load generator: N keep-alive connections to 127.0.0.1, for a fixed time.

Each thread holds one persistent `http.client` connection and sends GET after GET
until the time is up or its request budget is spent, recording each latency.
Only loopback addresses are accepted.
"""

from __future__ import annotations

import http.client
import threading
import time
from dataclasses import dataclass, field

MAX_REQUESTS_PER_CONNECTION = 100_000


@dataclass
class Load:
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def per_second(self) -> float:
        return len(self.latencies_ms) / self.seconds if self.seconds else 0.0


def generate(*, port: int, path: str, cookie: str, connections: int, seconds: float) -> Load:
    """Load http://127.0.0.1:`port``path` from `connections` threads for `seconds`."""
    result = Load()
    lock = threading.Lock()
    barrier = threading.Barrier(connections + 1)
    deadline = [0.0]

    def client() -> None:
        latencies: list[float] = []
        errors: list[str] = []
        link = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        barrier.wait()
        for _ in range(MAX_REQUESTS_PER_CONNECTION):
            if time.monotonic() >= deadline[0]:
                break
            started = time.perf_counter_ns()
            try:
                link.request("GET", path, headers={"Cookie": cookie})
                response = link.getresponse()
                response.read()
            except (OSError, http.client.HTTPException) as error:
                errors.append(f"{type(error).__name__}: {error}")
                link.close()
                link = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                continue
            if response.status != 200:
                errors.append(f"HTTP {response.status}")
                continue
            latencies.append((time.perf_counter_ns() - started) / 1e6)
        link.close()
        with lock:
            result.latencies_ms.extend(latencies)
            result.errors.extend(errors)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(connections)]
    for thread in threads:
        thread.start()
    deadline[0] = time.monotonic() + seconds
    started = time.perf_counter()
    barrier.wait()
    for thread in threads:
        thread.join(timeout=seconds + 60)
    result.seconds = time.perf_counter() - started
    return result
