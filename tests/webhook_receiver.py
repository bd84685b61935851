"""A real HTTP receiver for outbound webhooks, on loopback in a thread: it verifies each
message's Standard Webhooks signature, as a subscriber would, and can fail on purpose."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook


@dataclass
class Received:
    message_id: str
    payload: dict[str, Any]


@dataclass
class Receiver:
    """What arrived: `verified` messages in order, and how many were refused or failed."""

    secret: str = ""
    # Answer 500 to this many requests first (before verifying them).
    fail_first: int = 0
    # Keep the answer to this request (counted from 1) until `release` is set, after
    # verifying it: the sender's worker can be killed while it waits.
    hold: int = 0
    release: threading.Event = field(default_factory=threading.Event)
    verified: list[Received] = field(default_factory=list)
    requests: int = 0
    bad_signatures: int = 0
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, headers: dict[str, str], body: bytes) -> int:
        with self.lock:
            self.requests += 1
            number = self.requests
            if number <= self.fail_first:
                return 500
            try:
                payload = Webhook(self.secret).verify(body, headers)
            except Exception:
                self.bad_signatures += 1
                return 400
            self.verified.append(Received(message_id=headers["webhook-id"], payload=payload))
        if number == self.hold:
            self.release.wait(timeout=120)
        return 204

    def types(self) -> list[str]:
        with self.lock:
            return [message.payload["type"] for message in self.verified]

    def distinct(self) -> dict[str, Received]:
        """Return the verified messages by id: what a receiver that drops repeats keeps."""
        with self.lock:
            return {message.message_id: message for message in self.verified}


@contextmanager
def receiving(*, secret: str = "", fail_first: int = 0, hold: int = 0) -> Iterator[Receiver]:
    """Listen on 127.0.0.1 on a free port until the block ends."""
    receiver = Receiver(secret=secret, fail_first=fail_first, hold=hold)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            status = receiver.answer(
                {key.lower(): value for key, value in self.headers.items()}, body
            )
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/baton"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.release.set()
        server.shutdown()
        server.server_close()
        thread.join()
