"""The two halves of the conversation search, each one bounded query in Postgres.

`rank_messages` (conversations.queries) combines them. A pair a process keeps
(conversations.kept_pairs) is searched there instead, both halves or the words alone; these
queries search the rest: a pair larger than SEARCH_KEPT_MESSAGES, the meaning half of one with
more messages than its vectors kept or while a backlog of its vectors is caught up, or every pair
when SEARCH_KEPT_MESSAGES is 0. What keeps them
fast at 100,000 messages between one agent and one person:

- The pair's size is read from the last message of each of its conversations (one probe of the
  message_recent index each), never by counting its messages.
- Words: the GIN index finds every message of the team holding one of the query's lexemes; only
  then are they narrowed to the pair, and each is scored in one pass. A lexeme that Postgres'
  statistics (ANALYZE samples every table, every team's messages) say may be common is counted
  in the pair, up to SEARCH_COMMON_WORD_MESSAGES; when the pair says it more often than that it
  is not used to *find* messages: it still scores the messages the rarer lexemes found, its count
  in the pair estimated from those statistics (at least the threshold).
  Without statistics (a table never analysed) every lexeme finds, and the half is exact.
- Meaning: a message scores its closest vector, its head's or one of its windows' (a long
  message's passages: conversations.passages). A pair with more than SEARCH_EXACT_UP_TO messages
  is searched through an HNSW index of the heads only
  (migration conversations/0010, built for the local models' width, 384) when the pair holds
  enough of the index; otherwise the pair's own vectors are scanned exactly. pgvector 0.6 filters
  after the index scan, so the approximate path asks the index for enough neighbours that the
  pair's share of them is still APPROXIMATE_CANDIDATES, and scans exactly when that would be
  more than one index scan gives (hnsw.ef_search is at most 1,000: the pair must hold about an
  eighth of the index's vectors), or when the table's statistics do not yet count the pair's.
- Round trips: besides the statistics and the common words' counts it keeps a while, a search
  makes three (the pair brought up to date with the query's lexemes: kept_pairs; both halves,
  sent together by run_together when the query's vector is already at hand; the hits), and four
  when the query is still being embedded (the words half then reads meanwhile). On a busy machine
  each one costs about a millisecond of waiting for the server's turn to run.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, cast

import numpy as np
from django.conf import settings
from django.db import connection

from accounts.models import Agent, Person
from config import prepared
from config.prepared import statement_cursor
from conversations.models import Message, MessageVector
from memory.indexing import namespace_for, vector_text

# id, conversation, order, when said (created_at, in microseconds since the epoch, as the SQL here and
# kept_pairs' _SYNC read it: (extract(epoch FROM created_at) * 1000000)::bigint), role, its length
# (distinct lexemes: Postgres' length(search)), score. An int, not a datetime: building a datetime
# for each of a search's ~1,000 candidate rows, here or in psycopg, cost about 1.7 ms of Python a
# search on a slow machine.
Row = tuple[int, int, int, int, str, int, float]


ROLES = tuple(Message.Role.values)  # a Found's roles are indices in this


@dataclass(frozen=True)
class Found:
    """One half's candidates as numpy columns, a Row's fields an array each (roles as indices in
    ROLES): what the ranking reads (conversations.queries._rank), without a tuple per candidate."""

    ids: np.ndarray  # int64
    conversations: np.ndarray  # int64
    orders: np.ndarray  # int64
    stamps: np.ndarray  # int64: when said, as in a Row
    roles: np.ndarray  # int8
    lengths: np.ndarray  # int32: distinct lexemes
    scores: np.ndarray  # float64

    @classmethod
    def of_rows(cls, rows: list[Row]) -> Found:
        if not rows:
            return NOTHING_FOUND
        ids, conversations, orders, stamps, roles, lengths, scores = zip(*rows, strict=True)
        return cls(
            np.array(ids, dtype=np.int64),
            np.array(conversations, dtype=np.int64),
            np.array(orders, dtype=np.int64),
            np.array(stamps, dtype=np.int64),
            np.array([ROLES.index(role) for role in roles], dtype=np.int8),
            np.array(lengths, dtype=np.int32),
            np.array(scores, dtype=np.float64),
        )

    def __len__(self) -> int:
        return len(self.ids)

    def without(self, ids: frozenset[int]) -> Found:
        """These candidates but the messages of `ids`."""
        if not ids or not len(self.ids):
            return self
        kept = ~np.isin(self.ids, np.fromiter(ids, dtype=np.int64, count=len(ids)))
        if kept.all():
            return self
        return Found(*(getattr(self, name)[kept] for name in FOUND_COLUMNS))


FOUND_COLUMNS = tuple(column.name for column in fields(Found))  # in a Row's order


def _nothing(dtype: type) -> np.ndarray:
    empty: np.ndarray = np.zeros(0, dtype=dtype)
    empty.flags.writeable = False  # shared by every search that finds nothing
    return empty


NOTHING_FOUND = Found(
    _nothing(np.int64), _nothing(np.int64), _nothing(np.int64), _nothing(np.int64), _nothing(np.int8),
    _nothing(np.int32), _nothing(np.float64),
)  # fmt: skip


# At most this many candidates are read from each half (words, meaning) before they are combined.
CANDIDATES = 500
# Widths with an HNSW index over messages' vectors (migration conversations/0010).
INDEXED_WIDTHS = frozenset({384})
# Candidates wanted from the approximate path (the index then gives at most hnsw.ef_search).
APPROXIMATE_CANDIDATES = 100
MAX_EF_SEARCH = 1_000
# BM25's k1 and b for the words half's length normalisation (length_factor). On the LongMemEval
# tune half, rank_messages' turn recall@10 is 89.4 with b 0.75 and 87.7 with 0.5, 0.3 or none
# (plain BM25: 84.7); on the LoCoMo dev half it costs 0.3 (80.0 against 80.3 with none).
WORDS_K1 = 1.2
WORDS_B = 0.75
# How long this process keeps what it read of Postgres' statistics.
STATISTICS_SECONDS = 300.0


@dataclass(frozen=True)
class Scope:
    """One agent's conversations with one person: what both halves search."""

    team_id: int
    agent_id: int
    person_id: int
    messages: int  # in the pair, tombstones included
    lexemes: tuple[str, ...] = ()  # the query's words as the words half reads them

    @classmethod
    def of(cls, agent: Agent, person: Person, *, words: str = "", config: str = "simple") -> Scope:
        """The pair's size, and the lexemes of `words` read in `config`: one round trip."""
        with statement_cursor() as cursor:
            cursor.execute(
                _SCOPE,
                {"team": agent.team_id, "agent": agent.pk, "person": person.pk, "config": config, "words": words},
            )
            messages, lexemes = cursor.fetchone()
        return cls(agent.team_id, agent.pk, person.pk, int(messages), tuple(lexemes or ()))


