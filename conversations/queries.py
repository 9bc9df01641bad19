"""Reads over the chat of record: recent messages and ranked search (words and meaning)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from itertools import takewhile
from typing import Any

import numpy as np
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.models import Agent, Person
from config.prepared import Prepared, statement_cursor
from config.replicas import read_connection, reads_alias
from conversations import kept_pairs
from conversations.dates import NamedDate, named_dates, without_dates
from conversations.models import Conversation, ConversationImport, Message, MessagePassage, MessageVector, Turn
from conversations.retrieval import (
    CANDIDATES,
    FOUND_COLUMNS,
    NOTHING_FOUND,
    ROLES,
    WORDS_B,
    Found,
    Scope,
    Statement,
    keyword_statement,
    run_together,
    similar_statement,
)
from conversations.subjects import pronoun_side
from memory.embedders import get_embedder
from memory.indexing import namespace_for
from memory.language import text_search_config
from memory.text import STOP_WORDS, real_word_count, words
from memory.vectors import embed_query_soon, kept_query_vector

_LEXEME = re.compile(r"^[^\W_]+$")  # letters and digits of any script: nothing tsquery syntax reads


def meaningful_terms(text: str) -> list[str]:
    """Distinct words that carry meaning (stop words removed), safe to put in a tsquery.

    The query's text-search configuration then drops its own stop words too: `english` also drops
    memory.text.KEPT_FRAGMENTS (so "don't" searches nothing here, while it counts as words for
    worth_searching).
    """
    seen: dict[str, None] = {}
    for word in words(text):
        if word not in STOP_WORDS and _LEXEME.match(word):
            seen.setdefault(word, None)
    return list(seen)


_AGENTS_TURN = Prepared(
    lambda team_id, agent_id, pk: Turn.objects.filter(team_id=team_id, conversation__agent_id=agent_id, pk=pk)[:1],
    team_id=int,
    agent_id=int,
    pk=int,
)


def agents_turn(*, team_id: int, agent: Agent, turn_id: int) -> Turn | None:
    """The team's turn of this id in one of this agent's conversations, or None."""
    return _AGENTS_TURN.first(team_id=team_id, agent_id=agent.pk, pk=turn_id)


def messages_between(agent: Agent, person: Person) -> QuerySet[Message]:
    return Message.objects.filter(team_id=agent.team_id, conversation__agent=agent, conversation__person=person)


# How much of each neighbouring message's score a message is given (the one before it and the
# one after it in its conversation). A reply means little alone ("Yes, last Tuesday!"): what it
# answers is what a later question asks about.
NEIGHBOUR_SHARE = 0.3
# And this much of the scores of the messages two before and two after it: a speaker's own
# previous and next turn, across the other's reply ("I adopted a dog!" / "What's its name?" / "Max").
SECOND_NEIGHBOUR_SHARE = 0.2
# A message of more distinct lexemes than this takes this over its count of those shares: a long
# message says what it means on its own. Chosen on the LongMemEval tune half and the LoCoMo dev
# half; rank_messages' turn recall@10 there: 79.7 -> 89.4 and 80.2 -> 80.0.
NEIGHBOURS_UP_TO = 24
# And one longer than NEIGHBOURS_GIVE_UP_TO gives its neighbours that much less of its own score:
# a 300-word answer that matches the query somewhere does not lift the short question before it
# and the thanks after it above messages that match on their own (LongMemEval's long turns; on
# LoCoMo's short ones it changes little).
NEIGHBOURS_GIVE_UP_TO = 12
# When a query names one side of the conversation ("What did Melanie paint?", with Melanie the
# person or the agent's name), the other side's messages keep this share of their score, what
# their neighbours gave them included: what a person did is mostly said by that person. They still
# give their neighbours their whole score: the other side's question ("Which game was it?") is
# what finds the named side's answer ("Counter-Strike, and we won!").
OTHER_SPEAKER_SHARE = 0.5
# When a query names a date ("on 25 May, 2022", "in April 2022", "in 2024": conversations.dates),
# the messages said outside it, give or take DATE_SLACK_DAYS, keep this share of their score:
# what was said then is what the question asks about, and a week either side holds its
# "last Friday" and its "tomorrow".
DATE_SHARE = 0.2
DATE_SLACK_DAYS = 7
# The meaning half's weight against the words half's (each scaled to 0..1 first).
MEANING_WEIGHT = 2.0


@dataclass
class MessageHit:
    message: Message
    score: float


@dataclass
class MessageSearch:
    hits: list[MessageHit]
    degraded: str = ""  # why the meaning half could not be used this time, when it could not


@dataclass(frozen=True)
class Ranking:
    """How rank_messages combines its evidence. The default is what the product uses; the LoCoMo
    benchmark measures the halves alone and each change switched off (bench/locomo_retrieval.py)."""

    words: bool = True  # the keyword half
    # How much its scores are evened out for message length: BM25's b (conversations.retrieval.
    # length_factor; 0: not at all).
    length_b: float = WORDS_B
    meaning: bool = True  # the vector half
    meaning_weight: float = MEANING_WEIGHT
    neighbour_share: float = NEIGHBOUR_SHARE
    # The participants' names in a query are not searched, by words or by meaning: a message
    # rarely names its own speaker, and the ones that name the other ("Hey Caroline!") are greetings.
    unname: bool = True
    other_speaker_share: float = OTHER_SPEAKER_SHARE
    # The share is of the other side's whole score (False: of its own score only, before its
    # neighbours read it, so it also gave them less).
    speaker_share_of_total: bool = True
    second_neighbour_share: float = SECOND_NEIGHBOUR_SHARE
    # Messages longer than this (distinct lexemes) take less of their neighbours' scores; 0: all take it whole.
    neighbours_up_to: int = NEIGHBOURS_UP_TO
    # Dates the query names are searched as when things were said, not as words (DATE_SHARE).
    dates: bool = True
    # Relative ones too ("last Friday", "two weeks ago", "in May"), read against when it is asked.
    relative_dates: bool = True
    # When the query names both sides, the side named first is the one it asks about ("What book
    # did Tim recommend to John?" is answered by Tim), unless the two are named together ("Jon and
    # Gina", "both"): the other side then keeps other_speaker_share, as when one side is named.
    subject_first: bool = True
    # A long message scores its closest window by meaning (conversations.passages), not its head alone.
    passages: bool = True
    # A query that names neither side asks about the side its pronouns name (conversations.subjects:
    # "my" the person, "you recommended" the agent): the other side keeps other_speaker_share.
    pronouns: bool = True
    # Messages longer than this (distinct lexemes) give their neighbours that much less of their
    # scores; 0: all give them whole.
    neighbours_give_up_to: int = NEIGHBOURS_GIVE_UP_TO


DEFAULT_RANKING = Ranking()
# Each change the ranking made over words and meaning alone, as the default with that change
# switched off (or back to its earlier value): the LoCoMo benchmark prints one ablation row each.
RANKING_CHANGES: dict[str, Ranking] = {
    "names unsearched": replace(DEFAULT_RANKING, unname=False),
    "the other speaker's share": replace(DEFAULT_RANKING, other_speaker_share=1.0),
    "the other speaker's share of the whole score, 0.5 (of its own, 0.4, before)": replace(
        DEFAULT_RANKING, speaker_share_of_total=False, other_speaker_share=0.4
    ),
    "meaning weighed 2 (1 before)": replace(DEFAULT_RANKING, meaning_weight=1.0),
    "neighbours' share 0.3 (0.5 before)": replace(DEFAULT_RANKING, neighbour_share=0.5),
    "neighbours' share (none)": replace(DEFAULT_RANKING, neighbour_share=0.0, second_neighbour_share=0.0),
    "second neighbours' share (none)": replace(DEFAULT_RANKING, second_neighbour_share=0.0),
    "long messages' smaller share of their neighbours (all whole before)": replace(DEFAULT_RANKING, neighbours_up_to=0),
    "the words half's length normalisation (b 0.75; none before)": replace(DEFAULT_RANKING, length_b=0.0),
    "dates named in the query": replace(DEFAULT_RANKING, dates=False),
    "relative dates (last Friday, two weeks ago, in May)": replace(DEFAULT_RANKING, relative_dates=False),
    "the side named first asked about, when both are": replace(DEFAULT_RANKING, subject_first=False),
    "long messages' windows by meaning (their heads alone before)": replace(DEFAULT_RANKING, passages=False),
    "pronouns naming the side asked about (none before)": replace(DEFAULT_RANKING, pronouns=False),
    "long messages give their neighbours a smaller share (all whole before)": replace(
        DEFAULT_RANKING, neighbours_give_up_to=0
    ),
}


def _named_speakers(agent: Agent, person: Person, query: str) -> dict[str, str]:
    """The query's words that name a side of the conversation, each with that side's role."""
    names: dict[str, str] = {}
    for name, role in ((person.display_name, "user"), (person.external_id, "user"), (agent.name, "assistant")):
        for word in words(name or ""):
            if len(word) > 1 and word not in STOP_WORDS:
                names.setdefault(word, role)
    asked = set(words(query))
    return {word: role for word, role in names.items() if word in asked}


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _microseconds(moment: datetime) -> int:
    """A moment as a Row carries when its message was said (conversations.retrieval.Row)."""
    return (moment - _EPOCH) // timedelta(microseconds=1)


_JOINING = frozenset({"and", "or"})


def _asked_about(named: dict[str, str], query: str) -> dict[str, str]:
    """The names of the side the query asks about: when it names both sides, the side named first
    is the question's subject ("What advice did Tim give John?", "How does Gina describe Jon's
    studio?"), unless the two are named together ("What do Jon and Gina both like?", "Did both
    Nate and Joanna see it?"): then both, as when it names one side or none."""
    if len(set(named.values())) < 2:
        return named
    said = words(query.replace("&", " and "))  # as _named_speakers read the names
    if "both" in said:
        return named
    for before, joining, after in zip(said, said[1:], said[2:], strict=False):
        if joining in _JOINING and before in named and after in named and named[before] != named[after]:
            return named
    first = next((named[word] for word in said if word in named), None)
    return {word: role for word, role in named.items() if role == first} if first is not None else named


