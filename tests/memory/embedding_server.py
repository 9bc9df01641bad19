"""A local HTTP server that speaks the OpenAI embeddings protocol, for testing the client."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


@dataclass
class Behaviour:
    mode: str = "ok"  # ok | 429 | 500 | slow | wrong_width | malformed | refuse
    dim: int = 8
    delay: float = 0.0
    requests: list[dict] = field(default_factory=list)
    headers: list[dict] = field(default_factory=list)


def fake_vector(text: str, dim: int) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
    return np.random.default_rng(seed).normal(size=dim).tolist()


@contextmanager
def embedding_server(behaviour: Behaviour) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            behaviour.requests.append(body)
            behaviour.headers.append(dict(self.headers))
            if self.path != "/v1/embeddings":
                self._send(404, {"error": {"message": "not found"}})
                return
            if behaviour.mode == "429":
                self._send(429, {"error": {"message": "rate limited"}})
                return
            if behaviour.mode == "500":
                self._send(500, {"error": {"message": "boom"}})
                return
            if behaviour.mode == "refuse":
                self._send(400, {"error": {"message": "unknown model"}})
                return
            if behaviour.mode == "slow":
                time.sleep(behaviour.delay)
            if behaviour.mode == "malformed":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{not json")
                return
            dim = behaviour.dim + (3 if behaviour.mode == "wrong_width" else 0)
            inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
            data = [{"object": "embedding", "index": i, "embedding": fake_vector(t, dim)} for i, t in enumerate(inputs)]
            self._send(200, {"object": "list", "data": list(reversed(data)), "model": body["model"]})

        def _send(self, status: int, payload: dict) -> None:
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
