"""Recall and search: ranking a person's notes for a query (words and meaning), and the linked-notes bundle."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import models
from rank_bm25 import BM25Plus

from accounts.models import Agent, Person, Team
from memory import vectors  # the module, not its function: tests replace vectors.similarities
from memory.models import Bank, Note, OntologyNode
from memory.queries import TurnContext, visible_notes
from memory.text import links, tokens
from memory.text import snippet as text_snippet

# --- recall and search ------------------------------------------------------------------------

KEY_WEIGHT = 3
DESCRIPTION_WEIGHT = 2


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


def _glossaries(team: Team, notes: list[Note]) -> dict[str, str]:
    tags = {tag for note in notes for tag in note.semantics}
    if not tags:
        return {}
    return {
        node.node_id: f"{node.label} {node.glossary}"
        for node in OntologyNode.objects.filter(team=team, node_id__in=tags)
    }


def _document(note: Note, glossary: dict[str, str]) -> list[str]:
    key_tokens = tokens(note.key.replace("-", " "))
    description_tokens = tokens(note.description)
    gloss = " ".join(glossary.get(tag, "") for tag in note.semantics)
    return key_tokens * KEY_WEIGHT + description_tokens * DESCRIPTION_WEIGHT + tokens(note.content) + tokens(gloss)


def rank_bm25(team: Team, notes: list[Note], query: str) -> list[Hit]:
    """BM25 weighted toward key and description, over an index built for this call.

    A bank holds tens of notes, so a per-call index is cheap and never stale.
    """
    return _bm25_hits(team, notes, query)[0]


def _bm25_hits(team: Team, notes: list[Note], query: str) -> tuple[list[Hit], BM25Plus | None]:
    query_tokens = tokens(query)
    if not notes or not query_tokens:
        return [], None
    glossary = _glossaries(team, notes)
    documents = [_document(note, glossary) for note in notes]
    # delta=0 makes BM25+ plain BM25 with an always-positive idf: a note sharing no term scores 0.
    model = BM25Plus(documents, delta=0)
    scores = model.get_scores(query_tokens)
    wanted = set(query_tokens)
    hits = [
        Hit(note, float(score), wanted & set(document), bm25=float(score))
        for note, score, document in zip(notes, scores, documents, strict=True)
        if wanted & set(document)
    ]
    hits.sort(key=lambda hit: (-hit.score, -hit.note.updated_at.timestamp()))
    return hits, model


def vector_gate(similarity: float) -> float:
    """How much a vector match counts, from 0 at or below VECTOR_FLOOR to 1 from VECTOR_STRONG up."""
    floor, strong = settings.VECTOR_FLOOR, settings.VECTOR_STRONG
    if similarity <= floor:
        return 0.0
    if similarity >= strong:
        return 1.0
    return (similarity - floor) / (strong - floor)


AGREEMENT_BONUS = 0.5


def keyword_strength(hit: Hit, top_bm25: float, idf: dict[str, float], query_terms: set[str]) -> float:
    """How strong a keyword match is, in [0, 1]: its BM25 relative to the best one for this query,
    times the share of the query's information (idf) it covers. One accidental common word
    scores low; a note matching the query's rare words scores high."""
    if top_bm25 <= 0 or not query_terms:
        return 0.0
    unseen = max(idf.values(), default=1.0)
    total = sum(idf.get(term, unseen) for term in query_terms)
    covered = sum(idf.get(term, unseen) for term in hit.matched)
    return (hit.bm25 / top_bm25) * (covered / total if total > 0 else 0.0)


def hybrid_rank(team: Team, notes: list[Note], query: str, *, mode: str = "hybrid") -> Ranked:
    """BM25 fused with vector similarity, by strength rather than by rank.

    Each signal becomes a strength in [0, 1] (see keyword_strength and vector_gate); a note scores
    its stronger signal plus half the weaker one, so both agreeing wins, a strong match of either
    kind beats a weak one of the other, and a weak vector match never outranks a strong keyword
    one. mode "bm25" or "vector" ranks by one signal alone (the benchmark compares all three).
    Vectors that cannot be computed now (embedder down) leave BM25 alone and say so.
    """
    if mode != "vector":
        keyword, model = _bm25_hits(team, notes, query)
    else:
        keyword, model = [], None
    if mode == "bm25":
        return Ranked(keyword)
    found = vectors.similarities(team=team, notes=notes, query=query)
    degraded = ["vectors"] if found.degraded else []
    by_id = {note.pk: note for note in notes}
    if mode == "vector":
        ordered = sorted(found.scores.items(), key=lambda item: -item[1])
        return Ranked([Hit(by_id[i], sim, set(), similarity=sim) for i, sim in ordered], degraded)

    query_terms = set(tokens(query))
    top = max((hit.bm25 for hit in keyword), default=0.0)
    idf = dict(model.idf) if model is not None else {}
    fused: dict[int, Hit] = {hit.note.pk: hit for hit in keyword}
    strengths: dict[int, tuple[float, float]] = {
        hit.note.pk: (keyword_strength(hit, top, idf, query_terms), 0.0) for hit in keyword
    }
    for note_id, sim in found.scores.items():
        gate = vector_gate(sim)
        hit = fused.get(note_id)
        if hit is not None:
            hit.similarity = sim
            strengths[note_id] = (strengths[note_id][0], gate)
        elif gate > 0:
            fused[note_id] = Hit(by_id[note_id], 0.0, set(), similarity=sim)
            strengths[note_id] = (0.0, gate)
    for note_id, hit in fused.items():
        strong, weak = sorted(strengths[note_id], reverse=True)
        hit.score = strong + AGREEMENT_BONUS * weak
    hits = sorted(
        (h for h in fused.values() if h.score > 0),
        key=lambda h: (-h.score, -h.bm25, -h.note.updated_at.timestamp()),
    )
    return Ranked(hits, degraded)


def recall_candidates(
    *, team: Team, person: Person, agent: Agent | None, scope: str = "", context: TurnContext | None = None
) -> list[Note]:
    """Everything the concrete scope allows: tags gate the digest, not recall."""
    return visible_notes(team=team, person=person, agent=agent, scope=scope, context=context, gate_on_tags=False).notes


def recall_memories(
    *,
    team: Team,
    person: Person,
    agent: Agent | None,
    query: str,
    limit: int = 5,
    scope: str = "",
    context: TurnContext | None = None,
) -> Ranked:
    candidates = recall_candidates(team=team, person=person, agent=agent, scope=scope, context=context)
    ranked = hybrid_rank(team, candidates, query)
    ranked.hits = ranked.hits[:limit]
    return ranked


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
    candidates = recall_candidates(team=team, person=person, agent=agent, scope=scope, context=context)
    by_key = {note.key: note for note in candidates}
    ranked = hybrid_rank(team, candidates, query)
    ordered: list[tuple[Note, str]] = [(hit.note, "match") for hit in ranked.hits[:seeds]]
    seen = {note.key for note, _ in ordered}
    frontier = [note for note, _ in ordered]
    for _ in range(depth):
        next_frontier = []
        for note in frontier:
            for linked in links(note.content):
                if linked in by_key and linked not in seen:
                    seen.add(linked)
                    ordered.append((by_key[linked], f"link:{note.key}"))
                    next_frontier.append(by_key[linked])
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
    return Bundle(items=items, used_chars=used, omitted=omitted, degraded=ranked.degraded)
