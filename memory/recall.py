"""Recall and search: ranking a person's notes for a query (words and meaning), and the linked-notes bundle.

A recall runs in three steps, so that a bank of a thousand notes costs a few milliseconds:

1. The candidates, as light rows (id, bank, key, scope refs, tags, updated_at and the hash of the
   note's text, computed by Postgres): the same rules as the digest's visible notes (applicable
   banks, live, unmuted, scope refs, shadowed narrowest first), tags not gating.
2. The ranking: BM25 over each note's words, from token counts kept in this process per version of
   a note's text (the hash), so a note is tokenised once, not on every call; and cosine similarity
   computed by pgvector over the candidates' vectors of their present text.
3. Only the notes returned are loaded whole.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NamedTuple, cast

from django.conf import settings
from django.db import connections, models
from django.db.models import TextField
from django.db.models.functions import Cast
from django.utils import timezone

from accounts.models import Agent, Person, Team
from memory import vectors  # the module, not its function: tests replace vectors.similarities_by_hash
from memory.banks import applicable_banks
from memory.indexing import NOTES
from memory.models import Bank, Note, OntologyNode
from memory.queries import TurnContext, scope_refs_match, shadow
from memory.text import links, tokens
from memory.text import snippet as text_snippet
from memory.validation import check_scope_refs, validate_scope

type Mode = Literal["hybrid", "bm25", "vector"]

# BM25 counts a word of the key three times and one of the description twice: they name the note.
KEY_WEIGHT = 3
DESCRIPTION_WEIGHT = 2
K1 = 1.5
B = 0.75
# How much a keyword match adds to a note's vector strength: a note matching every word of the
# query, with the best BM25 of the candidates, gains KEYWORD_WEIGHT (a vector match at
# VECTOR_STRONG is worth 1). Tuned on half of bench/recall_facts.py's questions (bench/bench_recall.py).
KEYWORD_WEIGHT = 0.85


@dataclass
class Hit:
    note: Note
    score: float
    matched: set[str]
    bm25: float = 0.0
    similarity: float | None = None


@dataclass
class Ranked:
    hits: list[Hit]
    degraded: list[str] = field(default_factory=list)  # layers that could not be used, e.g. "vectors"


# --- 1. the candidates ------------------------------------------------------------------------


class Candidate(NamedTuple):
    """A note as recall first sees it: enough to filter, shadow, score and find its vector (a
    tuple: a thousand of them are built per recall)."""

    pk: int
    bank_id: int
    key: str
    scope_refs: dict[str, list[str]]
    semantics: list[str]
    updated_at: datetime
    text_hash: str  # NOTES.text_hash of its key, description and content

    @classmethod
    def of(cls, note: Note) -> Candidate:
        return cls(
            note.pk, note.bank_id, note.key, note.scope_refs, note.semantics, note.updated_at, NOTES.text_hash(note)
        )


def candidates(
    *, team: Team, person: Person, agent: Agent | None, scope: str = "", context: TurnContext | None = None
) -> list[Candidate]:
    """Everything the concrete scope allows, as light rows: the rules of queries.visible_notes
    (live, unmuted for the agent, scope refs matched, shadowed narrowest bank first); tags gate the
    digest, not recall."""
    context = context or TurnContext()
    scope = validate_scope(scope)
    refs = check_scope_refs(context.refs, "context.refs")
    banks = applicable_banks(team=team, person=person, scope=scope)
    if not banks:
        return []
    rows = Note.objects.filter(team=team, bank__in=banks).live(timezone.now())
    if agent is not None:
        rows = rows.unmuted_for(agent, person=person)
    light = (
        rows.annotate(
            text_hash=NOTES.sql_text_hash(),
            refs=Cast("scope_refs", TextField()),
            tags=Cast("semantics", TextField()),
        )
        .order_by()
        .values_list("pk", "bank_id", "key", "refs", "tags", "updated_at", "text_hash")
    )
    # The ORM's own SQL, its rows read straight from the cursor: per-row converters and JSON
    # decoding cost more than the query itself at a thousand rows, and most notes have no refs or tags.
    with connections[light.db].cursor() as cursor:
        cursor.execute(*light.query.sql_with_params())
        found = [
            Candidate(pk, bank_id, key, _json(refs, {}), _json(tags, []), updated_at, text_hash)
            for pk, bank_id, key, refs, tags, updated_at, text_hash in cursor.fetchall()
        ]
    per_bank = [
        [c for c in found if c.bank_id == bank.pk and (not c.scope_refs or scope_refs_match(c.scope_refs, refs))]
        for bank in banks
    ]
    return shadow(per_bank)


def _json[T](text: str, empty: T) -> T:
    return empty if text in ("{}", "[]") else cast(T, json.loads(text))


def recall_candidates(
    *, team: Team, person: Person, agent: Agent | None, scope: str = "", context: TurnContext | None = None
) -> list[Note]:
    """The candidates as whole notes, in no particular order (for callers that need every one)."""
    found = candidates(team=team, person=person, agent=agent, scope=scope, context=context)
    by_id = Note.objects.in_bulk([c.pk for c in found])
    return [by_id[c.pk] for c in found if c.pk in by_id]


# --- 2. words: BM25 over token counts kept per note version -------------------------------------


@dataclass(frozen=True)
class Terms:
    counts: dict[str, int]
    length: int

    @classmethod
    def of(cls, key: str, description: str, content: str, gloss: str = "") -> Terms:
        words = (
            tokens(key.replace("-", " ")) * KEY_WEIGHT
            + tokens(description) * DESCRIPTION_WEIGHT
            + tokens(content)
            + tokens(gloss)
        )
        return cls(dict(Counter(words)), len(words))


class TermsCache:
    """Token counts of notes by the hash of their text, least recently used dropped first.

    The hash changes with the text, so an entry is never stale: an edited note is a new entry, and
    the old one ages out. An entry is only ever read for a live note holding that very text, so
    the words of an erased note are never used again (and age out too). Per process (each web or
    worker process warms its own); 20,000 short notes take some 30 MB."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[str, Terms] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, hashes: Iterable[str]) -> dict[str, Terms]:
        found = {}
        with self._lock:
            for hashed in hashes:
                terms = self._entries.get(hashed)
                if terms is not None:
                    self._entries.move_to_end(hashed)
                    found[hashed] = terms
        return found

    def put(self, hashed: str, terms: Terms) -> None:
        with self._lock:
            self._entries[hashed] = terms
            self._entries.move_to_end(hashed)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