def rank_messages(
    *,
    agent: Agent,
    person: Person,
    query: str,
    limit: int = 5,
    exclude_ids: set[int] | None = None,
    ranking: Ranking = DEFAULT_RANKING,
    now: datetime | None = None,
) -> MessageSearch:
    """Search this agent's conversations with this person, and no others, by words and by meaning:
    the best `limit` hits of rank_candidates, leaving out `exclude_ids`. `now` is when the query is
    asked (its relative dates are read against it): the present unless given."""
    ranked = rank_candidates(agent=agent, person=person, query=query, ranking=ranking, now=now)
    return MessageSearch(ranked.hits(limit=limit, exclude_ids=exclude_ids), ranked.degraded)


@dataclass
class RankedMessages:
    """Every candidate of one search, best first: the hits for any exclusion and limit, without
    searching again (the composer settles its passages against its window this way)."""

    best_first: list[int]  # message ids
    totals: dict[int, float]
    degraded: str = ""  # why the meaning half could not be used this time, when it could not
    team_id: int = 0  # the searched pair's
    # What hits(read_ahead=True) has read, by id: the message's row, or None when it was erased (or gone).
    _read: dict[int, tuple[Any, ...] | None] = field(default_factory=dict, repr=False)
    _messages: dict[int, Message] = field(default_factory=dict, repr=False)

    def hits(self, *, limit: int, exclude_ids: set[int] | None = None, read_ahead: bool = False) -> list[MessageHit]:
        """The best `limit` candidates not in `exclude_ids`, read now: a message erased since the
        search is not among them (and is not replaced), and one that says word for word what a
        better one says is left out for the next candidate (a pasted text, a question asked again:
        a second copy tells the agent nothing more).

        With read_ahead, the next `limit` candidates beyond these are read too, and a later call
        with read_ahead reads only candidates no such call has read: the composer settles its
        passages against its window by asking again with more left out, within one turn, and finds
        the candidates that move up read already (a second round trip cost it as much as the first).
        Such a call sees an erasure as the first read of each candidate did."""
        excluded = exclude_ids or set()
        wanted = [pk for pk in self.best_first if pk not in excluded]
        if not wanted[:limit]:
            return []
        ahead = wanted[: 2 * limit]  # the repeats' replacements come from here
        if not read_ahead:
            rows = _hit_rows(self.team_id, ahead)
            chosen, _ = _distinct(ahead, rows, limit)
            return [
                MessageHit(
                    message=Message.from_db(read_connection().alias, _HIT_FIELDS, rows[pk]), score=self.totals[pk]
                )
                for pk in chosen
            ]
        if any(pk not in self._read for pk in ahead[:limit]):
            self._read_now(ahead)
        read = list(takewhile(lambda pk: pk in self._read, ahead))
        chosen, places = _distinct(read, self._rows(read), limit)
        if places and len(read) < len(ahead):  # repeats left places the candidates read cannot fill
            self._read_now(ahead)
            chosen, _ = _distinct(ahead, self._rows(ahead), limit)
        return [MessageHit(message=self._message(pk), score=self.totals[pk]) for pk in chosen]

    def _read_now(self, ids: list[int]) -> None:
        unread = [pk for pk in ids if pk not in self._read]
        found = _hit_rows(self.team_id, unread)
        self._read.update((pk, found.get(pk)) for pk in unread)

    def _rows(self, ids: list[int]) -> dict[int, tuple[Any, ...]]:
        return {pk: row for pk in ids if (row := self._read[pk]) is not None}

    def _message(self, pk: int) -> Message:
        """The hit's message, built once from its row (the same object for every call)."""
        message = self._messages.get(pk)
        if message is None:
            row = self._read[pk]
            assert row is not None, pk  # hits() builds only the messages it found
            message = self._messages[pk] = Message.from_db(read_connection().alias, _HIT_FIELDS, row)
        return message