# Orders run 1, 2, 3… in each conversation (record_message and the import), so the last one's is
# the conversation's count.
_SCOPE = """
SELECT
    (SELECT coalesce(sum(last."order"), 0)
     FROM conversations_conversation c
     CROSS JOIN LATERAL (
         SELECT m."order" FROM conversations_message m
         WHERE m.team_id = c.team_id AND m.conversation_id = c.id
         ORDER BY m."order" DESC LIMIT 1
     ) last
     WHERE c.team_id = %(team)s AND c.agent_id = %(agent)s AND c.person_id = %(person)s),
    array(SELECT DISTINCT lexeme FROM unnest(to_tsvector(%(config)s::regconfig, %(words)s)) ORDER BY 1)
"""


class _Statistics:
    """What Postgres' statistics say of the message table, read at most every STATISTICS_SECONDS:
    each common lexeme's share of the messages, and how many vectors each indexed width has."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read_at = -math.inf
        self._shares: dict[str, float] = {}
        self._vectors: dict[int, float] = {}
        self._messages = 0.0

    def _refresh(self) -> None:
        if time.monotonic() - self._read_at < STATISTICS_SECONDS:
            return
        with connection.cursor() as cursor:
            cursor.execute(
                """
                SELECT most_common_elems::text::text[], most_common_elem_freqs
                FROM pg_stats
                WHERE schemaname = current_schema() AND tablename = %s AND attname = 'search'
                """,
                [Message._meta.db_table],
            )
            found = cursor.fetchone()
            cursor.execute("SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", [MessageVector._meta.db_table])
            vectors = cursor.fetchone()
            cursor.execute("SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", [Message._meta.db_table])
            messages = cursor.fetchone()
        shares: dict[str, float] = {}
        if found and found[0] and found[1]:
            shares = dict(zip(found[0], (float(f) for f in found[1]), strict=False))
        with self._lock:
            self._shares = shares
            self._messages = float(messages[0]) if messages and messages[0] and messages[0] > 0 else 0.0
            # One width in practice: a second model's vectors only while a re-embedding runs.
            # Never analysed (reltuples -1): unknown, and the exact scan is used (vectors() is 0).
            total = float(vectors[0]) if vectors and vectors[0] and vectors[0] > 0 else 0.0
            self._vectors = dict.fromkeys(INDEXED_WIDTHS, total)
            self._read_at = time.monotonic()

    def share(self, lexeme: str) -> float | None:
        """The lexeme's share of all messages, when it is common enough to be in the statistics."""
        self._refresh()
        return self._shares.get(lexeme)

    def found_in_table(self, lexemes: list[str]) -> float | None:
        """About how many messages of the whole table hold one of these lexemes, or None when the
        statistics cannot say (never analysed). A lexeme too rare to be in them counts as rare as
        the rarest one that is."""
        self._refresh()
        if not self._messages or not self._shares:
            return None
        rarest = min(self._shares.values())
        return self._messages * sum(self._shares.get(lexeme, rarest) for lexeme in lexemes)

    def vectors(self, width: int) -> float:
        self._refresh()
        return self._vectors.get(width, 0.0)

    def forget(self) -> None:
        with self._lock:
            self._read_at = -math.inf
        with _held_lock:
            _HELD.clear()


