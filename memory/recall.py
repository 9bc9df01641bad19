"""Recall and search: ranking a person's notes for a query (words and meaning), and the linked-notes bundle.

A recall runs in three steps, so that a bank of a thousand notes costs a few milliseconds:

1. The candidates: the same rules as the digest's visible notes (applicable banks, live, unmuted,
   scope refs, shadowed narrowest first), tags not gating, applied in Python to each bank as this
   process keeps it per version of the bank (memory/kept_banks.py, KeptBank: its live notes as light rows with the hash
   of each note's text, their words, and their vectors as found). A recall reads only the banks'
   versions; a bank's notes are read again when a write has raised its version or a note expired.
2. The ranking: BM25 over each note's words, from token counts kept per version of a note's text
   (the hash) and its language, so a note is tokenised once, and only the notes holding a word of
   the query are scored; and cosine similarity of the vectors of the notes' present text, kept as
   unit rows per bank (numpy; a vector not yet kept is looked up in the note index first).
3. Only the notes returned are loaded whole, with their banks, in one hand-written statement
   (memory.queries.notes_with_banks).

Words are read in each note's own language (Note.language, read from its text on every write:
memory.language.note_config), and the query is read, for each note, in that note's language: the
same word written the same way always matches, and "собаке" finds the note that says "собаку".
Notes all in one language (most banks) rank exactly as with one reading of the query.

`rank` and `bm25` compute the same ranking over notes a caller already holds (hybrid_rank: tests and
benchmarks); tests check that both agree.
"""

from __future__ import annotations

import math
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field
from itertools import groupby
from operator import attrgetter
from typing import Any, Literal

import numpy as np
from django.conf import settings
from django.db import models

from accounts.models import Agent, Person, Team
from memory import vectors
from memory.embedders import get_embedder
from memory.kept_banks import (
    Candidate,
    Terms,
    Visible,
    candidates,
    cosines,
    glossaries,
    glossed,
    text_terms,
    visible,
)
from memory.models import Bank, Note
from memory.queries import TurnContext, notes_with_banks
from memory.text import links, tokens
from memory.text import snippet as text_snippet

type Mode = Literal["hybrid", "bm25", "vector"]

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


def recall_candidates(
    *, team: Team, person: Person, agent: Agent | None, scope: str = "", context: TurnContext | None = None
) -> list[Note]:
    """The candidates as whole notes, in no particular order (for callers that need every one)."""
    found = candidates(team=team, person=person, agent=agent, scope=scope, context=context)
    by_id = Note.objects.in_bulk([c.pk for c in found])
    return [by_id[c.pk] for c in found if c.pk in by_id]


def _terms(team: Team, found: list[Candidate], notes: dict[int, Note] | None = None) -> list[Terms]:
    """Each candidate's terms: its text's, plus its tags' glossary words."""
    glossary = glossaries(team, found)
    texts = {pk: (note.key, note.description, note.content) for pk, note in notes.items()} if notes else None
    return [
        glossed(terms, c.semantics, glossary) if c.semantics and glossary else terms
        for c, terms in zip(found, text_terms(found, texts), strict=True)
    ]


@dataclass
class Keyword:
    scores: list[float]  # BM25 per candidate, 0 when it shares no word with the query
    matched: list[set[str]]  # the query's terms each candidate holds
    strengths: list[float]  # in [0, 1], see keyword_strength


def bm25(documents: list[Terms], query: str) -> Keyword:
    """BM25 (k1 1.5, b 0.75, idf log((N + 1) / df), so never negative) of each document for the query,
    with each document's keyword strength: its BM25 relative to the best one, times the share of
    the query's information (idf) it covers. One accidental common word scores low; a note
    matching the query's rare words scores high.

    The query is read in each document's language (once per language the documents use); a term's
    document frequency counts every document holding it."""
    n = len(documents)
    # The documents as runs of one language, in order: one run in most banks.
    if len({document.language for document in documents}) == 1:
        runs = [(documents[0].language, documents)]
    else:
        runs = [(language, list(run)) for language, run in groupby(documents, key=attrgetter("language"))]
    read = {language: tokens(query, language) for language, _ in runs}  # the query's terms in each
    if not n or not any(read.values()):
        return Keyword([0.0] * n, [set() for _ in documents], [0.0] * n)
    wanted_in = {language: set(terms) for language, terms in read.items()}
    df = dict.fromkeys(set().union(*wanted_in.values()), 0)
    for language, run in runs:
        wanted = wanted_in[language]
        for document in run:
            counts = document.counts
            for term in wanted:
                if term in counts:
                    df[term] += 1
    # A query term no note holds carries the most information a term can (idf of df 1).
    idf = {term: math.log((n + 1) / max(1, count)) for term, count in df.items()}
    average = sum([d.length for d in documents]) / n or 1.0
    scores, matched, covered = [], [], []
    for language, run in runs:
        wanted, repeats = wanted_in[language], Counter(read[language])
        total = sum(idf[term] for term in wanted)
        for document in run:
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
    team: Team,
    found: list[Candidate],
    query: str,
    *,
    mode: Mode = "hybrid",
    notes: dict[int, Note] | None = None,
    embed_missing: bool = False,
) -> tuple[list[Scored], list[str]]:
    """The candidates that match, best first, and the layers that could not be used.

    A note scores its vector strength plus KEYWORD_WEIGHT times its keyword strength: the vector
    similarity orders notes by meaning all the way up (a saturated similarity would leave the order
    of every close note to BM25), and shared words, the rarer the better, lift the notes that hold
    them. A note with neither a word in common nor a similarity above VECTOR_FLOOR is no match.
    mode "bm25" or "vector" ranks by one signal alone (the benchmarks compare all three). Vectors
    that cannot be computed now (embedder down) leave BM25 alone, and say so. With `embed_missing`
    (and `notes`), a text with no stored vector is embedded for this call (memory.as_of: past texts).
    """
    if not found:
        return [], []
    keyword = bm25(_terms(team, found, notes), query) if mode != "vector" else None
    sims: dict[int, float] = {}
    degraded: list[str] = []
    if mode != "bm25":
        if embed_missing and notes is not None:
            result = vectors.similarities_embedding_missing(
                team=team, notes=[notes[c.pk] for c in found if c.pk in notes], query=query
            )
        else:
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