# A hit's message with every column but its text-search vector (which no reader of a hit uses),
# read by hand-written SQL: compiling the equivalent queryset cost more than running it.
_HIT_FIELDS = [field.attname for field in Message._meta.concrete_fields if field.attname != "search"]
_HITS = "SELECT {columns} FROM {table} WHERE team_id = %s AND id = ANY(%s::bigint[]) AND erased_at IS NULL"


_CONTENT = _HIT_FIELDS.index("content")


def _distinct(candidates: list[int], rows: dict[int, tuple[Any, ...]], limit: int) -> tuple[list[int], int]:
    """The first `limit` places of `candidates`, best first: one not in `rows` (erased) takes its
    place and is not shown; one whose text a better one chosen says word for word gives its place
    to the next. Returns those chosen, and the places the candidates left empty."""
    chosen: list[int] = []
    said: set[str] = set()
    places = limit
    for pk in candidates:
        if not places:
            break
        row = rows.get(pk)
        if row is None:
            places -= 1
            continue
        if row[_CONTENT] in said:
            continue
        said.add(row[_CONTENT])
        chosen.append(pk)
        places -= 1
    return chosen, places


def _hit_rows(team_id: int, ids: list[int]) -> dict[int, tuple[Any, ...]]:
    """The rows (_HIT_FIELDS) of the messages of `ids` still not erased, by id (in no order:
    ordering would cost a sort)."""
    sql = _HITS.format(
        columns=", ".join(connection.ops.quote_name(name) for name in _HIT_FIELDS), table=Message._meta.db_table
    )
    with statement_cursor() as cursor:
        cursor.execute(sql, [team_id, ids])
        return {row[_HIT_ID]: row for row in cursor.fetchall()}


