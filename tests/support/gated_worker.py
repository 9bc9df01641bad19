"""The real Celery app, with an embedder that holds chosen texts mid-embedding until a test says go.

Start a worker with `-A tests.support.gated_worker` and GATE_PREFIX in its environment. A text that
contains a gate token (`gate-<lane>-<digits>`) is announced on the list `<prefix>started:<lane>`
as soon as embedding begins, and the embedder then waits for `<prefix>go:<token>` before it
returns, so a test knows each task is in the middle of its work and chooses when it finishes. Other texts
embed as usual. The wait is bounded: a test that never says go only slows the task down.
"""

from __future__ import annotations

import os
import re

import numpy as np
import redis
from django.conf import settings

from config.celery import app
from memory.embedders import HashingEmbedder

__all__ = ["app"]

TOKEN = re.compile(r"gate-([a-z]+)-\d+")
GATE_WAIT_SECONDS = 15


def gate_client() -> redis.Redis:
    """A redis-py client on the broker (the embedded server's URL is in kombu's socket form).

    Its socket timeout outlasts every blocking wait here (redis-py's default of 5s does not).
    """
    url = settings.CELERY_BROKER_URL
    if url.startswith("redis+socket://"):
        return redis.Redis(unix_socket_path=url.removeprefix("redis+socket://"), socket_timeout=60)
    return redis.Redis.from_url(url, socket_timeout=60)


def _install(prefix: str) -> None:
    embed = HashingEmbedder.embed
    client = gate_client()

    def gated_embed(self: HashingEmbedder, texts: list[str]) -> np.ndarray:
        tokens = sorted({(match[0], match[1]) for text in texts for match in TOKEN.finditer(text)})
        for token, lane in tokens:
            client.rpush(f"{prefix}started:{lane}", token)
        for token, _ in tokens:
            client.blpop([f"{prefix}go:{token}"], timeout=GATE_WAIT_SECONDS)
        return embed(self, texts)

    HashingEmbedder.embed = gated_embed  # type: ignore[method-assign]


if os.environ.get("GATE_PREFIX"):
    _install(os.environ["GATE_PREFIX"])
