"""Reads sent to streaming replicas (DATABASE_REPLICA_URLS), never serving what a lagging one still holds.

A read goes to a replica only inside `reading_from(alias)`, which a search or listing enters for
one person after `fresh_replica` chose the alias; everything else, every write above all, uses
the primary (the `default` database). Inside it, the ORM reads through the router below and the
statements written by hand through `read_connection()` (config.prepared); a write there would
fail on the replica (it is read-only) rather than go anywhere unseen.

Which replica may answer for a person: one whose copy of the person's *fingerprint* is the
primary's. The fingerprint is a statement over the rows that every change to what the person's
reads may show changes in the same transaction (their banks' versions, raised by each note
write, mute and erasure; their conversations' erasure counts), given by the caller. Read on the
primary, then on the replica: the replica replays commits in the primary's order, so once its
fingerprint equals what the primary's was a moment before, it has replayed every such commit up to
then, and what it serves is at least as erased and muted as the primary was when the read began.
A read already inside a transaction of the primary (which may have written what the replica has
not seen), a fingerprint that differs (a lagging replica), or a replica that cannot be reached
(then left alone for REPLICA_RETRY_SECONDS) all read from the primary; the metric
mnemo_replica_reads_total counts each outcome (config.metrics.REPLICA_OUTCOMES).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

logger = logging.getLogger(__name__)

REPLICA_ALIAS_PREFIX = "replica-"
REPLICA_RETRY_SECONDS = 30.0  # a replica that failed is not asked again for this long

_reading: ContextVar[str] = ContextVar("mnemo_reading_from", default=DEFAULT_DB_ALIAS)
_turn = itertools.count()
_down_until: dict[str, float] = {}
_down_lock = threading.Lock()


def replica_aliases() -> list[str]:
    """The configured replicas' database aliases, in the order DATABASE_REPLICA_URLS lists them."""
    return [alias for alias in settings.DATABASES if alias.startswith(REPLICA_ALIAS_PREFIX)]


def replica_settings(urls: Sequence[str], primary: Mapping[str, Any]) -> dict[str, Any]:
    """The DATABASES entries of the replicas at `urls`, connected as the primary is (its OPTIONS:
    timeouts, pool, prepared statements) and, in tests, mirroring the primary's test database."""
    import dj_database_url

    entries: dict[str, Any] = {}
    for number, url in enumerate(urls, start=1):
        entry = dj_database_url.parse(url, conn_health_checks=True)
        entry["OPTIONS"] = {**primary.get("OPTIONS", {}), **entry.get("OPTIONS", {})}
        if "CONN_MAX_AGE" in primary:
            entry["CONN_MAX_AGE"] = primary["CONN_MAX_AGE"]
        entry["TEST"] = {"MIRROR": DEFAULT_DB_ALIAS}
        entries[f"{REPLICA_ALIAS_PREFIX}{number}"] = entry
    return entries


def reads_alias() -> str:
    """The database this context reads from: `default` (the primary) unless inside reading_from."""
    return _reading.get()


def read_connection() -> BaseDatabaseWrapper:
    """The connection this context's reads use (the primary's, or a chosen replica's)."""
    return connections[_reading.get()]


@contextmanager
def reading_from(alias: str) -> Iterator[str]:
    """Reads in the block (ORM and statements written by hand) go to `alias`."""
    token = _reading.set(alias)
    try:
        yield alias
    finally:
        _reading.reset(token)


def fresh_replica(fingerprint: str, params: Mapping[str, Any]) -> str:
    """A replica that has replayed every change `fingerprint` (a one-row statement) sees, or
    `default`. See the module's doc."""
    replicas = replica_aliases()
    if not replicas:
        return DEFAULT_DB_ALIAS
    if connections[DEFAULT_DB_ALIAS].in_atomic_block:
        _count("in a transaction")
        return DEFAULT_DB_ALIAS
    now = time.monotonic()
    with _down_lock:
        up = [alias for alias in replicas if _down_until.get(alias, 0.0) <= now]
    if not up:
        _count("replica down")
        return DEFAULT_DB_ALIAS
    alias = up[next(_turn) % len(up)]
    primary = _read_one(DEFAULT_DB_ALIAS, fingerprint, params)
    try:
        replica = _read_one(alias, fingerprint, params)
    except DatabaseError as error:
        with _down_lock:
            _down_until[alias] = time.monotonic() + REPLICA_RETRY_SECONDS
        logger.warning(
            "Replica %s could not be read (%s); reads go to the primary for %.0f s, then it is tried again. "
            "Check that it is up and streaming, or take it out of DATABASE_REPLICA_URLS.",
            alias, str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__,
            REPLICA_RETRY_SECONDS,
        )  # fmt: skip
        connections[alias].close()
        _count("replica down")
        return DEFAULT_DB_ALIAS
    if replica != primary:
        _count("replica behind")
        return DEFAULT_DB_ALIAS
    _count("replica")
    return alias


def _count(outcome: str) -> None:
    from config import metrics  # not at import: the settings import this module

    metrics.count_replica_read(outcome)


def _read_one(alias: str, sql: str, params: Mapping[str, Any]) -> tuple[Any, ...]:
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)
        row: tuple[Any, ...] = cursor.fetchone()
    return row


class ReplicaRouter:
    """The ORM's reads go where reading_from says (the primary outside it); its writes and
    migrations only to the primary."""

    def db_for_read(self, model: type, **hints: Any) -> str:
        return _reading.get()

    def db_for_write(self, model: type, **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, first: object, second: object, **hints: Any) -> bool:
        return True  # every alias is the same database, at most a little behind

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == DEFAULT_DB_ALIAS