_HIT_ID = _HIT_FIELDS.index("id")


def rank_candidates(
    *,
    agent: Agent,
    person: Person,
    query: str,
    ranking: Ranking = DEFAULT_RANKING,
    now: datetime | None = None,
) -> RankedMessages:
    """Every candidate of a search of this agent's conversations with this person, and no others,
    by words and by meaning, best first (RankedMessages.hits reads the best of them).

    Each candidate (a message sharing a meaningful word with the query, or close to it in
    meaning) scores its keyword score over the best one's, plus MEANING_WEIGHT times its
    similarity above VECTOR_FLOOR scaled to 0..1. Names of the participants in the query are
    searched by neither half. A date the query names is not searched as words or meaning: the
    messages said outside it keep DATE_SHARE of their score. Then every candidate is given
    NEIGHBOUR_SHARE of the scores of the candidates just before and after it in its conversation,
    and SECOND_NEIGHBOUR_SHARE of the two beyond those. When the query names one side only (or
    both, the first as the question's subject: _asked_about), the other side's messages keep
    OTHER_SPEAKER_SHARE of the sum. When the embedder is down the
    words alone answer, and the result says so.
    """
    return start_search(agent=agent, person=person, query=query, ranking=ranking, now=now).finish()


@dataclass(frozen=True)
class _ReadQuery:
    """What a search makes of its query before it reads anything."""

    query: str  # without the dates it names (searched as when things were said)
    terms: list[str]  # the words half's words
    dates: list[NamedDate]
    meaning_query: str  # what the meaning half embeds: also without the participants' names
    about: dict[str, str]  # the names of the side asked about (whose messages count whole)