STATISTICS = _Statistics()


# {finding}: the lexemes that find messages, OR-ed; {has}: one 0/1 column per lexeme; {counts}: the
# pair's count of each (counted over what was found for a finding lexeme, which is exact, since
# every message holding it was found; estimated from the statistics for a common one); {weights}:
# each lexeme's inverse document frequency; {score}: the sum of the weights of the lexemes held.
# {found}: the pair's messages holding a finding lexeme, through the team's GIN index first
# (_FOUND_IN_TEAM) or through the pair's conversations first (_FOUND_IN_PAIR), whichever reads
# fewer rows, each with its {has} columns computed as it is found: the messages' text-search
# vectors are never kept in a CTE (at 100,000 messages, materialising ~1,500 of them and reading
# them back took a search's words half from 4.2 ms to 5.2 ms, rows fetched included).
_FOUND_IN_TEAM = """
    SELECT x.id, x.conversation_id, x."order", x.created_at, x.role, length(x.search) AS dl, {has}
    FROM (
        SELECT m.id, m.conversation_id, m."order", m.created_at, m.role, m.search
        FROM conversations_message m
        WHERE m.team_id = %(team)s AND m.search @@ ({finding})
        OFFSET 0
    ) x
    JOIN conversations_conversation c ON c.id = x.conversation_id
    WHERE c.agent_id = %(agent)s AND c.person_id = %(person)s
"""
_FOUND_IN_PAIR = """
    SELECT x.id, x.conversation_id, x."order", x.created_at, x.role, length(x.search) AS dl, {has}
    FROM conversations_conversation c
    CROSS JOIN LATERAL (
        SELECT m.id, m.conversation_id, m."order", m.created_at, m.role, m.search
        FROM (
            -- OFFSET 0 keeps the words out of this scan: the conversation's messages are read by
            -- the message_recent index, never by the GIN index over every team's messages.
            SELECT * FROM conversations_message m WHERE m.team_id = c.team_id AND m.conversation_id = c.id OFFSET 0
        ) m
        WHERE m.search @@ ({finding})
    ) x
    WHERE c.team_id = %(team)s AND c.agent_id = %(agent)s AND c.person_id = %(person)s
"""
_KEYWORD_SQL = """
WITH matched AS MATERIALIZED ({found}),
counts AS (SELECT {counts}, avg(dl)::float8 AS avgdl FROM matched),
weights AS MATERIALIZED (SELECT {weights}, greatest(avgdl, 1.0) AS avgdl FROM counts)
SELECT x.id, x.conversation_id, x."order", (extract(epoch FROM x.created_at) * 1000000)::bigint, x.role, x.dl,
       ({score}) * {norm} AS score
FROM matched x CROSS JOIN weights w
ORDER BY score DESC, x.created_at DESC, x.id DESC
LIMIT %(limit)s
"""