TERMS = TermsCache(size=20_000)


def _glossaries(team: Team, found: list[Candidate]) -> dict[str, str]:
    tags = {tag for c in found for tag in c.semantics}
    if not tags:
        return {}
    return {
        node.node_id: f"{node.label} {node.glossary}"
        for node in OntologyNode.objects.filter(team=team, node_id__in=tags)
    }


def _terms(team: Team, found: list[Candidate], notes: dict[int, Note] | None = None) -> list[Terms]:
    """Each candidate's terms: its text's (cached by hash; the text is loaded only for notes not
    seen before, or taken from `notes` when the caller has them), plus its tags' glossary words."""
    cached = TERMS.get_many(c.text_hash for c in found)
    missing = [c for c in found if c.text_hash not in cached]
    if missing:
        if notes is not None:
            texts = [(notes[c.pk].key, notes[c.pk].description, notes[c.pk].content, c.text_hash) for c in missing]
        else:
            loaded = Note.objects.filter(pk__in=[c.pk for c in missing]).values_list(
                "pk", "key", "description", "content"
            )
            by_id = {pk: (key, description, content) for pk, key, description, content in loaded}
            # A note rewritten since the candidates were read is scored on its newer text this time.
            texts = [(*by_id[c.pk], c.text_hash) for c in missing if c.pk in by_id]
        for key, description, content, hashed in texts:
            cached[hashed] = Terms.of(key, description, content)
            if NOTES.hash_values(key, description, content) == hashed:
                TERMS.put(hashed, cached[hashed])
    glossary = _glossaries(team, found)
    out = []
    for c in found:
        terms = cached.get(c.text_hash, Terms({}, 0))  # a note deleted meanwhile matches nothing
        if c.semantics and glossary:
            gloss = tokens(" ".join(glossary.get(tag, "") for tag in c.semantics))
            counts = Counter(terms.counts)
            counts.update(gloss)
            terms = Terms(dict(counts), terms.length + len(gloss))
        out.append(terms)
    return out


@dataclass
class Keyword:
    scores: list[float]  # BM25 per candidate, 0 when it shares no word with the query
    matched: list[set[str]]  # the query's terms each candidate holds
    strengths: list[float]  # in [0, 1], see keyword_strength