def _read_query(agent: Agent, person: Person, query: str, ranking: Ranking, now: datetime | None) -> _ReadQuery | None:
    """The query as start_search searches it, or None when it holds no word to search."""
    terms = meaningful_terms(query)
    if not terms:
        return None
    named = _named_speakers(agent, person, query)
    today = (now or timezone.now()).astimezone(UTC).date()
    dates = named_dates(query, today=today if ranking.relative_dates else None) if ranking.dates else []
    if dates:  # "What did Nate cook on 9 November, 2022?" asks by words and meaning "What did Nate cook?"
        query = without_dates(query, dates) or query
        terms = meaningful_terms(query) or terms
    meaning_query = query
    if ranking.unname and named:
        terms = [term for term in terms if term not in named] or terms
        pattern = r"\b(?:" + "|".join(re.escape(name) for name in named) + r")(?:'s)?\b"
        meaning_query = re.sub(pattern, " ", query, flags=re.IGNORECASE).strip() or query
    about = _asked_about(named, query) if ranking.subject_first else named
    if not about and ranking.pronouns and (side := pronoun_side(query)) is not None:
        about = {"(pronoun)": side}
    return _ReadQuery(query, terms, dates, meaning_query, about)


def meaning_text(
    *, agent: Agent, person: Person, query: str, ranking: Ranking = DEFAULT_RANKING, now: datetime | None = None
) -> str | None:
    """The text a search for `query` embeds for its meaning half: the query without the dates and
    the participants' names it names (None when it searches nothing by meaning). A caller can
    start embedding it before the search asks (memory.vectors.embed_query_soon): the search then
    waits on that embedding, or finds its vector kept."""
    read = _read_query(agent, person, query, ranking, now) if ranking.meaning else None
    return read.meaning_query if read is not None else None


def start_search(
    *,
    agent: Agent,
    person: Person,
    query: str,
    ranking: Ranking = DEFAULT_RANKING,
    now: datetime | None = None,
    leave_out: frozenset[int] = frozenset(),
) -> PendingSearch:
    """rank_candidates up to the query's vector: the pair synced and the words half run, while the
    query is still being embedded. PendingSearch.finish waits for the vector and ranks (the
    composer reads the turn's notes in between). The messages of `leave_out` are not candidates:
    a turn's own message, recorded before its search, would be the best match of its own words and
    meaning, and every other candidate's keyword score is scaled against the best one's."""
    read = _read_query(agent, person, query, ranking, now)
    if read is None:
        return PendingSearch(ranking=ranking)
    query, terms, dates, meaning_query, about = read.query, read.terms, read.dates, read.meaning_query, read.about
    # The query is embedded while the pair is read, or a vector kept from a recent embedding is
    # used; an embedding of it already running is waited on (a turn's composer starts it first).
    configured = get_embedder()  # the pair keeps this model's vectors, whatever this search asks
    embedder = configured if ranking.meaning else None
    kept = kept_query_vector(meaning_query) if embedder is not None else None
    soon = None
    if embedder is not None and kept is None:
        soon = embed_query_soon(meaning_query)
    vectors = (configured.model, configured.dim) if configured is not None else None
    words_asked = " ".join(terms) if ranking.words else ""
    config = text_search_config(query)
    searched: AbstractContextManager[kept_pairs.Searchable]
    if reads_alias() == DEFAULT_DB_ALIAS:
        searched = kept_pairs.synced(agent=agent, person=person, words=words_asked, config=config, vectors=vectors)
    else:
        # A replica answers in SQL alone: what this process keeps of the pair was read from the
        # primary, and a replica a little behind it would look like rolled-back rows to its sync.
        searched = nullcontext(kept_pairs.Searchable(Scope.of(agent, person, words=words_asked, config=config), None))
    with searched as pair:
        # A kept pair answers the words half here, and the meaning half too when it keeps vectors;
        # what it cannot answer goes to the database as before (conversations.retrieval).
        pending = PendingSearch(
            ranking=ranking, named=about, dates=dates, scope=pair.scope, soon=soon, kept_vector=kept,
            meaning=embedder is not None, leave_out=leave_out,
        )  # fmt: skip
        if ranking.words and pair.kept is not None:
            pending.keyword = pair.kept.keyword_candidates(pair.scope.lexemes, CANDIDATES, b=ranking.length_b)
        elif ranking.words:
            pending.words_query = keyword_statement(pair.scope, b=ranking.length_b)
        if pair.kept is not None and pair.has_vectors:
            pending.view = pair.kept.vector_view()
    if soon is not None and pending.words_query is not None:  # the database reads while the query is embedded
        pending.keyword = Found.of_rows(run_together([pending.words_query])[0])
        pending.words_query = None
    if soon is not None and pending.view is not None:
        # Nothing left for the database: the thread that computes the query's vector ranks too, as
        # soon as it has it, while the caller goes on (the composer reads the turn's notes).
        pending.ranked = _then(soon, pending.rank)
    return pending


