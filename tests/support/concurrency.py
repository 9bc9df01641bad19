"""Deterministic races on real Postgres: work on a second connection, a transaction held open
until the test lets it commit, waiting until a connection is blocked on a row lock, and an
embedder that lets something happen while it embeds.

Django connections belong to threads, so "another connection" is another thread. Tests that use
these need `django_db(transaction=True)`: the connections must see each other's commits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from django.db import connection, transaction

from memory.embedders import HashingEmbedder

WAIT = 20.0  # seconds any step may take before the test fails instead of hanging


class Background:
    """Run fn now in a thread of its own (so on a connection of its own); result() waits for it."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self._value = fn()
        except BaseException as exc:  # handed to the test in result()
            self._error = exc
        finally:
            connection.close()

    def result(self) -> Any:
        self._thread.join(WAIT)
        if self._thread.is_alive():
            raise AssertionError(f"background work did not finish within {WAIT}s")
        if self._error is not None:
            raise self._error
        return self._value


def on_other_connection(fn: Callable[[], Any]) -> Any:
    """Run fn to completion on another connection (it commits on its own) and return its result."""
    return Background(fn).result()


class OpenTransaction:
    """Run fn inside a transaction on another connection, and keep that transaction open, with
    every lock fn took, until commit() is called."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._done_work = threading.Event()
        self._may_commit = threading.Event()

        def hold() -> Any:
            with transaction.atomic():
                try:
                    value = fn()
                finally:
                    self._done_work.set()
                if not self._may_commit.wait(WAIT):
                    raise AssertionError(f"the open transaction was not released within {WAIT}s")
            return value

        self._work = Background(hold)
        if not self._done_work.wait(WAIT):
            raise AssertionError(f"the work in the open transaction did not finish within {WAIT}s")

    def commit(self) -> Any:
        self._may_commit.set()
        return self._work.result()


def lock_waiters() -> int:
    """How many connections to this database are waiting for a lock right now."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def wait_until_blocked_on_a_lock(count: int = 1) -> None:
    """Wait until `count` connections wait for a lock (the race is at the point the test wants)."""
    deadline = time.monotonic() + WAIT
    while lock_waiters() < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"no connection waited for a lock within {WAIT}s")
        time.sleep(0.01)


def commit_once_blocked(open_transaction: OpenTransaction) -> Background:
    """Commit the open transaction as soon as some connection waits for one of its locks.

    Use it when the connection that will block is the test's own (so it cannot do the waiting).
    """

    def watch() -> Any:
        wait_until_blocked_on_a_lock()
        return open_transaction.commit()

    return Background(watch)


class MidEmbed:
    """The hashing embedder, doing `during` once while it embeds: after the task has read the
    rows and before it stores anything, as a slow embedder gives everyone else time to do."""

    def __init__(self, during: Callable[[], object]) -> None:
        self.inner = HashingEmbedder()
        self.model, self.dim = self.inner.model, self.inner.dim
        self.during: Callable[[], object] | None = during

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors = self.inner.embed(texts)
        if self.during is not None:
            during, self.during = self.during, None
            during()
        return vectors