def bm25(documents: list[Terms], query: str) -> Keyword:
    """BM25 (k1 1.5, b 0.75, idf log((N + 1) / df), so never negative) of each document for the query,
    with each document's keyword strength: its BM25 relative to the best one, times the share of
    the query's information (idf) it covers. One accidental common word scores low; a note
    matching the query's rare words scores high."""
    query_terms = tokens(query)
    n = len(documents)
    if not n or not query_terms:
        return Keyword([0.0] * n, [set() for _ in documents], [0.0] * n)
    wanted = set(query_terms)
    repeats = Counter(query_terms)
    df = dict.fromkeys(wanted, 0)
    for document in documents:
        counts = document.counts
        for term in wanted:
            if term in counts:
                df[term] += 1
    # A query term no note holds carries the most information a term can (idf of df 1).
    idf = {term: math.log((n + 1) / max(1, count)) for term, count in df.items()}
    total = sum(idf.values())
    average = sum([d.length for d in documents]) / n or 1.0
    scores, matched, covered = [], [], []
    for document in documents:
        counts = document.counts
        terms = {term for term in wanted if term in counts}
        score = 0.0
        for term in terms:
            tf = counts[term]
            score += repeats[term] * idf[term] * tf * (K1 + 1) / (K1 * (1 - B + B * document.length / average) + tf)
        scores.append(score)
        matched.append(terms)
        covered.append(sum(idf[term] for term in terms) / total if total > 0 else 0.0)
    top = max(scores)
    strengths = [s / top * c if top > 0 else 0.0 for s, c in zip(scores, covered, strict=True)]
    return Keyword(scores, matched, strengths)


# --- 3. fusion ------------------------------------------------------------------------------------


def vector_strength(similarity: float, floor: float | None = None, strong: float | None = None) -> float:
    """How much a vector match counts: 0 at or below VECTOR_FLOOR, 1 at VECTOR_STRONG, and on up
    with the similarity (never capped, so that closer always ranks higher)."""
    floor = settings.VECTOR_FLOOR if floor is None else floor
    strong = settings.VECTOR_STRONG if strong is None else strong
    return max(0.0, (similarity - floor) / (strong - floor))


@dataclass
class Scored:
    candidate: Candidate
    score: float
    matched: set[str]
    bm25: float
    similarity: float | None


def rank(
    team: Team, found: list[Candidate], query: str, *, mode: Mode = "hybrid", notes: dict[int, Note] | None = None
) -> tuple[list[Scored], list[str]]:
    """The candidates that match, best first, and the layers that could not be used.

    A note scores its vector strength plus KEYWORD_WEIGHT times its keyword strength: the vector
    similarity orders notes by meaning all the way up (a saturated similarity would leave the order
    of every close note to BM25), and shared words, the rarer the better, lift the notes that hold
    them. A note with neither a word in common nor a similarity above VECTOR_FLOOR is no match.
    mode "bm25" or "vector" ranks by one signal alone (the benchmarks compare all three). Vectors
    that cannot be computed now (embedder down) leave BM25 alone, and say so.
    """
    if not found:
        return [], []
    keyword = bm25(_terms(team, found, notes), query) if mode != "vector" else None
    sims: dict[int, float] = {}
    degraded: list[str] = []
    if mode != "bm25":
        result = vectors.similarities_by_hash(team=team, current={c.pk: c.text_hash for c in found}, query=query)
        sims = result.scores
        degraded = ["vectors"] if result.degraded else []
    scored = []
    floor, strong = settings.VECTOR_FLOOR, settings.VECTOR_STRONG  # read once, not per note
    for i, c in enumerate(found):
        similarity = sims.get(c.pk)
        words = keyword.scores[i] if keyword else 0.0
        matched = keyword.matched[i] if keyword else set()
        if mode == "vector":
            if similarity is None:
                continue
            score = similarity
        else:
            score = KEYWORD_WEIGHT * keyword.strengths[i] if keyword else 0.0
            if similarity is not None:
                score += vector_strength(similarity, floor, strong)
            if score <= 0:
                continue
        scored.append(Scored(c, score, matched, words, similarity))
    scored.sort(key=lambda s: (-s.score, -s.bm25, -s.candidate.updated_at.timestamp()))
    return scored, degraded


def _load(ids: list[int]) -> dict[int, Note]:
    return Note.objects.select_related("bank").in_bulk(ids)


def _hits(scored: list[Scored], limit: int) -> list[Hit]:
    """The first `limit` matches as hits, their notes loaded whole (one query). A note deleted
    since it was scored is left out."""
    top = scored[:limit]
    notes = _load([s.candidate.pk for s in top])
    return [
        Hit(notes[s.candidate.pk], s.score, s.matched, bm25=s.bm25, similarity=s.similarity)
        for s in top
        if s.candidate.pk in notes
    ]


def hybrid_rank(team: Team, notes: list[Note], query: str, *, mode: Mode = "hybrid") -> Ranked:
    """`rank` over notes the caller already holds (tests and benchmarks rank chosen notes)."""
    by_id = {note.pk: note for note in notes}
    scored, degraded = rank(team, [Candidate.of(note) for note in notes], query, mode=mode, notes=by_id)
    return Ranked(
        [Hit(by_id[s.candidate.pk], s.score, s.matched, bm25=s.bm25, similarity=s.similarity) for s in scored],
        degraded,
    )


