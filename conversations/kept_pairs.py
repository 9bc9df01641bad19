"""What the conversation search keeps of each pair (one agent's conversations with one person).

A search (conversations.queries.rank_candidates) reads its pair's conversations first, in one
statement that also brings what changed since this process last read them (KeptPair.sync):

- the messages appended since, per conversation: each takes the next order under a lock on its
  conversation (conversations.services), so a conversation's messages become visible in order,
  and "after the last order read" misses none;
- the vectors stored since for the messages kept without one (the embedding runs after commit);
- a conversation whose erasure count (Conversation.erasures) changed, or that is gone, makes the
  pair read again from the start: nothing of an erased message is used after its erasure commits.

Kept per pair: each message's light row, its lexemes (as Postgres' text search read them: the
`search` column) with, for each lexeme, the messages holding it, and, for a pair of at most
SEARCH_EXACT_UP_TO messages, the unit vectors of the current embedder's model. Both halves of the
search then run here, as conversations.retrieval runs them in SQL: the words half exactly (every
lexeme finds and is counted), the meaning half by an exact scan. A larger pair keeps its words
only; its meaning half asks the HNSW index (conversations.retrieval.similar_statement).

A process keeps at most SEARCH_KEPT_MESSAGES messages' words and SEARCH_KEPT_VECTORS vectors,
dropping the least recently searched pairs first; a pair that would not fit alone is not kept,
and its search runs in SQL as before.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection

from accounts.models import Agent, Person
from conversations.models import Conversation, Message, MessageVector
from conversations.retrieval import Row, Scope
from memory.indexing import namespace_for

# Vectors looked for at a sync among the messages kept without one: all of them when this few,
# else the newest half of this many and a rotating share of the rest (a backlog of thousands, as
# after an import, is caught up a few hundred at a time).
PROBE = 128


class _Column:
    """A numpy column that grows by doubling: appending a message costs no copy of the others."""

    def __init__(self, dtype: Any, width: int = 0) -> None:
        self._shape = (width,) if width else ()
        self.data = np.zeros((16, *self._shape), dtype=dtype)
        self.size = 0

    def extend(self, values: Any) -> None:
        values = np.asarray(values, dtype=self.data.dtype)
        need = self.size + len(values)
        if need > len(self.data):
            grown = np.zeros((max(need, 2 * len(self.data)), *self._shape), dtype=self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size : need] = values
        self.size = need

    def view(self) -> np.ndarray:
        return self.data[: self.size]


class KeptPair:
    """One pair's messages as the search keeps them: light rows, lexemes and (when the pair is
    small enough) vectors. Only appended to; an erasure replaces it (see the module's doc)."""

    def __init__(self, *, vectors: tuple[str, int] | None) -> None:
        self.conversations: dict[int, tuple[int, int]] = {}  # id -> (last order read, erasures)
        self.messages = 0  # in the pair, tombstones included: the sum of the last orders
        self.rows: list[tuple[int, int, int, datetime, str]] = []  # id, conversation, order, created_at, role
        self.ids = _Column(np.int64)
        self.stamps = _Column(np.int64)  # created_at in microseconds
        self.holding: dict[str, list[int]] = {}  # lexeme -> the rows holding it
        self._arrays: dict[str, np.ndarray] = {}  # holding[lexeme] as an array, once a query asked for it
        self.where = vectors  # (model, width) of the vectors kept, or None
        self.matrix = _Column(np.float32, vectors[1]) if vectors else None
        self.present = _Column(np.bool_)
        self.missing: list[int] = []  # rows without a vector, oldest first
        self._rotation = 0
        self.lock = threading.Lock()

    def drop_vectors(self) -> None:
        self.where, self.matrix = None, None

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def vector_count(self) -> int:
        return len(self.rows) if self.matrix is not None else 0

    def probe(self) -> list[int]:
        """The message ids whose vectors this sync looks for (see PROBE)."""
        if self.matrix is None or not self.missing:
            return []
        if len(self.missing) <= PROBE:
            return [self.rows[row][0] for row in self.missing]
        newest = self.missing[-PROBE // 2 :]
        older = self.missing[: -PROBE // 2]
        start = self._rotation % len(older)
        self._rotation += PROBE // 2
        turn = (older[start:] + older[:start])[: PROBE // 2]
        return [self.rows[row][0] for row in newest + turn]

    def append(self, found: list[tuple[Any, ...]]) -> None:
        """Messages read by a sync, each (id, conversation, order, created_at, microseconds, role,
        lexemes, vector in pgvector's binary form or None)."""
        if not found:
            return
        start = len(self.rows)
        self.rows.extend((pk, conversation, order, at, role) for pk, conversation, order, at, _, role, _, _ in found)
        self.ids.extend([row[0] for row in found])
        self.stamps.extend([row[4] for row in found])
        for offset, row in enumerate(found):
            for lexeme in row[6] or ():
                self.holding.setdefault(lexeme, []).append(start + offset)
                self._arrays.pop(lexeme, None)
        if self.matrix is None:
            return
        width = self.matrix.data.shape[1]
        block = np.zeros((len(found), width), dtype=np.float32)
        present = np.zeros(len(found), dtype=bool)
        for offset, row in enumerate(found):
            unit = _unit(row[7], width)
            if unit is not None:
                block[offset] = unit
                present[offset] = True
            else:
                self.missing.append(start + offset)
        self.matrix.extend(block)
        self.present.extend(present)

    def fill(self, vectors: list[tuple[int, bytes]]) -> None:
        """Vectors found for messages kept without one."""
        if self.matrix is None or not vectors:
            return
        place = {self.rows[row][0]: row for row in self.missing}
        width = self.matrix.data.shape[1]
        filled = set()
        for message_id, sent in vectors:
            row = place.get(message_id)
            unit = _unit(sent, width) if row is not None else None
            if row is not None and unit is not None:
                self.matrix.data[row] = unit
                self.present.data[row] = True
                filled.add(row)
        if filled:
            self.missing = [row for row in self.missing if row not in filled]

    # --- the two halves -----------------------------------------------------------------

    def keyword_rows(self, lexemes: Iterable[str], limit: int) -> list[Row]:
        """conversations.retrieval.keyword_matches over the kept messages, every lexeme counted
        exactly: the summed inverse document frequency (over the pair) of the query's lexemes each
        message holds, best first, then the latest said, then the latest recorded."""
        count = len(self.rows)
        scores = np.zeros(count, dtype=np.float64)
        found = np.zeros(count, dtype=bool)
        n = self.messages
        for lexeme in lexemes:
            rows = self._holding(lexeme)
            if rows is None:
                continue
            d = len(rows)
            scores[rows] += math.log(1 + (n - d + 0.5) / (d + 0.5))
            found[rows] = True
        return self._best(np.flatnonzero(found), scores, limit)

    def _holding(self, lexeme: str) -> np.ndarray | None:
        rows = self._arrays.get(lexeme)
        if rows is None:
            held = self.holding.get(lexeme)
            if not held:
                return None
            rows = self._arrays[lexeme] = np.array(held, dtype=np.int64)
        return rows

    def vector_view(self) -> VectorView:
        """The kept vectors as they are now, for a meaning half run after the pair's lock is let
        go (while the query is still being embedded): later appends and fills leave it as it is."""
        assert self.matrix is not None
        size = len(self.rows)
        return VectorView(self.rows, self.ids.view()[:size], self.matrix.data[:size], self.present.data[:size].copy())

    def _best(self, found: np.ndarray, scores: np.ndarray, limit: int) -> list[Row]:
        if not len(found):
            return []
        if len(found) > limit:  # the best `limit`, ties at the edge included, then ordered
            edge = np.partition(scores[found], len(found) - limit)[len(found) - limit]
            found = found[scores[found] >= edge]
        chosen = found[np.lexsort((-self.ids.view()[found], -self.stamps.view()[found], -scores[found]))][:limit]
        return [(*self.rows[row], float(scores[row])) for row in chosen.tolist()]


@dataclass(frozen=True)
class VectorView:
    """A kept pair's vectors at one moment (KeptPair.vector_view)."""

    rows: list[tuple[int, int, int, datetime, str]]  # the pair's list: only the first len(ids) are read
    ids: np.ndarray
    matrix: np.ndarray
    present: np.ndarray

    def similar_rows(self, vector: np.ndarray, limit: int) -> list[Row]:
        """The exact scan of conversations.retrieval.similar_messages over the kept vectors:
        similarity above VECTOR_FLOOR, closest first, then the latest recorded."""
        norm = float(np.linalg.norm(vector))
        if not len(self.ids) or norm == 0:
            return []
        query = np.asarray(vector, dtype=np.float32) / np.float32(norm)
        similarity = self.matrix @ query
        close = np.flatnonzero(self.present & (similarity > settings.VECTOR_FLOOR))
        if len(close) > limit:  # the closest `limit`, ties at the edge included, then ordered
            edge = np.partition(similarity[close], len(close) - limit)[len(close) - limit]
            close = close[similarity[close] >= edge]
        chosen = close[np.lexsort((-self.ids[close], -similarity[close]))][:limit]
        return [(*self.rows[row], float(similarity[row])) for row in chosen.tolist()]


def _unit(sent: bytes | None, width: int) -> np.ndarray | None:
    """A vector in pgvector's binary form (its width, then big-endian float4s), as a unit row."""
    if sent is None:
        return None
    vector = np.frombuffer(sent, dtype=">f4", count=width, offset=4).astype(np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else None


# One statement, so one snapshot: the pair's conversations with their last order and erasure
# count (kind 0); every message appended after the last order kept of each (kind 1, tombstones
# left out; none when the pair has more than SEARCH_KEPT_MESSAGES), with its vector when vectors
# are kept and the pair has at most SEARCH_EXACT_UP_TO messages; the vectors found for messages
# kept without one (kind 2); and the query's lexemes (kind 3).
_SYNC = """
WITH pair AS MATERIALIZED (
    SELECT c.id, c.erasures, coalesce(last."order", 0) AS last
    FROM {conversation} c
    LEFT JOIN LATERAL (
        SELECT m."order" FROM {message} m
        WHERE m.team_id = c.team_id AND m.conversation_id = c.id
        ORDER BY m."order" DESC LIMIT 1
    ) last ON true
    WHERE c.team_id = %(team)s AND c.agent_id = %(agent)s AND c.person_id = %(person)s
),
kept AS (
    SELECT * FROM unnest(%(kept)s::bigint[], %(through)s::bigint[]) AS k(id, through)
)
SELECT 0, p.id, p.last, p.erasures, NULL::timestamptz, NULL::bigint, NULL::text, NULL::text[], NULL::bytea
FROM pair p
UNION ALL
SELECT 1, m.id, m.conversation_id, m."order", m.created_at, (extract(epoch FROM m.created_at) * 1000000)::bigint,
       m.role, tsvector_to_array(m.search), {vector}
FROM pair p
LEFT JOIN kept k ON k.id = p.id
CROSS JOIN LATERAL (
    SELECT * FROM {message} m
    WHERE m.team_id = %(team)s AND m.conversation_id = p.id AND m."order" > coalesce(k.through, 0)
      AND m.erased_at IS NULL AND (SELECT sum(last) FROM pair) <= %(most)s
) m
UNION ALL
SELECT 2, v.message_id, NULL, NULL, NULL, NULL, NULL, NULL, vector_send(v.embedding)
FROM {vectors} v
WHERE v.team_id = %(team)s AND v.message_id = ANY(%(probe)s::bigint[]) AND v.namespace = %(namespace)s
  AND v.model = %(model)s AND v.dim = %(dim)s
UNION ALL
SELECT 3, NULL, NULL, NULL, NULL, NULL, NULL,
       array(SELECT DISTINCT lexeme FROM unnest(to_tsvector(%(config)s::regconfig, %(words)s)) ORDER BY 1), NULL
"""
_WITH_VECTOR = f"""(
    SELECT vector_send(v.embedding) FROM {MessageVector._meta.db_table} v
    WHERE v.team_id = %(team)s AND v.message_id = m.id AND v.namespace = %(namespace)s
      AND v.model = %(model)s AND v.dim = %(dim)s AND (SELECT sum(last) FROM pair) <= %(exact)s
)"""


@dataclass
class Searchable:
    """A pair as one search sees it: the scope for the SQL halves, and the pair as kept, synced
    (None when it is not kept: the search then runs in SQL)."""

    scope: Scope
    kept: KeptPair | None

    @property
    def has_vectors(self) -> bool:
        return self.kept is not None and self.kept.matrix is not None


Key = tuple[int, int, int]  # team, agent, person
_pairs: OrderedDict[Key, KeptPair] = OrderedDict()
_locks: dict[Key, threading.Lock] = {}  # one per pair kept or being searched
_in_use: dict[Key, int] = {}  # searches in progress, per pair
_lock = threading.Lock()


def forget_conversations(conversation_ids: Iterable[int]) -> None:
    """Drop the pairs this process keeps that hold any of these conversations (an erasure or a
    delete, once it commits; another process reads its copy again at its next search of the pair)."""
    ids = set(conversation_ids)
    with _lock:
        for key in [key for key, kept in _pairs.items() if ids & kept.conversations.keys()]:
            del _pairs[key]


def forget_kept_pairs() -> None:
    """Drop everything the search keeps (tests, and a benchmark's cold search)."""
    with _lock:
        _pairs.clear()


def kept_counts() -> tuple[int, int]:
    """How many messages' words, and how many vectors, this process keeps."""
    with _lock:
        return sum(len(kept) for kept in _pairs.values()), sum(kept.vector_count for kept in _pairs.values())


@contextmanager
def synced(
    *, agent: Agent, person: Person, words: str, config: str, vectors: tuple[str, int] | None
) -> Iterator[Searchable]:
    """The pair brought up to date for one search, held (other searches of it wait) until the
    search has read it. `words` are read as lexemes in `config` on the way; `vectors` is the
    embedder's (model, width), or None without one."""
    key = (agent.team_id, agent.pk, person.pk)
    with _lock:
        lock = _locks.setdefault(key, threading.Lock())
        _in_use[key] = _in_use.get(key, 0) + 1
    try:
        with lock:
            yield _sync(key, words=words, config=config, vectors=vectors)
    finally:
        with _lock:
            _in_use[key] -= 1
            if not _in_use[key]:
                del _in_use[key]
                if key not in _pairs:
                    _locks.pop(key, None)


def _sync(key: Key, *, words: str, config: str, vectors: tuple[str, int] | None) -> Searchable:
    """Bring the kept pair up to date, reading it from the start when it is new, a conversation
    of it was erased from or deleted, or its vectors are not the ones it should keep now; keep it,
    and bound what the process keeps. Holds the pair's lock."""
    with _lock:
        kept = _pairs.get(key)
    if kept is not None and kept.where is not None and kept.where != vectors:
        kept = None  # another model's vectors (the embedder changed)
    reading = kept or KeptPair(vectors=vectors)
    rows = _read(key, reading, words=words, config=config)
    pair = {row[1]: (row[2], row[3]) for row in rows if row[0] == 0}
    messages = sum(last for last, _ in pair.values())
    lexemes = tuple(next(row[7] for row in rows if row[0] == 3) or ())
    fits = vectors if messages <= _vector_limit() else None
    if (
        kept is not None
        and messages <= settings.SEARCH_KEPT_MESSAGES
        and (
            kept.where != fits
            or any(pk not in pair or pair[pk][1] != seen[1] for pk, seen in kept.conversations.items())
        )
    ):
        # An erasure, a conversation gone, or the pair outgrew (or now fits) its vectors.
        reading = KeptPair(vectors=fits)
        rows = _read(key, reading, words=words, config=config)
        pair = {row[1]: (row[2], row[3]) for row in rows if row[0] == 0}
        messages = sum(last for last, _ in pair.values())
    scope = Scope(key[0], key[1], key[2], messages, lexemes)
    if messages > settings.SEARCH_KEPT_MESSAGES:  # not kept: _read brought no messages
        with _lock:
            _pairs.pop(key, None)
        return Searchable(scope, None)
    if reading.where is not None and not reading.conversations and messages > _vector_limit():
        reading.drop_vectors()  # new, and too large for them: _read brought none
    reading.append([row[1:] for row in rows if row[0] == 1])
    reading.fill([(row[1], row[8]) for row in rows if row[0] == 2])
    reading.conversations = pair
    reading.messages = messages
    with _lock:
        _pairs[key] = reading
        _pairs.move_to_end(key)
        _bound()
    return Searchable(scope, reading)


def _vector_limit() -> int:
    """The most messages a pair may have and keep its vectors."""
    return min(settings.SEARCH_EXACT_UP_TO, settings.SEARCH_KEPT_VECTORS)


def _read(key: Key, kept: KeptPair, *, words: str, config: str) -> list[tuple[Any, ...]]:
    """_SYNC for this kept pair (everything, for a new one)."""
    team, agent, person = key
    model, dim = kept.where if kept.where is not None else ("", 0)
    sql = _SYNC.format(
        conversation=Conversation._meta.db_table,
        message=Message._meta.db_table,
        vectors=MessageVector._meta.db_table,
        vector=_WITH_VECTOR if kept.where is not None else "NULL::bytea",
    )
    through = list(kept.conversations.items())
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            {
                "team": team,
                "agent": agent,
                "person": person,
                "kept": [pk for pk, _ in through],
                "through": [last for _, (last, _) in through],
                "most": settings.SEARCH_KEPT_MESSAGES,
                "exact": _vector_limit(),
                "probe": kept.probe(),
                "namespace": namespace_for(team),
                "model": model,
                "dim": dim,
                "config": config,
                "words": words,
            },
        )
        return list(cursor.fetchall())


def _bound() -> None:
    """Drop the least recently searched pairs while more than SEARCH_KEPT_MESSAGES messages or
    SEARCH_KEPT_VECTORS vectors are kept, never one a search in progress reads. Holds _lock."""
    held = sum(len(kept) for kept in _pairs.values())
    vectors = sum(kept.vector_count for kept in _pairs.values())
    for key in list(_pairs):
        if held <= settings.SEARCH_KEPT_MESSAGES and vectors <= settings.SEARCH_KEPT_VECTORS:
            break
        if key not in _in_use:
            dropped = _pairs.pop(key)
            _locks.pop(key, None)
            held -= len(dropped)
            vectors -= dropped.vector_count