_HELD_IN_PAIR = """
SELECT t.lexeme, (
    SELECT count(*) FROM (
        SELECT 1 FROM conversations_message m
        JOIN conversations_conversation c ON c.id = m.conversation_id
        WHERE m.team_id = %(team)s AND c.agent_id = %(agent)s AND c.person_id = %(person)s
          AND m.search @@ quote_literal(t.lexeme)::tsquery
        LIMIT %(enough)s
    ) held
)
FROM unnest(%(lexemes)s::text[]) AS t(lexeme)
"""


# What _held_in_pair counted, kept STATISTICS_SECONDS: (team, agent, person, lexeme, enough) ->
# (when, count). Only lexemes the whole table says are common are counted, so nothing a person
# said that is theirs alone is kept here.
_HELD: dict[tuple[int, int, int, str, int], tuple[float, int]] = {}
_HELD_MAX = 50_000
_held_lock = threading.Lock()


def _held_in_pair(scope: Scope, lexemes: list[str], enough: int) -> dict[str, int]:
    """How many of the pair's messages hold each lexeme, counted up to `enough` (and kept a while:
    a word common in a pair stays so)."""
    now = time.monotonic()
    pair = (scope.team_id, scope.agent_id, scope.person_id)
    held: dict[str, int] = {}
    with _held_lock:
        for lexeme in lexemes:
            kept = _HELD.get((*pair, lexeme, enough))
            if kept is not None and now - kept[0] < STATISTICS_SECONDS:
                held[lexeme] = kept[1]
    missing = [lexeme for lexeme in lexemes if lexeme not in held]
    if missing:
        with statement_cursor() as cursor:
            cursor.execute(
                _HELD_IN_PAIR,
                {
                    "team": scope.team_id,
                    "agent": scope.agent_id,
                    "person": scope.person_id,
                    "lexemes": missing,
                    "enough": enough,
                },
            )
            counted = {lexeme: int(count) for lexeme, count in cursor.fetchall()}
        held.update(counted)
        with _held_lock:
            if len(_HELD) + len(counted) > _HELD_MAX:
                _HELD.clear()
            _HELD.update({(*pair, lexeme, enough): (now, count) for lexeme, count in counted.items()})
    return held


def length_factor(lengths: np.ndarray, average: float, b: float = WORDS_B) -> np.ndarray:
    """BM25's length normalisation with a term frequency of one: what a message's summed weights are
    multiplied by, for messages of `lengths` distinct lexemes against an `average` (the messages
    found's). A long message holds more of any query's words by chance; this evens it out. With b
    0 every factor is 1: no normalisation."""
    typical = lengths / max(average, 1.0)
    factor: np.ndarray = (WORDS_K1 + 1) / (1 + WORDS_K1 * (1 - b + b * typical))
    return factor


def keyword_matches(scope: Scope, limit: int = CANDIDATES, *, b: float = WORDS_B) -> list[Row]:
    """Every message of the pair holding one of the scope's lexemes, scored by
    the summed inverse document frequency (over the pair) of the distinct lexemes it holds, times
    BM25's length normalisation (length_factor; binary term frequency: a long assistant message
    that says a word ten times is not ten times about it). A name said in every other message
    counts for little; a rare word for much. Best first."""
    statement = keyword_statement(scope, limit, b=b)
    return run_together([statement])[0] if statement is not None else []