def recall_memories(
    *,
    team: Team,
    person: Person,
    agent: Agent | None,
    query: str,
    limit: int = 5,
    scope: str = "",
    context: TurnContext | None = None,
    mode: Mode = "hybrid",
) -> Ranked:
    found = candidates(team=team, person=person, agent=agent, scope=scope, context=context)
    scored, degraded = rank(team, found, query, mode=mode)
    return Ranked(_hits(scored, limit), degraded)


def recall_for_owner(*, person: Person, query: str, limit: int = 10) -> Ranked:
    """The Memory lens search: recall_memories as an agent runs it, over everything about the person.

    Recall reads the banks of one scope, so it runs once without a scope and once per scope the
    person has a private bank in; its context names every ref the person's notes carry, so none of
    their notes is out of scope. No agent is given, so nothing is muted. BM25 scores of different
    runs come from different corpora and are only roughly comparable; a note met twice keeps its best.
    """
    scopes = list(
        Bank.objects.filter(team_id=person.team_id, person=person, kind=Bank.Kind.PRIVATE)
        .order_by("scope")
        .values_list("scope", flat=True)
    )
    banks = Bank.objects.filter(team_id=person.team_id).filter(
        models.Q(person=person) | models.Q(kind=Bank.Kind.SHARED, scope__in=scopes)
    )
    refs: dict[str, set[str]] = {}
    for note_refs in Note.objects.filter(team_id=person.team_id, bank__in=banks).values_list("scope_refs", flat=True):
        for ref_type, ids in note_refs.items():
            refs.setdefault(ref_type, set()).update(ids)
    context = TurnContext(refs={ref_type: sorted(ids) for ref_type, ids in refs.items()})
    best: dict[int, Hit] = {}
    degraded: list[str] = []
    for scope in ["", *scopes]:
        ranked = recall_memories(
            team=person.team, person=person, agent=None, query=query, limit=limit, scope=scope, context=context
        )
        degraded.extend(layer for layer in ranked.degraded if layer not in degraded)
        for hit in ranked.hits:
            if hit.note.pk not in best or hit.score > best[hit.note.pk].score:
                best[hit.note.pk] = hit
    hits = sorted(best.values(), key=lambda hit: (-hit.score, -hit.note.updated_at.timestamp()))
    return Ranked(hits[:limit], degraded)


def snippet(note: Note, matched: set[str]) -> str:
    return text_snippet(note.content, matched)


@dataclass
class BundleItem:
    note: Note
    content: str
    via: str
    truncated: bool


@dataclass
class Bundle:
    items: list[BundleItem]
    used_chars: int
    omitted: list[dict[str, Any]]
    degraded: list[str] = field(default_factory=list)


def recall_bundle(
    *,
    team: Team,
    person: Person,
    agent: Agent | None,
    query: str,
    budget_chars: int = 4000,
    depth: int = 1,
    max_per_source: int = 1000,
    scope: str = "",
    context: TurnContext | None = None,
    seeds: int = 5,
) -> Bundle:
    """Relevant notes plus their [[key]] neighbours to `depth` hops, packed within the budget.

    No note contributes more than max_per_source characters (a longer one is cut and marked
    truncated); what does not fit the budget is listed in `omitted`, never dropped silently.
    """
    found = candidates(team=team, person=person, agent=agent, scope=scope, context=context)
    by_key = {c.key: c.pk for c in found}
    scored, degraded = rank(team, found, query)
    ordered: list[tuple[Note, str]] = [(hit.note, "match") for hit in _hits(scored, seeds)]
    seen = {note.key for note, _ in ordered}
    frontier = [note for note, _ in ordered]
    for _ in range(depth):
        wanted: list[tuple[str, Note]] = []  # (linked key, the note linking to it), in order of mention
        for note in frontier:
            for linked in links(note.content):
                if linked in by_key and linked not in seen:
                    seen.add(linked)
                    wanted.append((linked, note))
        loaded = _load([by_key[linked] for linked, _ in wanted])
        next_frontier = []
        for linked, source in wanted:
            if by_key[linked] in loaded:
                ordered.append((loaded[by_key[linked]], f"link:{source.key}"))
                next_frontier.append(loaded[by_key[linked]])
        frontier = next_frontier

    items: list[BundleItem] = []
    omitted: list[dict[str, Any]] = []
    used = 0
    for note, via in ordered:
        content = note.content
        truncated = len(content) > max_per_source
        if truncated:
            content = content[:max_per_source]
        if used + len(content) > budget_chars:
            omitted.append({"id": note.pk, "key": note.key, "chars": len(content), "reason": "over budget"})
            continue
        used += len(content)
        items.append(BundleItem(note, content, via, truncated))
    return Bundle(items=items, used_chars=used, omitted=omitted, degraded=degraded)
