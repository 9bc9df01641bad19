"""Reads over the note index: similarity scores and ordering notes by meaning."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from django.db.models.expressions import RawSQL
from pgvector.django import CosineDistance

from accounts.models import Team
from memory import language
from memory.embedders import Embedder, EmbeddingUnavailable, get_embedder
from memory.indexing import NOTES, namespace_for
from memory.models import Note, NoteVector

logger = logging.getLogger(__name__)


@dataclass
class Similarities:
    scores: dict[int, float] = field(default_factory=dict)  # note id -> cosine similarity
    degraded: str = ""  # why vectors could not be used this time, when they could not


_QUERY_CACHE: OrderedDict[tuple[str, int, str], np.ndarray] = OrderedDict()
_QUERY_CACHE_SIZE = 256
_QUERY_FAILURES: dict[tuple[str, int, str], tuple[float, str]] = {}
QUERY_FAILURE_MEMORY = 30.0  # seconds a failed query embedding is not retried
_lock = threading.Lock()
# Embeds queries beside the reads that do not need their vector yet (an embedder waits on its model
# or the network, not on the GIL). As many at once as requests could have embedded inline before:
# a remote embedder that hangs costs each waiting query its own timeout, not a queue of them.
_EMBEDDING = ThreadPoolExecutor(max_workers=max(32, 4 * (os.cpu_count() or 1)), thread_name_prefix="query-vector")


_IN_FLIGHT: dict[tuple[str, int, str], Future[tuple[np.ndarray | None, str]]] = {}  # being embedded


def embed_query_soon(text: str) -> Future[tuple[np.ndarray | None, str]]:
    """embed_query on a thread of its own, for a caller with database reads to do meanwhile.

    A text being embedded already is not embedded again: the caller gets a future of that
    embedding, one of its own (cancelling it leaves the other callers' alone). A composer starts
    its search's text with its message's, and the search, asking for it later, waits on it."""
    embedder = get_embedder()
    if embedder is None:
        return _EMBEDDING.submit(embed_query, text)
    key = (embedder.model, embedder.dim, text)
    with _lock:
        running = _IN_FLIGHT.get(key)
        started = running is None
        if running is None:
            # With this embedder, not whichever is configured when the thread gets to it: the
            # future is found by this embedder's key.
            running = _IN_FLIGHT[key] = _EMBEDDING.submit(embed_query, text, embedder)
    if started:  # outside the lock: a callback added to a future already done runs at once
        running.add_done_callback(lambda done: _landed(key, done))
    yours: Future[tuple[np.ndarray | None, str]] = Future()
    running.add_done_callback(lambda done: _pass_on(done, yours))
    return yours


def _landed(key: tuple[str, int, str], done: Future[tuple[np.ndarray | None, str]]) -> None:
    with _lock:
        if _IN_FLIGHT.get(key) is done:
            del _IN_FLIGHT[key]


def _pass_on(done: Future[tuple[np.ndarray | None, str]], yours: Future[tuple[np.ndarray | None, str]]) -> None:
    """Give one caller's future the embedding's outcome (unless that caller cancelled it)."""
    if done.cancelled():  # the executor shut down before it ran
        yours.cancel()
        return
    if not yours.set_running_or_notify_cancel():
        return
    exception = done.exception()
    if exception is not None:
        yours.set_exception(exception)
    else:
        yours.set_result(done.result())


def kept_query_vector(text: str) -> tuple[np.ndarray | None, str] | None:
    """embed_query's answer when it is one of the recent vectors (a lookup, no embedding), or None:
    a caller that has it at once can send its reads that need it with those that do not."""
    embedder = get_embedder()
    if embedder is None:
        return None
    with _lock:
        vector = _QUERY_CACHE.get((embedder.model, embedder.dim, text))
    return (vector, "") if vector is not None else None


def embed_query(text: str, embedder: Embedder | None = None) -> tuple[np.ndarray | None, str]:
    """The query's vector, or (None, why) when the embedder is unavailable.

    One turn embeds the same text several times (note ordering, each passages search): recent
    vectors are kept, and a recent failure is not retried, so a hanging embedder costs a turn
    one timeout rather than one per search. A failure is forgotten as soon as the embedder has
    answered since (for any caller: an index task run in this process included). `embedder`: the
    one to use (default the configured one).
    """
    embedder = embedder or get_embedder()
    if embedder is None:
        return None, ""
    key = (embedder.model, embedder.dim, text)
    with _lock:
        if key in _QUERY_CACHE:
            _QUERY_CACHE.move_to_end(key)
            return _QUERY_CACHE[key], ""
        failed_at, reason = _QUERY_FAILURES.get(key, (0.0, ""))
        if failed_at > embedder.answered_at and time.monotonic() - failed_at < QUERY_FAILURE_MEMORY:
            return None, reason
    try:
        vector = embedder.embed_query(text)
    except EmbeddingUnavailable as exc:
        logger.warning("vectors unavailable for this read: %s", exc)
        reason = f"embedder unavailable: {exc}"
        with _lock:
            _QUERY_FAILURES[key] = (time.monotonic(), reason)
        return None, reason
    with _lock:
        _QUERY_FAILURES.clear()
        _QUERY_CACHE[key] = vector
        while len(_QUERY_CACHE) > _QUERY_CACHE_SIZE:
            _QUERY_CACHE.popitem(last=False)
    return vector, ""


def warm_embedder() -> None:
    """Load the configured embedder now, and a local model's search session (LocalMiniLM.warm_up)."""
    warm_up = getattr(get_embedder(), "warm_up", None)
    if warm_up is not None:
        warm_up()


def preload() -> None:
    """Load, in the background, what a process's first turn would otherwise wait for (a second or
    more each): the embedding model and the language identifier (memory.language). Web processes
    call it at start-up; a turn that comes first waits for nothing but what it needs."""

    def load() -> None:
        try:
            warm_embedder()
            language.preload()
        except Exception:  # the turn that needs it will load it again, and say why it cannot
            logger.exception("preloading the embedder and the language identifier failed")

    threading.Thread(target=load, name="mnemo-preload", daemon=True).start()


def forget_query_texts(texts: Iterable[str]) -> None:
    """Drop the kept vectors of these texts (an erased message was a turn's query: its text is a
    key here), in this process; other processes' entries age out unused (nothing shows a key)."""
    gone = set(texts)
    with _lock:
        for key in [key for key in _QUERY_CACHE if key[2] in gone]:
            del _QUERY_CACHE[key]
        for key in [key for key in _QUERY_FAILURES if key[2] in gone]:
            del _QUERY_FAILURES[key]


def forget_query_vectors() -> None:
    """Drop the kept query vectors (a benchmark measuring turns that each embed their message)."""
    with _lock:
        _QUERY_CACHE.clear()


def similarities(*, team: Team, notes: list[Note], query: str) -> Similarities:
    """Cosine similarity of each note that has a vector matching the current embedder.

    Only vectors of this team's namespace, this model and this width, computed from the note's
    present text, are compared; any other vector (one of the text before an edit included) is
    invisible, not a weak match.
    """
    return similarities_by_hash(team=team, current={note.pk: NOTES.text_hash(note) for note in notes}, query=query)


def similarities_by_hash(*, team: Team, current: dict[int, str], query: str) -> Similarities:
    """`similarities` for notes given as id -> the hash of their present text (NOTES.text_hash, or
    NOTES.sql_text_hash() computed in the query that found them), so no text need be loaded.
    Postgres computes the distances (pgvector, exact over these notes)."""
    embedder = get_embedder()
    if embedder is None or not current or not query.strip():
        return Similarities()
    vector, degraded = embed_query(query)
    if vector is None:
        return Similarities(degraded=degraded)
    rows = (
        NoteVector.objects.filter(
            team=team,
            namespace=namespace_for(team.pk),
            model=embedder.model,
            dim=embedder.dim,
            # One array parameter, not a placeholder per note: a thousand ids cost more to pass than to match.
            note_id__in=RawSQL("SELECT unnest(%s::bigint[])", (list(current),)),
        )
        .annotate(distance=CosineDistance("embedding", vector))
        .values_list("note_id", "text_hash", "distance")
    )
    return Similarities(
        scores={note_id: 1.0 - float(distance) for note_id, hashed, distance in rows if current[note_id] == hashed}
    )


def similarities_embedding_missing(*, team: Team, notes: list[Note], query: str) -> Similarities:
    """`similarities` for notes whose text may be no note's present text (memory as of a date): a
    stored vector of the same text is used; every other text is embedded now, for this read only,
    and never stored (a past text may be erased later, and no vector of it may outlive that)."""
    found = similarities(team=team, notes=notes, query=query)
    missing = [note for note in notes if note.pk not in found.scores]
    embedder = get_embedder()
    if embedder is None or found.degraded or not missing or not query.strip():
        return found
    vector, degraded = embed_query(query)
    if vector is None:
        return Similarities(found.scores, degraded)
    try:
        rows = embedder.embed([NOTES.text(note) for note in missing])
    except EmbeddingUnavailable as exc:
        logger.warning("vectors unavailable for this read: %s", exc)
        return Similarities(found.scores, f"embedder unavailable: {exc}")
    scores = dict(found.scores)
    for note, row in zip(missing, rows, strict=True):
        scores[note.pk] = float(np.dot(row, vector))
    return Similarities(scores)


@dataclass
class MeaningOrder:
    notes: list[Note]
    scores: dict[int, float]
    degraded: str


def order_by_meaning(*, team: Team, notes: list[Note], query: str) -> MeaningOrder:
    """Scored notes first, most similar first; notes without a score are never dropped: they
    follow, newest first. Without any vectors this is simply newest first."""
    found = similarities(team=team, notes=notes, query=query)
    scored = sorted(
        (n for n in notes if n.pk in found.scores), key=lambda n: (-found.scores[n.pk], -n.updated_at.timestamp())
    )
    unscored = sorted((n for n in notes if n.pk not in found.scores), key=lambda n: -n.updated_at.timestamp())
    return MeaningOrder(notes=scored + unscored, scores=found.scores, degraded=found.degraded)