def keyword_statement(scope: Scope, limit: int = CANDIDATES, *, b: float = WORDS_B) -> Statement | None:
    """The query keyword_matches runs (None when there is nothing to find)."""
    lexemes = scope.lexemes
    if not lexemes or scope.messages == 0:
        return None
    # No lexeme can be common in a pair smaller than the threshold: the statistics are not read.
    common_possible = scope.messages > settings.SEARCH_COMMON_WORD_MESSAGES
    expected = {
        lexeme: (STATISTICS.share(lexeme) or 0.0) * scope.messages if common_possible else 0.0 for lexeme in lexemes
    }
    threshold = settings.SEARCH_COMMON_WORD_MESSAGES
    suspects = [lexeme for lexeme in lexemes if expected[lexeme] > threshold]
    if suspects:
        # The statistics cover every team's messages: a word is common only if this pair says it
        # in more than the threshold's messages (counted up to there, no further).
        held = _held_in_pair(scope, suspects, threshold + 1)
        for lexeme in suspects:
            if held[lexeme] <= threshold:
                expected[lexeme] = 0.0
            else:
                expected[lexeme] = max(expected[lexeme], float(held[lexeme]))
    finding = [lexeme for lexeme in lexemes if expected[lexeme] <= threshold]
    if not finding:  # every word is common: the least common one still finds
        finding = [min(lexemes, key=expected.__getitem__)]
    params: dict[str, int | str | float] = {
        "team": scope.team_id,
        "agent": scope.agent_id,
        "person": scope.person_id,
        "limit": limit,
        "n": scope.messages,
    }
    counts = []
    for i, lexeme in enumerate(lexemes):
        params[f"t{i}"] = lexeme
        if lexeme in finding:
            counts.append(f"sum(h{i}) AS d{i}")
        else:
            params[f"e{i}"] = expected[lexeme]
            counts.append(f"%(e{i})s::float8 AS d{i}")
    # A small pair is read through its conversations (no statistics needed: at most
    # SEARCH_COMMON_WORD_MESSAGES rows). A larger one through the team's index, unless the table's
    # statistics say that would bring in more than twice the pair's messages (a pair in a large
    # team asking common words). Before any statistics: the pair, up to SEARCH_EXACT_UP_TO messages.
    if scope.messages <= settings.SEARCH_COMMON_WORD_MESSAGES:
        first = _FOUND_IN_PAIR
    else:
        in_team = STATISTICS.found_in_table(finding)
        if in_team is None:  # not analysed yet: read the pair unless it is large
            first = _FOUND_IN_PAIR if scope.messages <= settings.SEARCH_EXACT_UP_TO else _FOUND_IN_TEAM
        else:
            first = _FOUND_IN_PAIR if in_team > 2 * scope.messages else _FOUND_IN_TEAM
    sql = _KEYWORD_SQL.format(
        found=first.format(
            finding=" || ".join(f"quote_literal(%(t{i})s)::tsquery" for i, x in enumerate(lexemes) if x in finding),
            has=", ".join(f"(x.search @@ quote_literal(%(t{i})s)::tsquery)::int AS h{i}" for i in range(len(lexemes))),
        ),
        counts=", ".join(counts),
        weights=", ".join(f"ln(1 + (%(n)s - d{i} + 0.5)::float8 / (d{i} + 0.5)) AS w{i}" for i in range(len(lexemes))),
        score=" + ".join(f"x.h{i} * w.w{i}" for i in range(len(lexemes))),
        norm=f"({WORDS_K1 + 1!r} / (1 + {WORDS_K1!r} * (1 - {float(b)!r} + {float(b)!r} * x.dl / w.avgdl)))",
    )
    return Statement(sql, params)


# The index's nearest, then the pair's among them. Their messages and conversations are read by
# id: with a condition on the messages' team too, a team newer than Postgres' statistics had each
# neighbour joined to every message of the team by the team's index (see _EXACT_SQL).
_APPROXIMATE_SQL = """
SELECT near.message_id, m.conversation_id, m."order", (extract(epoch FROM m.created_at) * 1000000)::bigint, m.role,
       length(m.search), 1 - near.distance
FROM (
    SELECT v.message_id, v.team_id, v.namespace, v.model,
           v.embedding::vector({width}) <=> %(query)s::vector({width}) AS distance
    FROM conversations_messagevector v
    WHERE v.dim = {width}
    ORDER BY v.embedding::vector({width}) <=> %(query)s::vector({width})
    LIMIT %(ef)s
) near
JOIN conversations_message m ON m.id = near.message_id
JOIN conversations_conversation c ON c.id = m.conversation_id
WHERE near.team_id = %(team)s AND near.namespace = %(namespace)s AND near.model = %(model)s
  AND c.agent_id = %(agent)s AND c.person_id = %(person)s AND near.distance < %(below)s
ORDER BY near.distance, near.message_id DESC
LIMIT %(limit)s
"""


