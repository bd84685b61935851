"""A TCP relay to a broker that a test can make stop answering, as a stuck broker would.

The machine's brokers are shared and never paused: a process under test connects
through a relay of its own instead, and `freeze` stops the relay forwarding a
byte either way while every connection stays open, so the process waits on a
broker that neither answers nor hangs up.
"""

from __future__ import annotations

import selectors
import socket
import threading
from contextlib import closing


class Relay:
    """Forward each connection to 127.0.0.1:`port` to `upstream` (host, port) until frozen,
    while its `with` block runs."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._frozen = threading.Event()
        self._stopped = threading.Event()
        self._sockets: list[socket.socket] = [self._listener]

    def __enter__(self) -> Relay:
        threading.Thread(target=self._serve, name="relay", daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Stop, and close the relay and every connection through it."""
        self._stopped.set()
        for end in self._sockets:
            end.close()

    def freeze(self) -> None:
        """Stop forwarding, for good; the connections stay open."""
        self._frozen.set()

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed on leaving the block
                return
            server = socket.create_connection(self.upstream)
            self._sockets += [client, server]
            threading.Thread(target=self._forward, args=(client, server), daemon=True).start()

    def _forward(self, client: socket.socket, server: socket.socket) -> None:
        """Copy bytes both ways until either side hangs up, or forever once frozen."""
        peers = {client: server, server: client}
        with closing(selectors.DefaultSelector()) as selector:
            for end in peers:
                selector.register(end, selectors.EVENT_READ)
            while not self._stopped.is_set():
                if self._frozen.is_set():
                    self._stopped.wait(0.1)
                    continue
                for key, _ in selector.select(timeout=0.1):
                    try:
                        data = key.fileobj.recv(65536)
                        if not data:
                            return
                        peers[key.fileobj].sendall(data)
                    except OSError:
                        return