# --- 4. ranking what recall keeps ---------------------------------------------------------------


@dataclass
class _Words:
    """BM25 of the candidates holding a query word (by place in the candidates), as `bm25` scores them."""

    scores: dict[int, float] = field(default_factory=dict)
    matched: dict[int, set[str]] = field(default_factory=dict)
    strengths: dict[int, float] = field(default_factory=dict)


def _visible_words(team: Team, seen: Visible, query: str) -> _Words:
    """`bm25` over the visible candidates, reading only those that hold a word of the query (and
    the tagged ones, whose glossary words count as theirs): the same scores, without a pass over
    every note. Documents are numbered by their place in seen.candidates."""
    places: list[dict[int, int]] = []
    start = 0
    for _, keep in seen.banks:
        places.append(dict(zip(keep, range(start, start + len(keep)), strict=True)))
        start += len(keep)
    n = start
    tagged = [
        (place, kept.rows[local])
        for (kept, keep), place in zip(seen.banks, places, strict=True)
        for local in keep
        if kept.rows[local].semantics
    ]
    glossary = glossaries(team, [row for _, row in tagged]) if tagged else {}
    with_gloss: dict[int, Terms] = {}
    if glossary:
        for (kept, _), place in zip(seen.banks, places, strict=True):
            for local, at in place.items():
                row = kept.rows[local]
                if row.semantics:
                    with_gloss[at] = glossed(kept.terms[local], row.semantics, glossary)
    languages = {language for kept, _ in seen.banks for language in kept.languages}
    languages.update(terms.language for terms in with_gloss.values())
    read = {language: tokens(query, language) for language in languages}
    if not n or not any(read.values()):
        return _Words()
    wanted_in = {language: set(terms) for language, terms in read.items()}
    touched: dict[int, Terms] = {}
    for (kept, _), place in zip(seen.banks, places, strict=True):
        for language, wanted in wanted_in.items():
            if language not in kept.languages:
                continue
            for word in wanted:
                for local in kept.holding(language, word):
                    found = place.get(local)
                    if found is not None:
                        touched[found] = kept.terms[local]
    touched.update(with_gloss)
    df = dict.fromkeys(set().union(*wanted_in.values()), 0)
    for terms in touched.values():
        counts = terms.counts
        for term in wanted_in[terms.language]:
            if term in counts:
                df[term] += 1
    idf = {term: math.log((n + 1) / max(1, count)) for term, count in df.items()}
    length = sum(kept.terms[local].length for kept, keep in seen.banks for local in keep)
    length += sum(terms.length for terms in with_gloss.values())
    length -= sum(kept.terms[local].length for (kept, _), place in zip(seen.banks, places, strict=True)
                  for local, at in place.items() if at in with_gloss)  # fmt: skip
    average = length / n or 1.0
    totals = {language: sum(idf[term] for term in wanted) for language, wanted in wanted_in.items()}
    repeats = {language: Counter(terms) for language, terms in read.items()}
    words = _Words()
    for at, document in touched.items():
        counts, language = document.counts, document.language
        held = {term for term in wanted_in[language] if term in counts}
        if not held:
            continue
        score = 0.0
        for term in held:
            tf = counts[term]
            score += (
                repeats[language][term] * idf[term] * tf * (K1 + 1)
                / (K1 * (1 - B + B * document.length / average) + tf)
            )  # fmt: skip
        total = totals[language]
        words.scores[at] = score
        words.matched[at] = held
        words.strengths[at] = sum(idf[term] for term in held) / total if total > 0 else 0.0
    top = max(words.scores.values(), default=0.0)
    for at in words.strengths:
        words.strengths[at] = words.scores[at] / top * words.strengths[at] if top > 0 else 0.0
    return words


