"""A TCP proxy in front of the test PostgreSQL server that a test can take down and bring back.

Other tests share the server, so it is never restarted; a process that connects through the
proxy sees what a restart looks like from the client side instead: every connection drops, and
new ones fail until :meth:`Proxy.up` (with the server itself untouched).
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading

from sqlalchemy.engine import make_url


class Proxy:
    """Forwards ``127.0.0.1:<port>`` to ``host:port`` until :meth:`down` (then refuses)."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._up = threading.Event()
        self._up.set()
        self._closed = False
        self.dropped = 0
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    @classmethod
    def for_url(cls, url: str) -> Proxy:
        parsed = make_url(url)
        return cls(parsed.host or "127.0.0.1", parsed.port or 5432)

    def url(self, url: str) -> str:
        """``url`` with its host and port replaced by the proxy's."""
        rendered: str = make_url(url).set(host="127.0.0.1", port=self.port).render_as_string(False)
        return rendered

    def down(self) -> None:
        """Drop every connection and refuse new ones (the client sees the server vanish)."""
        self._up.clear()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            self.dropped += 1
            for sock in pair:
                _close(sock)

    def up(self) -> None:
        """Accept and forward connections again."""
        self._up.set()

    def close(self) -> None:
        self._closed = True
        self.down()
        _close(self._listener)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._up.is_set():
                _close(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _close(client)
                continue
            server.settimeout(None)
            with self._lock:
                self._pairs.append((client, server))
            threading.Thread(
                target=self._pump, args=(client, server), name="proxy-pump", daemon=True
            ).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        peers = {client: server, server: client}
        try:
            while True:
                readable, _, _ = select.select(list(peers), [], [], 1.0)
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    peers[sock].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            with self._lock:
                if (client, server) in self._pairs:
                    self._pairs.remove((client, server))
            _close(client)
            _close(server)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
