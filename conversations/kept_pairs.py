"""What the conversation search keeps of each pair (one agent's conversations with one person).

A search (conversations.queries.start_search) reads its pair's conversations first, in one
statement that also brings what changed since this process last read them (_SYNC); outside a
transaction block, a conversation whose row is the version kept (every append and erasure writes
it) is not looked at further:

- the messages appended since, per conversation: each takes the next order under a lock on its
  conversation (conversations.services), so a conversation's messages become visible in order,
  and "after the last order read" misses none;
- the vectors stored since for the messages kept without one (the embedding runs after commit):
  all of them when there are at most PROBE, else the newest and a rotating share of the rest,
  the database answering the meaning half until the backlog is caught up;
- a conversation whose erasure count (Conversation.erasures) changed, that is gone, or whose last
  message kept is not there any more (its transaction rolled back): its rows die (their words and
  vectors dropped) and it is read again from the start, so nothing of an erased message is used
  after its erasure commits. The pair is read anew once half its rows are dead.

Kept per pair: each message's light row, its lexemes (as Postgres' text search read them: the
`search` column) with, for each lexeme, the messages holding it, and the unit vectors of the
current embedder's model: as they are for a pair of at most SEARCH_EXACT_UP_TO messages, small
for a larger one (conversations.quantised: found by their signs, scored from 8-bit components),
while they fit SEARCH_KEPT_VECTORS' room (counted in vectors kept as they are). Both halves of the
search then run here, as conversations.retrieval runs them in SQL, but for two differences: every
lexeme finds and is counted exactly (in SQL, a word common in a large pair only scores what rarer
words found), and a large pair's meaning half is the two-step search of its small vectors (in
SQL, the HNSW index). A pair whose vectors do not fit keeps its words only; its meaning half
asks the HNSW index (conversations.retrieval.similar_statement).

A pair read from the start with more than READ_INLINE_UP_TO messages is read on a thread of its
own (outside a transaction), the searches meanwhile running in SQL: a 100,000-message pair takes
over a second to read, which no search should wait for.

A process keeps at most SEARCH_KEPT_MESSAGES messages' words and room for SEARCH_KEPT_VECTORS
vectors kept as they are, dropping the least recently searched pairs first (never one a search is reading, which
may hold more alone); a pair with more messages than SEARCH_KEPT_MESSAGES is not kept, and its
search runs in SQL.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection

from accounts.models import Agent, Person
from config.prepared import statement_cursor
from conversations import quantised
from conversations.models import Conversation, Message, MessagePassage, MessageVector
from conversations.retrieval import NOTHING_FOUND, ROLES, WORDS_B, Found, Scope, length_factor
from memory.indexing import namespace_for, unit_from_binary

logger = logging.getLogger(__name__)

# A pair read from the start with more messages than this is read on a thread (the search that
# found it so runs in SQL): reading 100,000 messages takes over a second.
READ_INLINE_UP_TO = 20_000
# Vectors looked for at a sync among the messages kept without one: all of them when this few,
# else the newest half of this many and a rotating share of the rest (a backlog of thousands, as
# after an import, is caught up a few hundred at a time).
PROBE = 128
# Vectors appended to a kept pair at a time (what one read brings is appended a block at a time).
VECTOR_BLOCK = 4096


class _Column:
    """A numpy column that grows by half again when full: appending a message costs no copy of
    the others, and the spare room stays under half of what is kept."""

    def __init__(self, dtype: Any, width: int = 0) -> None:
        self._shape = (width,) if width else ()
        self.data = np.zeros((16, *self._shape), dtype=dtype)
        self.size = 0

    def extend(self, values: Any) -> None:
        values = np.asarray(values, dtype=self.data.dtype)
        need = self.size + len(values)
        if need > len(self.data):
            grown = np.zeros((max(need, len(self.data) * 3 // 2), *self._shape), dtype=self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size : need] = values
        self.size = need

    def reserve(self, more: int) -> None:
        """Room for `more` values beyond those held, exactly (a read whose size is known)."""
        need = self.size + more
        if need > len(self.data):
            grown = np.zeros((need, *self._shape), dtype=self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown

    def view(self) -> np.ndarray:
        return self.data[: self.size]


class _Postings:
    """The rows holding one lexeme, in a growing array (no Python object per row: a full garbage
    collection walks every list item a process holds, and kept pairs would add tens of ms)."""

    __slots__ = ("_column",)

    def __init__(self) -> None:
        self._column = _Column(np.int32)

    def extend(self, rows: np.ndarray) -> None:
        self._column.extend(rows)

    def read(self) -> np.ndarray:
        return self._column.view()

    def keep(self, rows: np.ndarray) -> None:
        self._column = _Column(np.int32)
        self._column.extend(rows)


class _ExactVectors:
    """A pair's vectors as they are (float32): the meaning half scans them all, as the exact scan in
    SQL does. For a pair of at most SEARCH_EXACT_UP_TO messages."""

    kind = "exact"

    def __init__(self, width: int) -> None:
        self.width = width
        self.matrix = _Column(np.float32, width)

    def reserve(self, more: int) -> None:
        self.matrix.reserve(more)

    def extend(self, units: np.ndarray) -> None:
        self.matrix.extend(units)

    def put(self, row: int, unit: np.ndarray) -> None:
        self.matrix.data[row] = unit

    def zero(self, rows: np.ndarray) -> None:
        self.matrix.data[rows] = 0.0

    @property
    def room(self) -> int:
        """The vectors' room, in vectors kept as they are (what SEARCH_KEPT_VECTORS counts)."""
        return len(self.matrix.data)

    def scorer(self, size: int, present: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        """The similarity of each of the first `size` rows to a unit query, as they are now."""
        matrix = self.matrix.data[:size]
        return lambda query: matrix @ query


class _QuantisedVectors:
    """A pair's vectors kept small (conversations.quantised): their signs, and their components in
    8 bits. For a pair of more than SEARCH_EXACT_UP_TO messages, which the HNSW index answered before."""

    kind = "quantised"

    def __init__(self, width: int) -> None:
        self.width = width
        self.words = [_Column(np.uint64) for _ in range(quantised.sign_words(width))]
        self.codes = _Column(np.int8, width)
        self.scales = _Column(np.float32)

    def reserve(self, more: int) -> None:
        for column in (*self.words, self.codes, self.scales):
            column.reserve(more)

    def extend(self, units: np.ndarray) -> None:
        for column, word in zip(self.words, quantised.signs(units), strict=True):
            column.extend(word)
        codes, scales = quantised.components(units)
        self.codes.extend(codes)
        self.scales.extend(scales)

    def put(self, row: int, unit: np.ndarray) -> None:
        for column, word in zip(self.words, quantised.signs(unit[None, :]), strict=True):
            column.data[row] = word[0]
        codes, scales = quantised.components(unit[None, :])
        self.codes.data[row] = codes[0]
        self.scales.data[row] = scales[0]

    def zero(self, rows: np.ndarray) -> None:
        for column in self.words:
            column.data[rows] = 0
        self.codes.data[rows] = 0
        self.scales.data[rows] = 0.0

    @property
    def room(self) -> int:
        return math.ceil(len(self.codes.data) * quantised.bytes_per_vector(self.width) / (4 * self.width))

    def scorer(self, size: int, present: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        """The similarity of the rows closest by signs to a unit query (conversations.quantised),
        of the first `size` rows as they are now; every other row scores -inf."""
        words = [column.data[:size] for column in self.words]
        codes, scales = self.codes.data[:size], self.scales.data[:size]

        def score(query: np.ndarray) -> np.ndarray:
            rows, similarity = quantised.closest(words, codes, scales, present, query)
            scores = np.full(size, -np.inf, dtype=np.float32)
            scores[rows] = similarity
            return scores

        return score


def _vector_kind(
    messages: int, vectors: tuple[str, int] | None
) -> type[_ExactVectors] | type[_QuantisedVectors] | None:
    """How a pair of this many messages keeps the embedder's (model, width) vectors, if it keeps
    them: as they are up to SEARCH_EXACT_UP_TO messages, small above, while they fit in
    SEARCH_KEPT_VECTORS' room. None without an embedder."""
    if vectors is None:
        return None
    if messages <= settings.SEARCH_EXACT_UP_TO:
        return _ExactVectors if messages <= settings.SEARCH_KEPT_VECTORS else None
    return _QuantisedVectors if messages <= _quantised_most(vectors[1]) else None


def _quantised_most(width: int) -> int:
    """The most messages whose vectors kept small fit in SEARCH_KEPT_VECTORS' room."""
    return settings.SEARCH_KEPT_VECTORS * 4 * width // quantised.bytes_per_vector(width)


class KeptPair:
    """One pair's messages as the search keeps them: light rows, lexemes and (when the pair is
    small enough) vectors. Appended to as messages come; the rows of a conversation erased from
    or deleted are marked dead (and read again, for one still there), and the pair is read anew
    once half its rows are dead (see the module's doc)."""

    def __init__(self, *, vectors: tuple[str, int] | None) -> None:
        # Each conversation as last read: its last order, erasure count, the id of the message at
        # that order (a message of a transaction rolled back since is found out by it), and the
        # version of its row (xmin: see _SYNC).
        self.conversations: dict[int, tuple[int, int, int | None, int]] = {}
        self.messages = 0  # in the pair, tombstones included: the sum of the last orders
        # Each message as numpy columns (no Python object per message: see _Postings).
        self.ids = _Column(np.int64)
        self.conversation_ids = _Column(np.int64)
        self.orders = _Column(np.int64)
        self.stamps = _Column(np.int64)  # created_at in microseconds since the epoch
        self.roles = _Column(np.int8)  # index in ROLES
        self.lengths = _Column(np.int32)  # distinct lexemes (Postgres' length(search))
        self.alive = _Column(np.bool_)
        self.dead = 0
        self.holding: dict[str, _Postings] = {}  # lexeme -> the rows holding it
        self.where = vectors  # (model, width) of the vectors kept, or None
        self.store: _ExactVectors | _QuantisedVectors | None = None  # chosen by keep_vectors
        self.present = _Column(np.bool_)
        self.missing: list[int] = []  # live rows without a vector, oldest first
        # Long messages' windows (conversations.passages): their vectors as they are, and the row
        # of the message each is of. The meaning half scores a row by its closest vector.
        self.windows: _Column | None = None
        self.window_rows = _Column(np.int32)
        self._rotation = 0

    def drop_vectors(self) -> None:
        self.where, self.store, self.missing = None, None, []
        self.windows, self.window_rows = None, _Column(np.int32)

    def keep_vectors(self, kind: type[_ExactVectors] | type[_QuantisedVectors]) -> None:
        """Keep the vectors this way from now on: chosen at the pair's first read; a pair that
        outgrows the exact kind keeps the vectors it has small. (One that shrinks back keeps them
        small until it is read anew.)"""
        assert self.where is not None
        if self.store is None:
            self.store = kind(self.where[1])
        elif isinstance(self.store, _ExactVectors) and kind is _QuantisedVectors:
            small = _QuantisedVectors(self.store.width)
            small.extend(self.store.matrix.view())
            self.store = small

    @property
    def vectors_kind(self) -> str | None:
        """How the pair keeps its vectors: "exact", "quantised", or None when it keeps none."""
        store = self.store
        return store.kind if store is not None else None

    def __len__(self) -> int:
        return self.ids.size

    @property
    def vector_count(self) -> int:
        """Vectors this pair holds room for (what the bound counts; read by other searches while
        this pair's may drop its vectors: the store is read once)."""
        store, windows = self.store, self.windows
        return (store.room if store is not None else 0) + (len(windows.data) if windows is not None else 0)

    @property
    def vectors_complete(self) -> bool:
        """Whether this sync looked for the vector of every live row kept without one."""
        return len(self.missing) <= PROBE

    def probe(self) -> list[int]:
        """The message ids whose vectors this sync looks for (see PROBE)."""
        if self.store is None or not self.missing:
            return []
        if len(self.missing) <= PROBE:
            return [int(pk) for pk in self.ids.data[self.missing]]
        newest = self.missing[-PROBE // 2 :]
        older = self.missing[: -PROBE // 2]
        start = self._rotation % len(older)
        self._rotation += PROBE // 2
        turn = (older[start:] + older[:start])[: PROBE // 2]
        return [int(pk) for pk in self.ids.data[newest + turn]]

    def forget(self, conversation_ids: Iterable[int]) -> None:
        """Mark the rows of these conversations dead: their words and vectors are dropped, and
        only their light rows stay (until the pair is read anew, once half its rows are dead)."""
        ids = list(conversation_ids)
        for conversation_id in ids:
            self.conversations.pop(conversation_id, None)
        dead = np.flatnonzero(np.isin(self.conversation_ids.view(), ids) & self.alive.view())
        if not len(dead):
            return
        self.alive.data[dead] = False
        alive = self.alive.view()
        for lexeme, postings in list(self.holding.items()):  # their words leave with them
            rows = postings.read()
            held = rows[alive[rows]]
            if not len(held):
                del self.holding[lexeme]
            elif len(held) < len(rows):
                postings.keep(held)
        if self.store is not None:
            self.present.data[dead] = False
            self.store.zero(dead)
            if self.windows is not None:
                self.windows.data[: self.windows.size][np.isin(self.window_rows.view(), dead)] = 0.0
            gone = set(dead.tolist())
            self.missing = [row for row in self.missing if row not in gone]
        self.dead += len(dead)

    def append(self, found: list[tuple[Any, ...]]) -> None:
        """Messages read by a sync, each (id, conversation, order, -, created_at in microseconds, role,
        lexemes, vector in pgvector's binary form or None)."""
        if not found:
            return
        start = len(self)
        self.ids.extend([row[0] for row in found])
        self.conversation_ids.extend([row[1] for row in found])
        self.orders.extend([row[2] for row in found])
        self.stamps.extend([row[4] for row in found])
        self.roles.extend([ROLES.index(row[5]) for row in found])
        self.lengths.extend([len(row[6] or ()) for row in found])
        self.alive.extend(np.ones(len(found), dtype=bool))
        lexemes: list[str] = []
        holders: list[int] = []
        for offset, row in enumerate(found):
            for lexeme in row[6] or ():
                lexemes.append(lexeme)
                holders.append(start + offset)
        self._index(lexemes, np.array(holders, dtype=np.int32))
        if self.store is None:
            return
        width = self.store.width
        if len(found) > VECTOR_BLOCK:  # a read of the pair whole: room for it exactly, not half again
            self.store.reserve(len(found))
            self.present.reserve(len(found))
        # A block at a time: a pair read whole brings 100,000 vectors, and kept small, each block's
        # arithmetic would otherwise take several times their float size at once.
        for first in range(0, len(found), VECTOR_BLOCK):
            rows = found[first : first + VECTOR_BLOCK]
            block = np.zeros((len(rows), width), dtype=np.float32)
            present = np.zeros(len(rows), dtype=bool)
            for offset, row in enumerate(rows, start=first):
                unit = unit_from_binary(row[7], width)
                if unit is not None:
                    block[offset - first] = unit
                    present[offset - first] = True
                else:
                    self.missing.append(start + offset)
            self.store.extend(block)
            self.present.extend(present)

    def _index(self, lexemes: list[str], holders: np.ndarray) -> None:
        """Each (lexeme, row) pair into the lexeme's postings, grouped: one extend per lexeme."""
        if not lexemes:
            return
        numbered: dict[str, int] = {}
        codes = np.array([numbered.setdefault(lexeme, len(numbered)) for lexeme in lexemes], dtype=np.int32)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(numbered) + 1))
        for at, lexeme in enumerate(numbered):
            postings = self.holding.get(lexeme)
            if postings is None:
                postings = self.holding[lexeme] = _Postings()
            postings.extend(holders[order[bounds[at] : bounds[at + 1]]])

    def found(self, chosen: np.ndarray, scores: np.ndarray) -> Found:
        """Messages `chosen` as conversations.retrieval's candidates, each with its score."""
        return Found(
            self.ids.data[chosen], self.conversation_ids.data[chosen], self.orders.data[chosen],
            self.stamps.data[chosen], self.roles.data[chosen], self.lengths.data[chosen],
            scores[chosen].astype(np.float64, copy=False),
        )  # fmt: skip

    def fill(self, vectors: list[tuple[int, bytes]]) -> None:
        """Vectors found for messages kept without one (a zero vector is looked for no more)."""
        if self.store is None or not vectors:
            return
        place = dict(zip(self.ids.data[self.missing].tolist(), self.missing, strict=True))
        width = self.store.width
        found = set()
        for message_id, sent in vectors:
            row = place.get(message_id)
            if row is None:
                continue
            found.add(row)
            unit = unit_from_binary(sent, width)
            if unit is not None:
                self.store.put(row, unit)
                self.present.data[row] = True
        if found:
            self.missing = [row for row in self.missing if row not in found]

    def add_windows(self, vectors: list[tuple[int, bytes]]) -> None:
        """The windows' vectors of messages kept (each (message id, vector in pgvector's binary
        form)): of the messages a sync appended with their vector, or found one for."""
        if self.store is None or not vectors:
            return
        wanted = np.array(sorted({message_id for message_id, _ in vectors}), dtype=np.int64)
        rows = np.flatnonzero(np.isin(self.ids.view(), wanted) & self.alive.view())
        place = dict(zip(self.ids.data[rows].tolist(), rows.tolist(), strict=True))
        width = self.store.width
        units, owners = [], []
        for message_id, sent in vectors:
            row = place.get(message_id)
            unit = unit_from_binary(sent, width)
            if row is not None and unit is not None:
                units.append(unit)
                owners.append(row)
        if not units:
            return
        if self.windows is None:
            self.windows = _Column(np.float32, width)
        self.windows.extend(np.stack(units))
        self.window_rows.extend(owners)

    # --- the two halves -----------------------------------------------------------------

    def keyword_candidates(self, lexemes: Iterable[str], limit: int, *, b: float = WORDS_B) -> Found:
        """conversations.retrieval.keyword_matches over the kept messages, every lexeme counted
        exactly: the summed inverse document frequency (over the pair) of the query's lexemes each
        message holds, times the length normalisation against the found messages' average length,
        best first, then the latest said, then the latest recorded."""
        count = len(self)
        scores = np.zeros(count, dtype=np.float64)
        found = np.zeros(count, dtype=bool)
        n = self.messages
        for lexeme in lexemes:
            postings = self.holding.get(lexeme)
            if postings is None:
                continue
            rows = postings.read()  # live rows only (forget)
            d = len(rows)
            scores[rows] += math.log(1 + (n - d + 0.5) / (d + 0.5))
            found[rows] = True
        held = np.flatnonzero(found)
        if len(held):
            lengths = self.lengths.data[held].astype(np.float64)
            scores[held] *= length_factor(lengths, float(lengths.mean()), b)
        return self._best(held, scores, limit)

    def vector_view(self) -> VectorView:
        """The kept vectors as they are now, for a meaning half run after the pair's lock is let
        go (while the query is still being embedded): later appends and fills leave which rows it
        reads as they are (its own copy of which have a vector). A row that dies meanwhile has its
        vector zeroed, so it falls under the floor; were it found, the hits are read from the
        database, which no longer has it."""
        assert self.store is not None
        size = len(self)
        present = self.present.data[:size].copy()
        windows = None
        if self.windows is not None and self.windows.size:
            windows = (self.windows.view(), self.window_rows.view())
        return VectorView(self, self.ids.view()[:size], self.store.scorer(size, present), present, windows)

    def _best(self, found: np.ndarray, scores: np.ndarray, limit: int) -> Found:
        chosen = _best_first(found, scores, (self.ids.view(), self.stamps.view()), limit)
        return self.found(chosen, scores)


@dataclass(frozen=True)
class VectorView:
    """A kept pair's vectors at one moment (KeptPair.vector_view)."""

    pair: KeptPair  # its rows are read (only the first len(ids): they never change)
    ids: np.ndarray
    score: Callable[[np.ndarray], np.ndarray]  # each row's similarity to a unit query
    present: np.ndarray
    # The windows' vectors then, and the row each is of (appended later: not read, as later rows are not).
    windows: tuple[np.ndarray, np.ndarray] | None = None

    def similar_candidates(self, vector: np.ndarray, limit: int, *, windows: bool = True) -> Found:
        """The exact scan of conversations.retrieval.similar_messages over the kept vectors:
        similarity above VECTOR_FLOOR (a row's closest vector: its own, or one of its windows'
        unless `windows` is false), closest first, then the latest recorded."""
        norm = float(np.linalg.norm(vector))
        if not len(self.ids) or norm == 0:
            return NOTHING_FOUND
        query = np.asarray(vector, dtype=np.float32) / np.float32(norm)
        similarity = self.score(query)
        if windows and self.windows is not None:
            matrix, rows = self.windows
            np.maximum.at(similarity, rows, (matrix @ query).astype(similarity.dtype, copy=False))
        close = np.flatnonzero(self.present & (similarity > settings.VECTOR_FLOOR))
        return self.pair.found(_best_first(close, similarity, (self.ids,), limit), similarity)


def _best_first(rows: np.ndarray, scores: np.ndarray, ties: tuple[np.ndarray, ...], limit: int) -> np.ndarray:
    """The best `limit` of `rows` by score, highest first, ties broken by the highest of each of
    `ties` in turn from the last (as SQL's ORDER BY score DESC, ... DESC). Only the rows scoring at
    least the `limit`th best are sorted."""
    if len(rows) > limit:
        edge = np.partition(scores[rows], len(rows) - limit)[len(rows) - limit]
        rows = rows[scores[rows] >= edge]
    keys = (*(-column[rows] for column in ties), -scores[rows])
    chosen: np.ndarray = rows[np.lexsort(keys)][:limit]
    return chosen


# One statement, so one snapshot. Of the pair's conversations (kind 0), only those whose row is not
# the version this process kept (new, something said since, erased from, rolled back, or any other
# write to the row), each with its last order, its erasure count, its row's version, the id of its
# last message and of the message at the last order kept (a message of a transaction rolled back
# since is found out by it); every message after the last order kept of each (kind 1, tombstones
# left out; none when the pair has more than SEARCH_KEPT_MESSAGES), with its vector when the
# process keeps vectors and the pair has at most that many; the vectors found for messages kept
# without one (kind 2); and one row (kind 3) with the pair's message count (the sum of the last
# orders), the conversations kept that are gone, and the query's lexemes.
#
# Every append updates its conversation's row in the same transaction (conversations.services:
# the curator's counts), and so does an erasure (Conversation.erasures). So outside a transaction
# block, a conversation whose row is the version kept (its xmin: the transaction that wrote it)
# has had nothing said, erased or rolled back since, and its messages are not looked at: a pair of
# hundreds of conversations in which nothing changed costs no probe of its messages and brings
# back one row. Inside one (%(versions_hold)s false) every conversation is probed, as the
# transaction's own writes all carry its xmin, and no version is kept: one seen there could be the
# transaction's own, which its later writes would carry too.
_SYNC = """
WITH probed AS MATERIALIZED (
    SELECT c.id, c.team_id, c.erasures, c.xmin::text::bigint AS version, k.id IS NOT NULL AS was_kept,
           coalesce(k.through, 0) AS through, k.at_through AS kept_at_through,
           %(versions_hold)s AND k.version IS NOT DISTINCT FROM c.xmin::text::bigint AS same,
           last.id AS last_id, last."order" AS last_order
    FROM {conversation} c
    LEFT JOIN unnest(%(kept)s::bigint[], %(through)s::bigint[], %(at_through)s::bigint[], %(versions)s::bigint[])
        AS k(id, through, at_through, version) ON k.id = c.id
    LEFT JOIN LATERAL (
        SELECT m.id, m."order" FROM {message} m
        WHERE NOT (%(versions_hold)s AND k.version IS NOT DISTINCT FROM c.xmin::text::bigint)
          AND m.team_id = c.team_id AND m.conversation_id = c.id
        ORDER BY m."order" DESC LIMIT 1
    ) last ON true
    WHERE c.team_id = %(team)s AND c.agent_id = %(agent)s AND c.person_id = %(person)s
),
pair AS MATERIALIZED (
    SELECT p.id, p.erasures, p.version, p.through, p.same,
           CASE WHEN p.same THEN p.through ELSE coalesce(p.last_order, 0) END AS last,
           CASE WHEN p.same THEN p.kept_at_through ELSE p.last_id END AS last_id,
           CASE WHEN p.same THEN p.kept_at_through
                -- Mostly nothing was said since: the message at the last order kept is the last one.
                WHEN p.last_order = p.through THEN p.last_id
                WHEN p.was_kept THEN
                    (SELECT t.id FROM {message} t
                     WHERE t.team_id = p.team_id AND t.conversation_id = p.id AND t."order" = p.through)
           END AS at_through
    FROM probed p
)
SELECT 0, p.id, p.last, p.erasures, CASE WHEN %(versions_hold)s THEN p.version END, p.last_id, NULL::text,
       NULL::text[], NULL::bytea, p.at_through, NULL::bigint[]
FROM pair p
WHERE NOT p.same
UNION ALL
SELECT 1, m.id, m.conversation_id, m."order", NULL, (extract(epoch FROM m.created_at) * 1000000)::bigint,
       m.role, tsvector_to_array(m.search), {vector}, NULL, NULL
FROM pair p
CROSS JOIN LATERAL (
    -- Along the (team, conversation, order) index from the last order kept: never the
    -- conversation's earlier messages (the row comparison makes the planner take that index; by
    -- the conversation's own, it read them all).
    SELECT * FROM {message} m
    WHERE m.team_id = %(team)s AND m.conversation_id = p.id
      AND (m.team_id, m.conversation_id, m."order") > (%(team)s, p.id, p.through)
) m
WHERE p.last > p.through AND m.erased_at IS NULL AND (SELECT sum(last) FROM pair) <= %(most)s
UNION ALL
SELECT 2, v.message_id, NULL, NULL, NULL, NULL, NULL, NULL, vector_send(v.embedding), NULL, NULL
FROM unnest(%(probe)s::bigint[]) AS probed(id)
JOIN {vectors} v ON v.team_id = %(team)s AND v.message_id = probed.id AND v.model = %(model)s
WHERE v.namespace = %(namespace)s AND v.dim = %(dim)s
{windows}
UNION ALL
SELECT 3, NULL, (SELECT coalesce(sum(last), 0)::bigint FROM pair), NULL, NULL, NULL, NULL,
       array(SELECT DISTINCT lexeme FROM unnest(to_tsvector(%(config)s::regconfig, %(words)s)) ORDER BY 1), NULL, NULL,
       array(SELECT gone FROM unnest(%(kept)s::bigint[]) AS gone WHERE gone NOT IN (SELECT id FROM pair))
"""
# The windows' vectors (kind 4) of the messages this read brings with their vector, and of those
# whose vector it looks for (kind 2): stored before the message's own, they are there when it is.
_WITH_WINDOWS = f"""
UNION ALL
SELECT 4, w.message_id, NULL, NULL, NULL, NULL, NULL, NULL, vector_send(w.embedding), NULL, NULL
FROM pair p
CROSS JOIN LATERAL (
    SELECT m.id FROM {Message._meta.db_table} m
    WHERE m.team_id = %(team)s AND m.conversation_id = p.id
      AND (m.team_id, m.conversation_id, m."order") > (%(team)s, p.id, p.through)
) m
JOIN {MessageVector._meta.db_table} v ON v.team_id = %(team)s AND v.message_id = m.id AND v.model = %(model)s
JOIN {MessagePassage._meta.db_table} w ON w.message_id = m.id AND w.model = %(model)s
WHERE p.last > p.through AND (SELECT sum(last) FROM pair) <= least(%(most)s, %(vectors_up_to)s)
  AND v.namespace = %(namespace)s AND v.dim = %(dim)s AND w.namespace = %(namespace)s AND w.dim = %(dim)s
UNION ALL
SELECT 4, w.message_id, NULL, NULL, NULL, NULL, NULL, NULL, vector_send(w.embedding), NULL, NULL
FROM unnest(%(probe)s::bigint[]) AS probed(id)
JOIN {MessageVector._meta.db_table} v ON v.team_id = %(team)s AND v.message_id = probed.id AND v.model = %(model)s
JOIN {MessagePassage._meta.db_table} w ON w.message_id = probed.id AND w.model = %(model)s
WHERE v.namespace = %(namespace)s AND v.dim = %(dim)s AND w.namespace = %(namespace)s AND w.dim = %(dim)s
"""
_WITH_VECTOR = f"""(
    SELECT vector_send(v.embedding) FROM {MessageVector._meta.db_table} v
    WHERE v.team_id = %(team)s AND v.message_id = m.id AND v.namespace = %(namespace)s
      AND v.model = %(model)s AND v.dim = %(dim)s AND (SELECT sum(last) FROM pair) <= %(vectors_up_to)s
)"""


@dataclass
class Searchable:
    """A pair as one search sees it: the scope for the SQL halves, and the pair as kept, synced
    (None when it is not kept: the search then runs in SQL)."""

    scope: Scope
    kept: KeptPair | None
    vectors_complete: bool = False  # every live message's vector found was looked for

    @property
    def has_vectors(self) -> bool:
        """Whether the meaning half can run over the kept vectors (else it asks the database)."""
        return self.kept is not None and self.kept.store is not None and self.vectors_complete


Key = tuple[int, int, int]  # team, agent, person
_pairs: OrderedDict[Key, KeptPair] = OrderedDict()
_locks: dict[Key, threading.Lock] = {}  # one per pair kept or being searched
_in_use: dict[Key, int] = {}  # searches in progress, per pair
_reading: set[Key] = set()  # pairs a thread is reading (_read_soon)
_lock = threading.Lock()


def forget_conversations(conversation_ids: Iterable[int]) -> None:
    """Drop the pairs this process keeps that hold any of these conversations (an erasure or a
    delete, once it commits; another process reads them again at its next search of the pair)."""
    ids = set(conversation_ids)
    with _lock:
        for key in [key for key, kept in _pairs.items() if ids & kept.conversations.keys()]:
            del _pairs[key]
            if key not in _in_use:
                _locks.pop(key, None)


def forget_kept_pairs() -> None:
    """Drop everything the search keeps (tests, and a benchmark's cold search)."""
    with _lock:
        _pairs.clear()
        for key in [key for key in _locks if key not in _in_use]:
            del _locks[key]


def is_kept(agent: Agent, person: Person) -> bool:
    """Whether this process keeps the pair (benchmarks: a large pair is read on a thread)."""
    with _lock:
        return (agent.team_id, agent.pk, person.pk) in _pairs


def vectors_kept(agent: Agent, person: Person) -> str | None:
    """How this process keeps the pair's vectors ("exact", "quantised"), or None (benchmarks)."""
    with _lock:
        kept = _pairs.get((agent.team_id, agent.pk, person.pk))
    return kept.vectors_kind if kept is not None else None


def kept_counts() -> tuple[int, int]:
    """How many messages' words, and how many vectors (room for them), this process keeps."""
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
    """Bring the kept pair up to date (see the module's doc), keep it and bound what the process
    keeps. Holds the pair's lock."""
    with _lock:
        kept = _pairs.get(key)
    if kept is not None and kept.where is not None and kept.where != vectors:
        kept = None  # another model's vectors (the embedder changed): read the pair anew
    reading = kept if kept is not None else KeptPair(vectors=vectors)
    try:
        return _bring_up_to_date(
            key, reading, fresh=kept is None, words=words, config=config, vectors=vectors, inline=_inline_limit()
        )
    except BaseException:
        with _lock:  # half brought up to date: read anew next time
            _pairs.pop(key, None)
        raise


def _inline_limit() -> int | None:
    """The most messages a pair read from the start is read with the search that asks (a larger one
    is read on a thread: _read_soon). None inside a transaction: a thread could not see what the
    caller wrote, so the search reads the pair itself."""
    return None if connection.in_atomic_block else READ_INLINE_UP_TO


def _bring_up_to_date(
    key: Key,
    kept: KeptPair,
    *,
    fresh: bool,
    words: str,
    config: str,
    vectors: tuple[str, int] | None,
    inline: int | None = None,
) -> Searchable:
    complete = kept.vectors_complete  # this sync looks for every missing vector (probe)
    for attempt in range(3):
        most = min(settings.SEARCH_KEPT_MESSAGES, inline) if fresh and inline is not None else None
        rows = _read(key, kept, words=words, config=config, most=most)
        # The conversations not kept as they are now: last, erasures, last id, id at the last order
        # kept, row version.
        changed = {row[1]: (row[2], row[3], row[5], row[9], row[4]) for row in rows if row[0] == 0}
        summary = next(row for row in rows if row[0] == 3)
        messages, lexemes, gone = summary[2], tuple(summary[7] or ()), set(summary[10] or ())
        scope = Scope(key[0], key[1], key[2], messages, lexemes)
        if messages > settings.SEARCH_KEPT_MESSAGES:  # not kept: _read brought no messages
            with _lock:
                _pairs.pop(key, None)
            return Searchable(scope, None)
        if most is not None and messages > most:  # too large to read now: a thread reads it
            _read_soon(key, vectors)
            return Searchable(scope, None)
        # A conversation gone, erased from, or whose last message kept is not there any more (a
        # transaction that wrote it rolled back): its rows die, and it is read again from the
        # start. Checked after every read (a read runs in a snapshot of its own): what was kept
        # and not forgotten is compared each time.
        stale = [
            pk
            for pk, (_, erasures, last_id, _) in kept.conversations.items()
            if pk in gone or (pk in changed and (changed[pk][1] != erasures or changed[pk][3] != last_id))
        ]
        if not stale:
            break
        kept.forget(stale)
        if kept.dead > len(kept) // 2 or attempt == 2:  # half the rows dead, or changing still
            fits = vectors if _vector_kind(messages, vectors) else None
            return _bring_up_to_date(
                key, KeptPair(vectors=fits), fresh=True, words=words, config=config, vectors=vectors, inline=inline
            )
    kind = _vector_kind(messages, vectors)
    fits = vectors if kind is not None else None
    if not fresh and kept.where is None and fits is not None and len(kept) > 0:
        # Vectors now fit that were not kept (the pair shrank, or the limit rose): read it anew.
        return _bring_up_to_date(
            key, KeptPair(vectors=fits), fresh=True, words=words, config=config, vectors=vectors, inline=inline
        )
    if kept.where is not None:
        if kind is None:
            kept.drop_vectors()  # the pair outgrew them (a new one brought none: see _SYNC)
        else:
            kept.keep_vectors(kind)
    kept.append([row[1:9] for row in rows if row[0] == 1])
    kept.fill([(row[1], row[8]) for row in rows if row[0] == 2])
    kept.add_windows([(row[1], row[8]) for row in rows if row[0] == 4])
    kept.conversations.update(
        (pk, (last, erasures, last_id, version)) for pk, (last, erasures, last_id, _, version) in changed.items()
    )
    kept.messages = messages
    with _lock:
        _pairs[key] = kept
        _pairs.move_to_end(key)
        _bound()
    return Searchable(scope, kept, vectors_complete=fresh or complete)


def _vector_limit(width: int) -> int:
    """The most messages a pair may have and keep its vectors (one way or the other: _vector_kind)."""
    exact = min(settings.SEARCH_EXACT_UP_TO, settings.SEARCH_KEPT_VECTORS)
    small = _quantised_most(width)
    return small if small > settings.SEARCH_EXACT_UP_TO else exact


def _read_soon(key: Key, vectors: tuple[str, int] | None) -> None:
    """Read the pair from the start on a thread of its own (unless one is at it), and keep it: the
    searches meanwhile run in SQL. Nothing kept of the pair is used until it is read whole."""
    with _lock:
        if key in _reading or (key in _pairs and _pairs[key].dead <= len(_pairs[key]) // 2):
            return  # being read, or read whole meanwhile
        _reading.add(key)
        _pairs.pop(key, None)

    def read() -> None:
        try:
            _bring_up_to_date(key, KeptPair(vectors=vectors), fresh=True, words="", config="simple", vectors=vectors)
        except Exception:  # the next search of the pair asks again
            logger.exception("reading a conversation pair for the search failed; its searches run in SQL")
        finally:
            with _lock:
                _reading.discard(key)
            connection.close()  # this thread's own connection

    threading.Thread(target=read, name="mnemo-kept-pair", daemon=True).start()


def reading() -> bool:
    """Whether a thread is reading a pair (tests and benchmarks wait for it)."""
    with _lock:
        return bool(_reading)


def _read(key: Key, kept: KeptPair, *, words: str, config: str, most: int | None = None) -> list[tuple[Any, ...]]:
    """_SYNC for this kept pair (everything, for a new one)."""
    team, agent, person = key
    model, dim = kept.where if kept.where is not None else ("", 0)
    sql = _SYNC.format(
        conversation=Conversation._meta.db_table,
        message=Message._meta.db_table,
        vectors=MessageVector._meta.db_table,
        vector=_WITH_VECTOR if kept.where is not None else "NULL::bytea",
        # Windows exist only with SEARCH_PASSAGES on: off, the sync reads no more than before them.
        windows=_WITH_WINDOWS if kept.where is not None and settings.SEARCH_PASSAGES else "",
    )
    through = list(kept.conversations.items())
    with statement_cursor() as cursor:
        cursor.execute(
            sql,
            {
                "team": team,
                "agent": agent,
                "person": person,
                "kept": _array(pk for pk, _ in through),
                "through": _array(last for _, (last, _, _, _) in through),
                "at_through": _array(last_id for _, (_, _, last_id, _) in through),
                "versions": _array(version for _, (_, _, _, version) in through),
                "versions_hold": not connection.in_atomic_block,
                "most": settings.SEARCH_KEPT_MESSAGES if most is None else most,
                "vectors_up_to": _vector_limit(dim) if dim else 0,
                "probe": _array(kept.probe()),
                "namespace": namespace_for(team),
                "model": model,
                "dim": dim,
                "config": config,
                "words": words,
            },
        )
        return list(cursor.fetchall())


def _array(values: Iterable[int | None]) -> str:
    """Integers as a Postgres array literal: psycopg would check each element of a list on its
    way (a pair of hundreds of conversations sends four such arrays at every search)."""
    return "{" + ",".join("NULL" if value is None else str(int(value)) for value in values) + "}"


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
