"""A local HTTP server that speaks the OpenAI embeddings protocol, for testing the client."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tests.support.http_stub import JsonHandler, serve


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
    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = self.read_json()
            behaviour.requests.append(body)
            behaviour.headers.append(dict(self.headers))
            if self.path != "/v1/embeddings":
                self.send_json(404, {"error": {"message": "not found"}})
                return
            if behaviour.mode == "429":
                self.send_json(429, {"error": {"message": "rate limited"}})
                return
            if behaviour.mode == "500":
                self.send_json(500, {"error": {"message": "boom"}})
                return
            if behaviour.mode == "refuse":
                self.send_json(400, {"error": {"message": "unknown model"}})
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
            self.send_json(200, {"object": "list", "data": list(reversed(data)), "model": body["model"]})

    with serve(Handler, path="/v1") as url:
        yield url


@contextmanager
def embedding_settings(settings: Any, behaviour: Behaviour, *, model: str = "fake-embed") -> Iterator[str]:
    """EMBEDDER=openai pointed at an embedding_server that answers as `behaviour`, `model` wide
    behaviour.dim, until the block ends (the settings fixture restores the settings after the test)."""
    with embedding_server(behaviour) as url:
        settings.EMBEDDER = "openai"
        settings.EMBEDDING_BASE_URL = url
        settings.EMBEDDING_MODEL = model
        settings.EMBEDDING_DIM = behaviour.dim
        yield url
