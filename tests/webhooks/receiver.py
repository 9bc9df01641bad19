"""A real HTTP receiver for webhook tests: stdlib http.server on 127.0.0.1, in a thread."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int = 200

    @property
    def event(self) -> dict[str, Any]:
        return json.loads(self.body)

    def signed_with(self, secret: str) -> bool:
        expected = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(self.headers.get("X-Mnemo-Signature", ""), expected)


@dataclass
class Receiver:
    url: str
    received: list[Received] = field(default_factory=list)
    # Per path: the statuses to answer, one per request, before answering 200.
    statuses: dict[str, list[int]] = field(default_factory=dict)
    # Per path: how many times the first delivery to arrive there is answered 500 (others get 200).
    fail_first: dict[str, int] = field(default_factory=dict)
    first_delivery: dict[str, str] = field(default_factory=dict)
    slow_paths: set[str] = field(default_factory=set)  # answer a byte at a time, over some 12 s
    lock: threading.Lock = field(default_factory=threading.Lock)

    def at(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.path == path]

    def accepted(self, path: str) -> list[Received]:
        return [r for r in self.at(path) if r.status == 200]


@contextmanager
def run_receiver() -> Iterator[Receiver]:
    receiver = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with receiver.lock:
                queued = receiver.statuses.get(self.path, [])
                status = queued.pop(0) if queued else 200
                delivery = self.headers.get("X-Mnemo-Delivery", "")
                first = receiver.first_delivery.setdefault(self.path, delivery) == delivery
                if first and receiver.fail_first.get(self.path, 0) > 0:
                    receiver.fail_first[self.path] -= 1
                    status = 500
                receiver.received.append(Received(self.path, dict(self.headers.items()), body, status))
            if self.path in receiver.slow_paths:
                # A byte every 0.3 s, status line included: no single read waits long enough to time out.
                try:
                    for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok":
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(0.3)
                except OSError:  # the client gave up
                    pass
                self.close_connection = True
                return
            if self.path.startswith("/redirect"):
                self.send_response(302)
                self.send_header("Location", f"{receiver.url}/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
