"""The vector index: one mechanism for every model whose rows are embedded.

An app registers each model it wants searched by meaning as an `IndexedModel` (memory its notes,
below; conversations its messages), from its AppConfig.ready, so memory knows no model of the
apps built on it. Every writer of a row calls `schedule`; the embedding runs after commit in the
model's Celery task, and the reconciler (a beat task and `manage.py reindex`, both looping over the
registry) repairs whatever a failed or skipped task left: rows with no vector, a vector of another
model or width, or (where the vector records the hash of its text) a vector of text since changed.
A task stores a vector only for the text it was computed from, under a lock on the row that
deletes take too (store_if_current), so deletes and edits never race it.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from celery import Task, shared_task
from django.db import connection, models, transaction
from django.db.models import Exists, F, Func, OuterRef, QuerySet, TextField, Value
from django.db.models.functions import Concat
from django.utils.module_loading import import_string
from redis.exceptions import RedisError

from config.prepared import statement_cursor
from config.redis import cache_redis
from memory.embedders import Embedder, EmbeddingUnavailable, Vector, get_embedder
from memory.models import Note, NoteVector

logger = logging.getLogger(__name__)


def embedding_task[**P, R](func: Callable[P, R]) -> Task[P, R]:
    """An embedding task, retried the way every one is (an embedder down, throttled or misbehaving).
    After the last retry the reconciler picks the rows up on its next run."""
    return shared_task(
        ignore_result=True,
        autoretry_for=(EmbeddingUnavailable,),
        retry_backoff=15,
        retry_backoff_max=600,
        retry_jitter=True,
        max_retries=8,
    )(func)


def namespace_for(team_id: int) -> str:
    return f"team:{team_id}"


class _Sha256Hex(Func):
    # Postgres' built-in sha256() (Django's SHA256 needs the pgcrypto extension instead).
    template = "encode(sha256(convert_to(%(expressions)s, 'UTF8')), 'hex')"
    output_field = TextField()


@dataclass
class ReconcileReport:
    checked: int
    indexed: int
    failed: int
    error: str = ""

    def summary(self) -> str:
        return f"checked {self.checked}, indexed {self.indexed}, failed {self.failed} {self.error}".strip()


@dataclass(frozen=True)
class IndexedModel:
    """A model whose rows are embedded, and how.

    The vector model has a foreign key `row_field` to the row, and `team`, `namespace`, `model`,
    `dim`, `embedding` and `embedded_at` fields, with one vector per (team, row, model).
    """

    label: str  # the row's noun, as reports say it: "note"
    model: type[models.Model]
    vector_model: type[models.Model]
    row_field: str  # the vector model's foreign key to the row
    text_fields: tuple[str, ...]  # what is embedded: these fields, joined by newlines
    task: str  # the Celery task that embeds rows after commit, called with a list of ids
    # Whether a vector records the sha256 of the text it was computed from (a `text_hash`
    # field), so that a vector of text since edited is known stale. Without it a vector is
    # current as long as its model and width are: for rows whose text never changes.
    hashes_text: bool = False
    # Rows never embedded (an erased message): stale() leaves them out, so neither a task nor
    # the reconciler gives them a vector.
    skip: models.Q | None = None

    # --- the text --------------------------------------------------------------------------

    def text(self, row: models.Model) -> str:
        return "\n".join(getattr(row, name) for name in self.text_fields)

    def text_hash(self, row: models.Model) -> str:
        return self.hash_values(*(getattr(row, name) for name in self.text_fields))

    def hash_values(self, *values: str) -> str:
        """text_hash of a row whose text fields hold these values, in text_fields order."""
        return hashlib.sha256("\n".join(values).encode()).hexdigest()

    def text_hash_sql(self, alias: str) -> str:
        """text_hash() of the row `alias` names, as a fragment of hand-written SQL (sql_text_hash's
        counterpart for statements not built by the ORM)."""
        quote = connection.ops.quote_name
        text = ", ".join(f"{alias}.{quote(name)}" for name in self.text_fields)
        return f"encode(sha256(convert_to(concat_ws(E'\\n', {text}), 'UTF8')), 'hex')"

    def sql_text_hash(self) -> Func:
        """text_hash() computed by Postgres, to annotate a query with (it must produce exactly text_hash())."""
        parts: list[Any] = []
        for name in self.text_fields:
            parts += [Value("\n"), name] if parts else [name]
        text = Concat(*parts, output_field=TextField()) if len(parts) > 1 else F(parts[0])
        return _Sha256Hex(text)

    # --- what needs a vector ---------------------------------------------------------------

    def stale(self, embedder: Embedder | None = None, rows: QuerySet[Any] | None = None) -> QuerySet[Any]:
        """Rows (of `rows`, default all) without a current vector: none at all, one of another
        model or width, or one of text since changed."""
        embedder = embedder or get_embedder()
        rows = self.model._default_manager.all() if rows is None else rows
        if self.skip is not None:
            rows = rows.exclude(self.skip)
        if embedder is None:
            return rows.none()
        current = self.vector_model._default_manager.filter(
            **{self.row_field: OuterRef("pk")}, team=OuterRef("team"), model=embedder.model, dim=embedder.dim
        )
        if not self.hashes_text:
            return rows.filter(~Exists(current))
        current = current.filter(text_hash=OuterRef("indexed_hash"))
        stale: QuerySet[models.Model] = rows.annotate(indexed_hash=self.sql_text_hash()).filter(~Exists(current))
        return stale

    # --- embedding -------------------------------------------------------------------------

    def schedule(self, pk: int) -> None:
        """Index this row after the surrounding transaction commits (a no-op without an embedder).

        Rows scheduled in one transaction go to one task and are embedded as one batch: the batch
        is the transaction's after-commit callback, so a rollback drops it with the transaction. A
        row scheduled in a savepoint rolled back later may ride along; the task skips rows that
        do not exist.
        """
        if get_embedder() is None:
            return
        connection = transaction.get_connection()
        for _savepoints, callback, _robust in connection.run_on_commit:
            if isinstance(callback, _Batch) and callback.indexed is self and not callback.sent:
                callback.ids.append(pk)
                return
        transaction.on_commit(_Batch(self, [pk]), robust=True)  # outside a transaction: at once

    def schedule_many(self, pks: list[int], *, batch_size: int = 256) -> None:
        """Index these rows after the surrounding transaction commits, one task per batch (a bulk
        write's counterpart of `schedule`; the reconciler embeds whatever a lost task left)."""
        if get_embedder() is None or not pks:
            return
        for start in range(0, len(pks), batch_size):
            batch = pks[start : start + batch_size]
            transaction.on_commit(lambda batch=batch: dispatch(self, batch), robust=True)  # type: ignore[misc]

    def store_computed(self, row: models.Model, vector: np.ndarray) -> None:
        """Give `row` a vector already computed from its present text by the configured embedder
        (a turn's message, which its composer embedded as a search text: Embedder.symmetric), in
        place of queueing it for a task to embed again. Stored after the response (send_outbox),
        or at once outside a request, by store_all_if_current; a row that could not be stored so
        is queued for its task, and a process that dies first leaves it to the reconciler."""
        if not getattr(_serving, "request", False):
            _store_computed(self, [(row, vector)])
            return
        with _outbox_lock:
            _computed.setdefault(self.label, (self, []))[1].append((row, vector))

    def index(self, ids: Iterable[int], embedder: Embedder | None = None) -> int:
        """Embed the given rows that need it, in one batch; safe to run twice. Returns how many
        vectors were stored.

        A row deleted or rewritten while its text was being embedded gets nothing: the vector is
        stored only if the row still holds exactly the text it was computed from (see
        store_if_current). Raises EmbeddingUnavailable when the embedder fails; nothing is written then.
        """
        ids = list(ids)
        if not ids:
            return 0  # a task queued for its pending list alone is given no rows of its own
        embedder = embedder or get_embedder()
        if embedder is None:
            return 0
        rows = self._stale_rows(ids, embedder)
        if not rows:
            return 0
        vectors = embedder.embed([self.text(row) for row in rows])
        return self.store_all_if_current(rows, vectors=vectors, embedder=embedder)

    def _stale_rows(self, ids: list[int], embedder: Embedder) -> list[models.Model]:
        """The rows of `ids` that stale() would give, in id order, each with its vector's hash
        compared here: one plain query (stale()'s costs a task more to build than to run)."""
        table = connection.ops.quote_name(self.model._meta.db_table)
        vectors = connection.ops.quote_name(self.vector_model._meta.db_table)
        row_column = connection.ops.quote_name(f"{self.row_field}_id")
        columns = ["id", "team_id", *self.text_fields]
        skip, skip_params = _skip_sql(self)
        current = f"{vectors}.text_hash" if self.hashes_text else "''"
        sql = (
            f"SELECT {', '.join(f'{table}.{connection.ops.quote_name(c)}' for c in columns)}, {vectors}.id, {current} "
            f"FROM {table} LEFT JOIN {vectors} ON {vectors}.{row_column} = {table}.id "
            f"AND {vectors}.model = %s AND {vectors}.dim = %s "
            f"WHERE {table}.id = ANY(%s::bigint[]){skip} ORDER BY {table}.id"
        )
        with statement_cursor() as cursor:
            cursor.execute(sql, [embedder.model, embedder.dim, list(ids), *skip_params])
            found = cursor.fetchall()
        names = ["id", "team_id", *self.text_fields]
        stale = []
        for *values, vector_id, vector_hash in found:
            row = self.model.from_db(connection.alias, names, values)
            if vector_id is None or (self.hashes_text and vector_hash != self.text_hash(row)):
                stale.append(row)
        return stale

    def store_all_if_current(self, rows: list[models.Model], *, vectors: np.ndarray, embedder: Embedder) -> int:
        """store_if_current for each row, in one statement for the rows no one else holds; returns
        how many vectors were stored.

        The statement locks the rows that are free (SKIP LOCKED: it never waits, so it cannot
        deadlock with a writer holding several rows), compares each one's present text with the
        text embedded (its hash, computed by Postgres as text_hash computes it), stores the vectors
        of those that still hold it, and drops their vectors of other models: all of it one
        transaction. A row someone holds (a writer mid-transaction) is done alone afterwards,
        waiting for its lock (store_if_current); so is a row gone, which then stores nothing.
        """
        if not rows:
            return 0
        hashes = [self.text_hash(row) for row in rows]
        vector_table = self.vector_model._meta.db_table
        quote = connection.ops.quote_name
        row_column = quote(f"{self.row_field}_id")
        hashed = ", text_hash" if self.hashes_text else ""
        sql = f"""
WITH given AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(hashes)s::text[], %(vectors)s::vector[]) AS g(id, hash, embedding)
), locked AS (
    SELECT r.id, r.team_id, {self.text_hash_sql("r")} AS hash
    FROM {quote(self.model._meta.db_table)} r
    WHERE r.id = ANY(%(ids)s::bigint[])
    FOR NO KEY UPDATE SKIP LOCKED
), stored AS (
    INSERT INTO {quote(vector_table)} (team_id, {row_column}, namespace, model, dim, embedding, embedded_at{hashed})
    SELECT l.team_id, l.id, 'team:' || l.team_id, %(model)s, %(dim)s, g.embedding, now(){", g.hash" if hashed else ""}
    FROM locked l JOIN given g ON g.id = l.id AND g.hash = l.hash
    ON CONFLICT (team_id, {row_column}, model) DO UPDATE
    SET namespace = EXCLUDED.namespace, dim = EXCLUDED.dim, embedding = EXCLUDED.embedding,
        embedded_at = EXCLUDED.embedded_at{", text_hash = EXCLUDED.text_hash" if hashed else ""}
    RETURNING {row_column} AS id
), dropped AS (
    DELETE FROM {quote(vector_table)} o USING stored s WHERE o.{row_column} = s.id AND o.model <> %(model)s
)
SELECT (SELECT array_agg(id) FROM locked), (SELECT count(*) FROM stored)
"""
        params: dict[str, Any] = {
            "ids": [row.pk for row in rows],
            "hashes": hashes,
            "vectors": [vector_text(vector) for vector in vectors],
            "model": embedder.model,
            "dim": embedder.dim,
        }
        with statement_cursor() as cursor:
            cursor.execute(sql, params)
            locked_ids, stored = cursor.fetchone()
        held = set(locked_ids or ())
        return int(stored) + sum(
            self.store_if_current(row, vector=vector, embedder=embedder)
            for row, vector in zip(rows, vectors, strict=True)
            if row.pk not in held
        )

    def store_if_current(self, row: models.Model, *, vector: np.ndarray, embedder: Embedder) -> bool:
        """Store the vector of `row`'s text if the row still exists and still holds that text.

        The row is locked before it is re-read, and held until the vector is committed. A delete
        (every write path locks the row before Django collects its vectors) or an edit then either
        committed first, and we find the row gone or its text changed and store nothing, or waits
        for us, and the delete removes our vector with the row. An older task finishing after a
        newer one finds the newer text and cannot overwrite its vector. One row per transaction:
        the task never holds one row while waiting for another, so it cannot deadlock with a
        writer that removes several rows in one transaction.
        """
        embedded_hash = self.text_hash(row)
        with transaction.atomic():
            current: Any = (
                self.model._default_manager.select_for_update(no_key=True, of=("self",))
                .filter(pk=row.pk)
                .only("pk", "team_id", *self.text_fields)
                .order_by("pk")
                .first()
            )
            if current is None or self.text_hash(current) != embedded_hash:
                return False
            fields: dict[str, Any] = {
                "team_id": current.team_id,
                f"{self.row_field}_id": current.pk,
                "namespace": namespace_for(current.team_id),
                "model": embedder.model,
                "dim": embedder.dim,
                "embedding": vector,
            }
            update_fields = ["namespace", "dim", "embedding", "embedded_at"]
            if self.hashes_text:
                fields["text_hash"] = embedded_hash
                update_fields.append("text_hash")
            vectors = self.vector_model._default_manager
            vectors.bulk_create(
                [self.vector_model(**fields)],
                update_conflicts=True,
                unique_fields=["team", self.row_field, "model"],
                update_fields=update_fields,
            )
            # Vectors of other models are invisible to queries; drop them once a current one exists.
            vectors.filter(**{f"{self.row_field}_id": current.pk}).exclude(model=embedder.model).delete()
        return True

    # --- repair ----------------------------------------------------------------------------

    def reconcile(
        self,
        *,
        batch_size: int = 64,
        limit: int | None = None,
        progress: Callable[[int], object] | None = None,
        rows: QuerySet[Any] | None = None,
    ) -> ReconcileReport:
        """Find and embed every stale row (of `rows`, default all), in batches. Stops at the first
        embedder failure and says so."""
        embedder = get_embedder()
        if embedder is None:
            return ReconcileReport(0, 0, 0, "no embedder is configured (EMBEDDER=none)")
        pending = list(self.stale(embedder, rows).order_by("pk").values_list("pk", flat=True)[:limit])
        indexed = 0
        for start in range(0, len(pending), batch_size):
            batch = pending[start : start + batch_size]
            try:
                indexed += self.index(batch, embedder)
            except EmbeddingUnavailable as exc:
                logger.warning("%s reindex stopped after %s %ss: %s", self.label, indexed, self.label, exc)
                return ReconcileReport(len(pending), indexed, len(pending) - start, str(exc))
            if progress is not None:
                progress(len(batch))
        return ReconcileReport(len(pending), indexed, 0)


@functools.cache
def _skip_sql(indexed: IndexedModel) -> tuple[str, tuple[Any, ...]]:
    """` AND NOT (<the skip condition>)`, as the ORM compiles it against the row's table, and its
    parameters (compiled once per process); nothing without one."""
    if indexed.skip is None:
        return "", ()
    query = indexed.model._default_manager.filter(indexed.skip).query
    where, params = query.get_compiler(connection=connection).compile(query.where)
    return f" AND NOT ({where})", tuple(params)


def unit_from_binary(sent: bytes | None, width: int) -> np.ndarray | None:
    """A vector sent in pgvector's binary form (`vector_send`: its width, then big-endian float4s),
    as a unit row; None for none, or for a zero vector. Parsing a thousand vectors from their text
    form cost some 70 ms, this a few."""
    if sent is None:
        return None
    vector = np.frombuffer(sent, dtype=">f4", count=width, offset=4).astype(np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else None


def vector_text(vector: Vector) -> str:
    """pgvector's text form of a vector ([0.0123456789,...]), as a parameter: each component as a
    float4 holds it, in the 9 significant digits that give that float4 back exactly. (Written as
    doubles, by repr, they take up to 17 digits: three times as long to write, and a text half as
    long again for Postgres to read, for every vector stored and every vector a search sends.)"""
    values = np.asarray(vector, dtype=np.float32).ravel().tolist()
    return _vector_format(len(values)) % tuple(values)


@functools.cache
def _vector_format(width: int) -> str:
    return "[" + ",".join(["%.9g"] * width) + "]"


@dataclass
class _Batch:
    """The rows of one model a transaction scheduled, sent to its task once the transaction commits."""

    indexed: IndexedModel
    ids: list[int]
    sent: bool = False

    def __call__(self) -> None:
        self.sent = True  # a batch already sent takes no more rows (the callback may outlive its run)
        ids = list(dict.fromkeys(self.ids))
        if not getattr(_serving, "request", False):
            dispatch(self.indexed, ids)
            return
        with _outbox_lock:
            _outbox.setdefault(self.indexed.label, (self.indexed, []))[1].extend(ids)
            full = sum(len(waiting) for _, waiting in _outbox.values()) >= OUTBOX_MAX
        if full:
            send_outbox()


# --- the pending lists: what is queued together is embedded together ----------------------------
#
# Each model has a list of rows waiting for a vector, in Redis, and a "wake" marker that says a
# task is queued or running that will take them. dispatch appends the rows and sets the marker in
# one round trip; only when the marker was not already set does it queue a task. A task embeds the
# rows it was given, then takes the list in batches (clearing the marker before each take, so a
# row appended after a take queues a task of its own: none waits unseen). While a worker is busy,
# rows written one at a time (each by its own request) pile up and are embedded as one batch, for a
# fraction of the CPU of one task each. A row a task took and did not embed (a worker killed) is
# found by the reconciler, like any row without a vector; a marker whose task was lost expires.

WAKE_SECONDS = 30  # a wake marker whose task was lost blocks new tasks at most this long
PENDING_SECONDS = 86_400  # a list nobody drains (its queue abandoned) expires
DRAIN_BATCH = 64  # rows a task takes from the list at a time
DRAIN_MOST = 1024  # rows one task takes before it hands the rest to a task of its own
# False: one task per dispatch, with its rows, as before the lists (a test that judges each row's
# task by the worker's log asks for that).
COALESCE = True


def pending_keys(indexed: IndexedModel) -> tuple[str, str]:
    """The model's pending list and wake marker, for this database and this task queue."""
    from celery import current_app

    base = f"mnemo:embed:{connection.settings_dict['NAME']}:{current_app.conf.task_default_queue}:{indexed.label}"
    return base, f"{base}:wake"


def dispatch(indexed: IndexedModel, ids: list[int]) -> None:
    """Queue the rows for the model's embedding task: appended to its pending list, with a task
    queued unless one already is. (The task is named by path: the tasks import this module.)
    Raises when Redis or the broker fails; the caller logs it, and the reconciler embeds the rows."""
    if not ids:
        return
    if not COALESCE:
        import_string(indexed.task).delay(ids)
        return
    pending, wake = pending_keys(indexed)
    client = cache_redis()
    pipe = client.pipeline(transaction=False)
    pipe.rpush(pending, *ids)
    pipe.expire(pending, PENDING_SECONDS)
    pipe.set(wake, "1", nx=True, ex=WAKE_SECONDS)
    woke = pipe.execute()[-1]
    if not woke:
        return  # a task is queued or running: it takes these too
    try:
        import_string(indexed.task).delay([])
    except Exception:
        client.delete(wake)  # the next row written queues a task, which takes these as well
        raise


def drain(indexed: IndexedModel) -> int:
    """Embed the rows waiting in the model's pending list (what embedding tasks call after their
    own rows); returns how many vectors were stored. Rows taken but not embedded because the
    embedder failed go back to the list for the task's retry."""
    pending, wake = pending_keys(indexed)
    client = cache_redis()
    stored = taken = 0
    try:
        while taken < DRAIN_MOST:
            pipe = client.pipeline(transaction=False)
            pipe.delete(wake)
            pipe.lpop(pending, DRAIN_BATCH)
            raw = pipe.execute()[-1]
            if not raw:
                return stored
            ids = list(dict.fromkeys(int(pk) for pk in raw))
            taken += len(raw)
            try:
                stored += indexed.index(ids)
            except EmbeddingUnavailable:
                client.rpush(pending, *ids)
                raise
        # More than one task's share: another task takes the rest (unless one is queued already).
        if client.llen(pending) and client.set(wake, "1", nx=True, ex=WAKE_SECONDS):
            import_string(indexed.task).delay([])
    except RedisError:
        logger.warning("The %s pending list could not be read; the reconciler embeds what it holds", indexed.label)
    return stored


# --- after the response -----------------------------------------------------------------------
#
# Queueing a task is a round trip to the broker and a millisecond or two of the sender's CPU. A
# request does not wait for it: the rows its transactions committed wait in this process's outbox,
# and `send_outbox` queues them once the response has been sent (Django's request_finished, which
# MemoryConfig.ready connects), one task per model for every request that finished meanwhile, so
# rows written together are embedded together. Outside a request (a command, a task, the MCP
# server, a test) a batch is queued as its transaction commits. A process that dies between a
# response and the send, or a broker that is down, loses only the task: the reconciler embeds the
# rows on its next run, and the failure is logged with how many rows wait for it.

OUTBOX_MAX = 1024  # rows waiting before a request queues them itself
DISPATCH_CHUNK = 256  # rows per task

_serving = threading.local()  # .request: this thread is serving a request (between its signals)
_outbox: dict[str, tuple[IndexedModel, list[int]]] = {}
# Rows whose vectors this process computed already (IndexedModel.store_computed), stored on send.
_computed: dict[str, tuple[IndexedModel, list[tuple[models.Model, np.ndarray]]]] = {}
_outbox_lock = threading.Lock()


def defer_dispatch(**_signal: Any) -> None:
    """request_started receiver: the rows this thread's transactions commit wait for the response."""
    _serving.request = True


def send_outbox(**_signal: Any) -> int:
    """Queue the embedding of every row waiting in this process's outbox; returns how many rows.

    Also the request_finished receiver (hence the keyword arguments). Never raises: a task that
    cannot be queued is logged, and the reconciler embeds its rows later.
    """
    _serving.request = False
    with _outbox_lock:
        computed = list(_computed.values())
        _computed.clear()
    for indexed, given in computed:
        _store_computed(indexed, given)
    with _outbox_lock:
        waiting = list(_outbox.values())
        _outbox.clear()
    sent = 0
    for indexed, ids in waiting:
        ids = list(dict.fromkeys(ids))
        for start in range(0, len(ids), DISPATCH_CHUNK):
            chunk = ids[start : start + DISPATCH_CHUNK]
            try:
                dispatch(indexed, chunk)
            except Exception:
                logger.exception(
                    "%d %ss were not queued for embedding (the broker failed); the reconciler embeds them later",
                    len(chunk),
                    indexed.label,
                )
            else:
                sent += len(chunk)
    return sent


def _store_computed(indexed: IndexedModel, given: list[tuple[models.Model, np.ndarray]]) -> None:
    """Store vectors this process computed (IndexedModel.store_computed). When any is not stored
    (a row locked, changed or gone, or the database failed), the rows are queued for the model's
    task, which embeds only those still without a current vector. Never raises."""
    embedder = get_embedder()
    if embedder is None:
        return
    rows = [row for row, _ in given]
    try:
        stored = indexed.store_all_if_current(
            rows, vectors=np.stack([vector for _, vector in given]), embedder=embedder
        )
    except Exception:
        logger.exception("%d %ss' vectors could not be stored; they are queued for embedding", len(rows), indexed.label)
        stored = 0
    if stored == len(rows):
        return
    missing = [row.pk for row in rows]  # the task embeds only those still without a current vector
    try:
        dispatch(indexed, missing)
    except Exception:
        logger.exception(
            "%d %ss were not queued for embedding (the broker failed); the reconciler embeds them later",
            len(missing),
            indexed.label,
        )


def waiting_in_outbox() -> int:
    """How many rows this process holds for the next send_outbox."""
    with _outbox_lock:
        return sum(len(ids) for _, ids in _outbox.values())


# --- the registry -----------------------------------------------------------------------------

_REGISTRY: dict[str, IndexedModel] = {}


def register(indexed: IndexedModel) -> None:
    """Add a model to the index (from its app's AppConfig.ready); registering it again is a no-op."""
    known = _REGISTRY.setdefault(indexed.label, indexed)
    if known != indexed:
        raise ValueError(f"Another indexed model is already registered as {indexed.label!r}.")


def indexed_models() -> list[IndexedModel]:
    """Every registered model, in the order the apps registered them (INSTALLED_APPS order)."""
    return list(_REGISTRY.values())


# --- notes ------------------------------------------------------------------------------------

NOTES = IndexedModel(
    label="note",
    model=Note,
    vector_model=NoteVector,
    row_field="note",
    text_fields=("key", "description", "content"),
    task="memory.tasks.embed_notes",
    hashes_text=True,  # notes are edited: a vector of the text before an edit is stale
)


def schedule(note_id: int) -> None:
    """Index this note after the surrounding transaction commits: what every writer of a note calls."""
    NOTES.schedule(note_id)