def _then[T, R](future: Future[T], step: Callable[[T], R]) -> Future[R]:
    """A future of `step` applied to `future`'s result, run by the thread that completes it."""
    out: Future[R] = Future()

    def done(finished: Future[T]) -> None:
        try:
            out.set_result(step(finished.result()))
        except BaseException as exc:  # given to whoever waits on `out`
            out.set_exception(exc)

    future.add_done_callback(done)
    return out


@dataclass
class PendingSearch:
    """A search begun by start_search: its words half run, or its statement ready to go with the
    meaning half's (one round trip, when the query's vector is at hand)."""

    ranking: Ranking
    named: dict[str, str] = field(default_factory=dict)
    dates: list[NamedDate] = field(default_factory=list)
    scope: Scope | None = None  # None: nothing to search (no meaningful word)
    soon: Future[tuple[np.ndarray | None, str]] | None = None
    kept_vector: tuple[np.ndarray | None, str] | None = None
    meaning: bool = False  # an embedder is configured and the ranking uses the meaning half
    keyword: Found = NOTHING_FOUND
    words_query: Statement | None = None
    view: kept_pairs.VectorView | None = None  # the kept pair's vectors, for the meaning half here
    ranked: Future[RankedMessages] | None = None  # ranked by the thread computing the query's vector
    leave_out: frozenset[int] = frozenset()  # messages that are not candidates (start_search)

    def finish(self) -> RankedMessages:
        """Wait for the query's vector, run the meaning half, and rank every candidate."""
        if self.scope is None:
            return RankedMessages([], {})
        if self.ranked is not None:
            return self.ranked.result()
        return self.rank(self.soon.result() if self.soon is not None else self.kept_vector)

    def rank(self, found_vector: tuple[np.ndarray | None, str] | None) -> RankedMessages:
        """The meaning half for the query's vector (and why there is none, when there is not), and
        every candidate ranked."""
        assert self.scope is not None
        embedded, degraded = found_vector if found_vector is not None else (None, "")
        pending = [self.words_query] if self.words_query is not None else []
        similar = NOTHING_FOUND
        embedder = get_embedder() if self.meaning else None
        if embedder is not None and embedded is not None:
            windows = self.ranking.passages and settings.SEARCH_PASSAGES
            if self.view is not None:
                similar = self.view.similar_candidates(embedded, CANDIDATES, windows=windows)
            else:
                statement = similar_statement(
                    self.scope, embedded, model=embedder.model, width=embedder.dim, windows=windows
                )[0]
                pending.append(statement)
        rows = run_together(pending) if pending else []
        keyword = Found.of_rows(rows.pop(0)) if self.words_query is not None else self.keyword
        if rows:
            similar = Found.of_rows(rows[0])
        keyword, similar = keyword.without(self.leave_out), similar.without(self.leave_out)
        ranked = _rank(keyword, similar, named=self.named, dates=self.dates, ranking=self.ranking, degraded=degraded)
        ranked.team_id = self.scope.team_id
        return ranked


def _date_windows(dates: list[NamedDate]) -> list[tuple[int, int]]:
    """The named dates' windows, in the microseconds a Row carries when its message was said."""
    return [
        (_microseconds(start), _microseconds(end))
        for start, end in (named.window(slack_days=DATE_SLACK_DAYS) for named in dates)
    ]


