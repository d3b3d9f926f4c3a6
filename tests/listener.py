"""A loopback TCP listener that counts the connections it accepts: the stand-in for a
server trawl must never reach (a private network service) or may reach once."""

from __future__ import annotations

import socket
import threading

from trawl.resource import Resource

PAGE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"
    b"Content-Length: 18\r\n\r\n<a href='/x'>x</a>"
)
"""A tiny HTML page, as a whole HTTP response."""


class Listener(Resource):
    """Accepts connections on ``address:port`` (0: any free port) and counts them; with
    ``answer``, reads each request and sends ``answer``, else hangs up at once."""

    def __init__(self, address: str, port: int = 0, answer: bytes | None = None) -> None:
        self.sock = socket.create_server((address, port))
        self.port: int = self.sock.getsockname()[1]
        self.accepted = 0
        self._answer = answer
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            with conn:
                if self._answer is not None:
                    conn.recv(65536)
                    conn.sendall(self._answer)

    def close(self) -> None:
        """Stop listening; calling it again does nothing."""
        self.sock.close()