def approximate_depth(scope: Scope, width: int) -> int | None:
    """How many neighbours to ask the HNSW index for so that about APPROXIMATE_CANDIDATES are the
    pair's, or None when the exact scan is the one to use."""
    if width not in INDEXED_WIDTHS or scope.messages <= settings.SEARCH_EXACT_UP_TO:
        return None
    vectors = STATISTICS.vectors(width)
    if vectors < scope.messages:  # unknown, or older than the pair's growth: the share is not known
        return None
    share = scope.messages / vectors
    depth = math.ceil(APPROXIMATE_CANDIDATES / share * 1.2)
    return depth if depth <= MAX_EF_SEARCH else None


def similar_messages(
    scope: Scope, vector: np.ndarray, *, model: str, width: int, limit: int = CANDIDATES
) -> tuple[list[Row], str]:
    """Messages of the pair close in meaning to `vector` (cosine similarity above VECTOR_FLOOR),
    closest first, among the vectors of this team's namespace, this model and width. Returns
    which path answered: "approximate" (HNSW) or "exact"."""
    statement, path = similar_statement(scope, vector, model=model, width=width, limit=limit)
    return run_together([statement])[0], path


def similar_statement(
    scope: Scope, vector: np.ndarray, *, model: str, width: int, limit: int = CANDIDATES, windows: bool = True
) -> tuple[Statement, str]:
    """The query similar_messages runs, and which path it takes (the exact one scores a long
    message's windows too, unless `windows` is false)."""
    below = 1.0 - settings.VECTOR_FLOOR
    depth = approximate_depth(scope, width)
    if depth is not None:
        # Statements sent together run in one transaction, so SET LOCAL lasts this search only,
        # never the pooled connection's next user (and no BEGIN and COMMIT of its own, a round
        # trip each). Inside a caller's transaction the last statement puts the depth back.
        return Statement(
            _APPROXIMATE_SQL.format(width=int(width)),
            {
                "query": vector_text(vector),
                "ef": depth,
                "team": scope.team_id,
                "namespace": namespace_for(scope.team_id),
                "model": model,
                "agent": scope.agent_id,
                "person": scope.person_id,
                "below": below,
                "limit": min(limit, APPROXIMATE_CANDIDATES),
            },
            before=(f"SET LOCAL hnsw.ef_search = {int(depth)}",),
            after=("SET LOCAL hnsw.ef_search TO DEFAULT",),
        ), "approximate"  # its rows' similarity is a float8
    params = {
        "query": vector_text(vector),
        "team": scope.team_id,
        "namespace": namespace_for(scope.team_id),
        "model": model,
        "dim": int(width),
        "agent": scope.agent_id,
        "person": scope.person_id,
        "below": below,
        "limit": limit,
    }
    if not windows:  # heads only: the statement as it was before windows, no lookup per message
        return Statement(_EXACT_SQL, params, distances=True), "exact"
    return Statement(_EXACT_SQL_WITH_WINDOWS, params, distances=True), "exact"