def _rank(
    keyword: Found, similar: Found, *, named: dict[str, str], dates: list[NamedDate], ranking: Ranking, degraded: str
) -> RankedMessages:
    """The candidates of both halves, scored and ordered as rank_candidates says.

    In numpy, a column per field: a search has up to 1,000 candidates, and a dict entry per
    candidate and a lookup per neighbour cost 2 to 6 ms of Python a search on this project's
    2-core machine. Each score is the same float arithmetic, in the same order, as the rule says
    (tests/conversations/test_rank_rule.py holds the rule written plainly)."""
    if not len(keyword) and not len(similar):
        return RankedMessages([], {}, degraded)
    ids, conversations, orders, stamps, roles, lengths, scores = (
        np.concatenate([getattr(keyword, name), getattr(similar, name)]) for name in FOUND_COLUMNS
    )
    words = len(keyword)
    # Each row's own score: the keyword score over the best one's, or the meaning half's share.
    best = float(scores[:words].max()) if words else 0.0
    floor = settings.VECTOR_FLOOR
    given = np.empty(len(ids), dtype=np.float64)
    given[:words] = scores[:words] / best if best > 0 else 0.0
    given[words:] = ranking.meaning_weight * (scores[words:] - floor) / (1.0 - floor)
    # Each message once (a message of both halves takes its keyword row: the two differ only in
    # the score), its own score its keyword row's plus its meaning row's (each half holds a
    # message at most once).
    unique, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    own = np.zeros(len(unique), dtype=np.float64)
    own[inverse[:words]] = given[:words]
    own[inverse[words:]] += given[words:]
    conversations, orders, stamps, lengths = conversations[first], orders[first], stamps[first], lengths[first]
    named_roles = set(named.values())
    # The side the query does not name, when it names one: its messages keep OTHER_SPEAKER_SHARE.
    one_side = len(named_roles) == 1
    other_side = roles[first] != ROLES.index(next(iter(named_roles))) if one_side else None
    if other_side is not None and not ranking.speaker_share_of_total:
        own = np.where(other_side, own * ranking.other_speaker_share, own)
    # Candidates said outside the named dates keep DATE_SHARE of their score; when none was said
    # in them (a date still to come, or before these conversations), every candidate keeps its own.
    if dates:
        inside = np.zeros(len(unique), dtype=bool)
        for start, end in _date_windows(dates):
            inside |= (start <= stamps) & (stamps < end)
        if inside.any():
            own = np.where(inside, own, own * DATE_SHARE)

    # What each gives its neighbours: a long message less than its own (NEIGHBOURS_GIVE_UP_TO).
    given = own
    if ranking.neighbours_give_up_to:
        given = own * np.minimum(1.0, ranking.neighbours_give_up_to / np.maximum(lengths, 1))
    neighbours = _Neighbours(conversations, orders, given)
    # A message longer than NEIGHBOURS_UP_TO lexemes says what it means on its own: it takes that
    # much less of its neighbours' scores (an assistant's long answer is not lifted by the question
    # before it; "Yes, last Tuesday!" still is).
    taken = np.minimum(1.0, ranking.neighbours_up_to / np.maximum(lengths, 1)) if ranking.neighbours_up_to else 1.0
    total = own + taken * ranking.neighbour_share * neighbours.around(1)
    if ranking.second_neighbour_share:
        total = total + taken * ranking.second_neighbour_share * neighbours.around(2)
    if other_side is not None and ranking.speaker_share_of_total:
        total = np.where(other_side, total * ranking.other_speaker_share, total)
    # Best first; then the latest said; then the latest recorded.
    order = np.lexsort((-unique, -stamps, -total))
    best_first = unique[order].tolist()
    return RankedMessages(best_first, dict(zip(best_first, total[order].tolist(), strict=True)), degraded)


class _Neighbours:
    """The candidates by their place in their conversation, to read the scores of those next to each."""

    FARTHEST = 2  # steps away a neighbour is read from

    def __init__(self, conversations: np.ndarray, orders: np.ndarray, own: np.ndarray) -> None:
        # (conversation, order) as one sortable number: conversations numbered densely, with room
        # enough between them that no order +- FARTHEST reaches into the next one.
        _, numbered = np.unique(conversations, return_inverse=True)
        span = int(orders.max()) + 2 * self.FARTHEST + 1
        self.places = numbered * span + orders + self.FARTHEST
        by_place = np.argsort(self.places)
        self.sorted_places = self.places[by_place]
        self.sorted_own = own[by_place]

    def around(self, step: int) -> np.ndarray:
        """For each candidate, the own scores of the candidates `step` before and `step` after it in
        its conversation, summed (the one before first); 0 for a side with no candidate."""
        assert 0 < step <= self.FARTHEST
        summed: np.ndarray = self._at(self.places - step) + self._at(self.places + step)
        return summed

    def _at(self, wanted: np.ndarray) -> np.ndarray:
        found = np.searchsorted(self.sorted_places, wanted).clip(max=len(self.sorted_places) - 1)
        return np.where(self.sorted_places[found] == wanted, self.sorted_own[found], 0.0)


