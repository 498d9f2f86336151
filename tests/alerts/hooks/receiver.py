"""A webhook receiver for the tests: ``http.server`` on 127.0.0.1, a random port, in a
thread; it records every request and answers with the statuses it is given, in turn (the
``receiver`` fixture of this folder's conftest starts one per test)."""

from __future__ import annotations

import hashlib
import hmac
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.statuses: list[int] = []  # answered in turn; 200 once they run out
        self.body = b"ok"  # the answer's body
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    receiver.requests.append(Received(self.command, self.path,
                                                      dict(self.headers.items()), body))
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", str(len(receiver.body)))
                self.end_headers()
                try:
                    self.wfile.write(receiver.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client read what it wanted and hung up

            do_POST = do_PUT = _handle  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def verified(request: Received, secret: str) -> bool:
    """What a receiver does (README): HMAC-SHA256 of ``<timestamp>.<body>``, compared in
    constant time."""
    timestamp = request.headers["X-Deviations-Timestamp"]
    expected = hmac.new(secret.encode(), timestamp.encode() + b"." + request.body,
                        hashlib.sha256).hexdigest()
    return hmac.compare_digest("sha256=" + expected, request.headers["X-Deviations-Signature"])
