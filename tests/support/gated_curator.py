"""The real Celery app, with curator passes that can be held in the middle of their work.

Start a worker with `-A tests.support.gated_curator` and CURATOR_GATE_PREFIX in its environment. A test arms a
conversation by setting `<prefix>armed:<conversation id>`; the first pass over it that gets to
its first operation (inside the pass's transaction, the conversation locked, one operation
applied) announces `<parent pid> <pid>` on the list `<prefix>held` and waits for
`<prefix>go` (at most GATE_WAIT_SECONDS), so the test can kill the worker there. Later passes,
and passes over other conversations, run as usual.
"""

from __future__ import annotations

import os
from typing import Any

from celery.signals import worker_process_init

from config.celery import app
from tests.support.gated_worker import gate_client

__all__ = ["app"]

GATE_WAIT_SECONDS = 30


def _install(prefix: str) -> None:
    from curator import services  # here: the apps are loaded once a worker process starts

    apply = services._apply
    client = gate_client()

    def gated_apply(op: Any, conversation: Any, actor: Any, *, read: Any) -> None:
        apply(op, conversation, actor, read=read)
        if client.delete(f"{prefix}armed:{conversation.pk}"):  # the first pass only: delete is atomic
            client.rpush(f"{prefix}held", f"{os.getppid()} {os.getpid()}")
            client.blpop([f"{prefix}go"], timeout=GATE_WAIT_SECONDS)

    services._apply = gated_apply


@worker_process_init.connect
def _gate_this_process(**kwargs: object) -> None:
    if os.environ.get("CURATOR_GATE_PREFIX"):
        _install(os.environ["CURATOR_GATE_PREFIX"])