def search_messages(
    *,
    agent: Agent,
    person: Person,
    query: str,
    limit: int = 5,
    exclude_ids: set[int] | None = None,
) -> list[MessageHit]:
    """The ranked hits of rank_messages (what the search_conversation tool uses)."""
    return rank_messages(agent=agent, person=person, query=query, limit=limit, exclude_ids=exclude_ids).hits


def worth_searching(message: str) -> bool:
    """A message with fewer than two real words ("thanks", "ok cool") is not searched at all."""
    return real_word_count(message) >= 2


def recent_messages(
    *,
    agent: Agent,
    person: Person,
    conversation: Conversation | None = None,
    limit: int = 20,
    exclude_ids: Iterable[int] = (),
) -> list[Message]:
    """The latest messages, oldest first, of one conversation or of all this agent's with this
    person, but those in `exclude_ids` (what a mute withholds: conversations.mutes)."""
    messages = messages_between(agent, person).filter(erased_at__isnull=True)
    if exclude_ids:
        messages = messages.exclude(pk__in=list(exclude_ids))
    if conversation is not None:
        messages = messages.filter(conversation=conversation)
    latest = list(messages.select_related("conversation").order_by("-created_at", "-order", "-pk")[:limit])
    return list(reversed(latest))


def messages_around(
    *, agent: Agent, person: Person, message_id: int, each_side: int, exclude_ids: Iterable[int] = ()
) -> list[Message] | None:
    """A message of this agent's with this person and its neighbours in its conversation, up to
    `each_side` before and after it by order, oldest first; erased ones say nothing and are left out,
    and so are those in `exclude_ids` (what a mute withholds). None when the message is not theirs
    (or is erased, or withheld)."""
    withheld = list(exclude_ids)
    if message_id in withheld:
        return None
    centre = (
        messages_between(agent, person)
        .filter(pk=message_id, erased_at__isnull=True)
        .values("conversation_id", "order")
        .first()
    )
    if centre is None:
        return None
    return list(
        Message.objects.filter(
            team_id=agent.team_id,
            conversation_id=centre["conversation_id"],
            order__gte=centre["order"] - each_side,
            order__lte=centre["order"] + each_side,
        )
        .not_erased()
        .exclude(pk__in=withheld)
        .order_by("order")
    )


# --- history imports ---------------------------------------------------------------------------


@dataclass
class ImportProgress:
    """A history import as its job resource shows it: what was recorded, and how far embedding is."""

    job: ConversationImport
    status: str  # "embedding", "done", or "not_embedding" (no embedder is configured)
    messages_embedded: int
    passages_embedded: int  # the windows of the long messages among them (conversations.passages)
    messages_waiting: int
    messages_deleted: int  # created by the import, deleted or erased since
    embedder: str


def import_progress(job: ConversationImport) -> ImportProgress:
    """Count, among the messages the import created that still exist, those with a vector of the current model."""
    runs = Q()
    for first, last in job.message_id_runs:
        runs |= Q(pk__range=(first, last))
    existing = Message.objects.filter(runs, team_id=job.team_id).count() if job.message_id_runs else 0
    embedder = get_embedder()
    embedded = passages = 0
    if embedder is not None and job.message_id_runs:
        vector_runs = Q()
        for first, last in job.message_id_runs:
            vector_runs |= Q(message_id__gte=first, message_id__lte=last)
        current = {"team_id": job.team_id, "namespace": namespace_for(job.team_id), "model": embedder.model}
        embedded = MessageVector.objects.filter(vector_runs, **current, dim=embedder.dim).count()
        passages = MessagePassage.objects.filter(vector_runs, **current, dim=embedder.dim).count()
    waiting = existing - embedded
    state = "not_embedding" if embedder is None else "embedding" if waiting else "done"
    return ImportProgress(
        job=job,
        status=state,
        messages_embedded=embedded,
        passages_embedded=passages,
        messages_waiting=waiting if embedder is not None else 0,
        messages_deleted=job.messages_created - existing,
        embedder=embedder.model if embedder is not None else "",
    )