# The pair's vectors scanned exactly, closest first (then the latest recorded): written by hand, as
# compiling the equivalent queryset cost more than running it (8 ms a search on this project's
# 2-core machine, where a pair of 5,000 messages runs it in under 2).
#
# The pair's messages are read first (materialised: the planner cannot fold them into a join of
# its own), and then each one's vector by the message's id. A team newer than Postgres' statistics
# looks empty to the planner, which otherwise read the team's vectors and, for each close enough,
# every message of the team by the team's index (or, the other way round, every vector of the team
# for each message): the pair times the team, 20-40 ms a turn for a pair of 640 messages. The pair
# is the team's (its conversations are), and so are its messages' vectors, in the team's
# namespace: no condition on the vectors' team is left for the planner to pick that index by.
_PAIR_CLOSEST = """
WITH pair AS MATERIALIZED (
    SELECT m.id, m.conversation_id, m."order", m.created_at, m.role
    FROM conversations_conversation c
    JOIN conversations_message m ON m.team_id = c.team_id AND m.conversation_id = c.id
    WHERE c.team_id = %(team)s AND c.agent_id = %(agent)s AND c.person_id = %(person)s
)
SELECT closest.id, closest.conversation_id, closest."order", closest.said, closest.role,
       -- Only for the closest: the lexemes of every message of the pair are not read.
       (SELECT length(m.search) FROM conversations_message m WHERE m.id = closest.id), closest.distance
FROM (
    SELECT p.id, p.conversation_id, p."order", (extract(epoch FROM p.created_at) * 1000000)::bigint AS said, p.role,
           <DISTANCES>
    LIMIT %(limit)s
) closest
ORDER BY closest.distance, closest.id DESC
"""

# Each message's head vector.
_EXACT_SQL = _PAIR_CLOSEST.replace(
    "<DISTANCES>",
    """v.embedding <=> %(query)s::vector AS distance
    FROM pair p
    JOIN conversations_messagevector v ON v.message_id = p.id
    WHERE v.namespace = %(namespace)s AND v.model = %(model)s AND v.dim = %(dim)s
      AND v.embedding <=> %(query)s::vector < %(below)s
    ORDER BY distance, p.id DESC""",
)

# With SEARCH_PASSAGES on: a message scores its closest vector, its head's or one of its windows'
# (a long message's passages, stored before its head: a message with a head has its windows).
# least() passes over NULL, what min() gives a message without windows. Both by the message's id,
# in a lateral: the planner has no join to choose.
_EXACT_SQL_WITH_WINDOWS = _PAIR_CLOSEST.replace(
    "<DISTANCES>",
    """d.distance
    FROM pair p
    CROSS JOIN LATERAL (
        SELECT least(
            v.embedding <=> %(query)s::vector,
            (SELECT min(w.embedding <=> %(query)s::vector) FROM conversations_messagepassage w
             WHERE w.message_id = p.id AND w.namespace = %(namespace)s AND w.model = %(model)s AND w.dim = %(dim)s)
        ) AS distance
        FROM conversations_messagevector v
        WHERE v.message_id = p.id AND v.namespace = %(namespace)s AND v.model = %(model)s AND v.dim = %(dim)s
        OFFSET 0  -- kept a lateral: flattened into a join, the planner chose the team's vectors again
    ) d
    WHERE d.distance < %(below)s
    ORDER BY d.distance, p.id DESC""",
)


@dataclass(frozen=True)
class Statement:
    """SQL for one half of the search, with the settings that go before and after it (SET LOCAL)."""

    sql: str
    params: Mapping[str, Any] | Sequence[Any]
    distances: bool = False  # its rows end with a cosine distance, turned into the similarity
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()


def run_together(statements: list[Statement]) -> list[list[Row]]:
    """Each statement's rows, all sent in one round trip (about a millisecond each on a busy
    machine), prepared (config.prepared.run_together). Together they run in one transaction, as
    any SET LOCAL among them expects."""
    sent: list[tuple[str, Any]] = []
    rows_at = []
    for statement in statements:
        sent += [(setting, None) for setting in statement.before]
        rows_at.append(len(sent))
        sent.append((statement.sql, statement.params))
        sent += [(setting, None) for setting in statement.after]
    # As psycopg builds them, all at once: iterating the cursor and rebuilding each of up to 500
    # rows cost about half a millisecond.
    results = prepared.run_together(sent)
    found = [cast(list[Row], results[at] or []) for at in rows_at]
    return [
        [(pk, c, o, at, role, n, 1.0 - float(d)) for pk, c, o, at, role, n, d in rows] if statement.distances else rows
        for statement, rows in zip(statements, found, strict=True)
    ]