def _rank_visible(
    team: Team, seen: Visible, query: str, *, mode: Mode, limit: int, vector: Future[tuple[Any, str]] | None
) -> tuple[list[Scored], list[str]]:
    """`rank` over what recall keeps: the first `limit` matches, best first, and the layers that
    could not be used. The same scores: keyword strength from `_visible_words`, vector strength
    from cosine similarity computed here over the kept unit vectors (a thousand in well under a
    millisecond), ties broken by BM25 then the newest."""
    found = seen.candidates
    n = len(found)
    if not n:
        if vector is not None:
            vector.cancel()
        return [], []
    words = _visible_words(team, seen, query) if mode != "vector" else _Words()
    similarity = np.full(n, np.nan)
    degraded: list[str] = []
    if vector is not None:
        query_vector, reason = vector.result()
        embedder = get_embedder()
        if query_vector is None or embedder is None:
            degraded = ["vectors"] if reason else []
        else:
            similarity = cosines(team, seen, query_vector, model=embedder.model, dim=embedder.dim)
    has_vector = ~np.isnan(similarity)
    keyword = np.zeros(n)
    bm25_scores = np.zeros(n)
    for at, strength in words.strengths.items():
        keyword[at] = KEYWORD_WEIGHT * strength
        bm25_scores[at] = words.scores[at]
    if mode == "vector":
        score = np.where(has_vector, similarity, 0.0)
        matches = has_vector
    else:
        score = keyword.copy()
        if mode == "hybrid":
            floor, strong = settings.VECTOR_FLOOR, settings.VECTOR_STRONG
            score += np.where(has_vector, np.maximum(0.0, (similarity - floor) / (strong - floor)), 0.0)
        matches = score > 0
    places = np.flatnonzero(matches)
    stamps = np.concatenate([kept.stamps[keep] for kept, keep in seen.banks]) if n else np.zeros(0)
    order = places[np.lexsort((-stamps[places], -bm25_scores[places], -score[places]))][:limit]
    return [
        Scored(
            found[at],
            float(score[at]),
            words.matched.get(int(at), set()),
            float(bm25_scores[at]),
            None if np.isnan(similarity[at]) else float(similarity[at]),
        )
        for at in order
    ], degraded


def _query_vector(query: str, mode: Mode) -> Future[tuple[Any, str]] | None:
    """The query's vector, embedded on a thread while recall reads the banks (None: not wanted)."""
    if mode == "bm25" or not query.strip() or get_embedder() is None:
        return None
    return vectors.embed_query_soon(query)


def _recalled(
    team: Team, person: Person, agent: Agent | None, query: str, *, scope: str, context: TurnContext | None,
    mode: Mode, limit: int,
) -> tuple[Visible, list[Scored], list[str]]:  # fmt: skip
    """The visible candidates and the first `limit` matches, the query embedded while they are read."""
    vector = _query_vector(query, mode)
    try:
        shown = visible(team=team, person=person, agent=agent, scope=scope, context=context)
    except BaseException:
        if vector is not None:
            vector.cancel()
        raise
    scored, degraded = _rank_visible(team, shown, query, mode=mode, limit=limit, vector=vector)
    return shown, scored, degraded


def _hits(team: Team, scored: list[Scored], limit: int) -> list[Hit]:
    """The first `limit` matches as hits, their notes loaded whole (one query). A note deleted
    since it was scored is left out."""
    top = scored[:limit]
    notes = notes_with_banks(team=team, ids=[s.candidate.pk for s in top])
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
    _, scored, degraded = _recalled(team, person, agent, query, scope=scope, context=context, mode=mode, limit=limit)
    return Ranked(_hits(team, scored, limit), degraded)


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
    shown, scored, degraded = _recalled(
        team, person, agent, query, scope=scope, context=context, mode="hybrid", limit=seeds
    )
    by_key = {c.key: c.pk for c in shown.candidates}
    ordered: list[tuple[Note, str]] = [(hit.note, "match") for hit in _hits(team, scored, seeds)]
    seen = {note.key for note, _ in ordered}
    frontier = [note for note, _ in ordered]
    for _ in range(depth):
        wanted: list[tuple[str, Note]] = []  # (linked key, the note linking to it), in order of mention
        for note in frontier:
            for linked in links(note.content):
                if linked in by_key and linked not in seen:
                    seen.add(linked)
                    wanted.append((linked, note))
        loaded = notes_with_banks(team=team, ids=[by_key[linked] for linked, _ in wanted])
        next_frontier = []
        for linked, source in wanted:
            if by_key[linked] in loaded:
                ordered.append((loaded[by_key[linked]], f"link:{source.key}"))
                next_frontier.append(loaded[by_key[linked]])
        frontier = next_frontier
    return pack_bundle(ordered, budget_chars=budget_chars, max_per_source=max_per_source, degraded=degraded)


def pack_bundle(
    ordered: list[tuple[Note, str]], *, budget_chars: int, max_per_source: int, degraded: list[str]
) -> Bundle:
    """The notes, in order, packed within the budget; no note gives more than max_per_source
    characters (see recall_bundle)."""
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
