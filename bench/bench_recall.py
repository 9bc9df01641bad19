"""Recall when keys say nothing: 1,000 facts about one person's circle, stored with informative and
with neutral keys (bench/recall_facts.py), 50 targeted and 50 reverse questions.

1. Quality and latency at 10, 100 and 1,000 notes, per key set: BM25 alone and vectors alone
   (exact cosine over the stored vectors of the int8 MiniLM) as in-run baselines, against
   `recall_memories` and `search` as an agent calls them (the tool handlers). hit@1/5/10 over the
   questions whose answer is in the bank; p50/p95 per call, the query embedded in the call (its
   cache is cleared first), and `recall_memories` again with the query's vector cached, right
   after a write to the bank, and with nothing of the bank kept by the process.
2. Ablation at 1,000 notes: the ranking re-computed in this process (numpy, the same tokens and
   BM25, the stored vectors) with one cause changed at a time: the keyword weighting toward key
   and description, the fusion of keyword and vector scores, and what text is embedded. A row
   re-computing the shipped ranking shows the re-implementation agrees with the real one.
   The ranking's constants were tuned on the "tune" half of the questions; the "held-out" half is
   reported beside it.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from bench.harness import Result, measure, use_embedder
from bench.recall_facts import Fact, Question, bank_order, facts, questions

if TYPE_CHECKING:
    from memory.recall import Mode

SIZES = (10, 100, 1000)
KEYSETS = ("informative", "neutral")
LIMIT = 5000  # bank limits: every size fits without FULL or consolidation
TOP = 10


def note_fields(fact: Fact, keys: str) -> tuple[str, str, str]:
    """(key, description, content) of the fact's note under this key set."""
    if keys == "informative":
        return fact.informative_key, fact.informative_description, fact.text
    return fact.neutral_key, fact.text, fact.text


@dataclass
class Bank:
    keys: str
    size: int
    person: Any
    facts: list[Fact]
    asked: list[Question]
    key_of: dict[int, str]  # fact index -> note key
    write_samples: list[float]


def fill(team: Any, agent: Any, keys: str, size: int, ordered: list[Fact], asked: list[Question]) -> Bank:
    from accounts.services import get_or_create_person
    from memory.models import Bank as BankModel
    from memory.services import Actor, get_or_create_bank, remember, update_bank_settings

    person = get_or_create_person(team=team, external_id=f"bench-recall-{keys}-{size}")
    bank = get_or_create_bank(team=team, person=person, scope="", kind=BankModel.Kind.GLOBAL)
    update_bank_settings(bank=bank, actor=Actor("admin", "bench"), changes={"soft_limit": LIMIT, "hard_limit": LIMIT})
    actor = Actor.for_agent(agent)
    chosen = ordered[:size]
    samples = []
    for fact in tqdm(chosen, desc=f"fill {keys} {size:,}", leave=False, unit="note"):
        key, description, content = note_fields(fact, keys)
        start = time.perf_counter()
        result = remember(
            team=team,
            person=person,
            actor=actor,
            bank=BankModel.Kind.GLOBAL,
            key=key,
            description=description,
            content=content,
        )
        samples.append(time.perf_counter() - start)
        assert result.action == "created", result.action
    in_bank = {fact.index for fact in chosen}
    return Bank(
        keys,
        size,
        person,
        chosen,
        [q for q in asked if q.answer.index in in_bank],
        {fact.index: note_fields(fact, keys)[0] for fact in chosen},
        samples,
    )


def index(person: Any) -> None:
    from memory.indexing import NOTES
    from memory.models import Note

    report = NOTES.reconcile(rows=Note.objects.filter(bank__person=person))
    assert not report.error, report.error


def rates(ranked: list[list[str]], answers: list[str]) -> tuple[float, float, float]:
    n = max(1, len(answers))
    return tuple(  # type: ignore[return-value]
        sum(answer in keys[:k] for keys, answer in zip(ranked, answers, strict=True)) / n for k in (1, 5, 10)
    )


# --- 1. the shipped functions -----------------------------------------------------------------


def shipped(team: Any, agent: Any, bank: Bank) -> list[tuple[str, Result, tuple[float, float, float], str]]:
    from memory import recall, vectors
    from memory.tools import REGISTRY, ToolContext

    ctx = ToolContext(team=team, agent=agent, api_key=None)
    person_id = bank.person.external_id
    asked = bank.asked
    answers = [bank.key_of[q.answer.index] for q in asked]

    def via_tool(name: str) -> Callable[[str], list[str]]:
        tool = REGISTRY[name]

        def call(query: str) -> list[str]:
            out = tool.run(ctx, tool.parse({"person": person_id, "query": query, "limit": TOP}))
            assert not out["degraded"], out["degraded"]
            return [hit["key"] for hit in out["results"]]

        return call

    def alone(mode: Mode) -> Callable[[str], list[str]]:
        def call(query: str) -> list[str]:
            ranked = recall.recall_memories(
                team=team, person=bank.person, agent=agent, query=query, limit=TOP, mode=mode
            )
            assert not ranked.degraded, ranked.degraded
            return [hit.note.key for hit in ranked.hits[:TOP]]

        return call

    rows = []
    for label, call, cold in [
        ("BM25 alone", alone("bm25"), False),
        ("vectors alone (exact cosine)", alone("vector"), True),
        ("recall_memories", via_tool("recall_memories"), True),
        ("search", via_tool("search"), True),
        ("recall_memories, query vector cached", via_tool("recall_memories"), False),
    ]:
        got: dict[int, list[str]] = {}
        if not cold:  # every question's vector in the cache first, as after a turn that embedded it
            for question in asked:
                vectors.embed_query(question.text)

        def op(
            i: int, call: Callable[[str], list[str]] = call, cold: bool = cold, got: dict[int, list[str]] = got
        ) -> None:
            if cold:
                vectors._QUERY_CACHE.clear()
            got[i] = call(asked[i % len(asked)].text)

        repeat = max(len(asked), 20)
        result = measure(f"{label}", op, repeat=repeat, warmup=2)
        ranked = [got[i] for i in range(len(asked))]
        rows.append((label, result, rates(ranked, answers), ""))
    rows += unsettled(team, agent, bank, via_tool("recall_memories"), answers)
    return rows


def unsettled(
    team: Any, agent: Any, bank: Bank, call: Callable[[str], list[str]], answers: list[str]
) -> list[tuple[str, Result, tuple[float, float, float], str]]:
    """recall_memories when what a process keeps of the bank does not serve: right after a write to
    the bank (its new version read again, the unchanged notes' vectors carried over), and a
    process's first recall of the bank (nothing kept). Only the recall is timed; query vectors cached."""
    from memory import kept_banks
    from memory.models import Bank as BankModel
    from memory.services import Actor, delete_note, remember

    actor = Actor.for_agent(agent)
    asked = bank.asked
    rows = []
    for label, before in [
        ("recall_memories right after a write to the bank", "write"),
        ("recall_memories, nothing kept (a process's first)", "forget"),
    ]:
        got: dict[int, list[str]] = {}
        samples = []
        for i in range(max(len(asked), 20)):
            if before == "write":  # one note rewritten, as a remember between two recalls
                remember(team=team, person=bank.person, actor=actor, bank=BankModel.Kind.GLOBAL, key="bench-churn",
                         description="A note rewritten before each recall", content=f"Churn number {i}.")  # fmt: skip
            else:  # nothing kept: neither the bank nor its notes' words
                kept_banks.forget_kept()
                kept_banks.TERMS.clear()
            start = time.perf_counter()
            got[i] = call(asked[i % len(asked)].text)
            samples.append(time.perf_counter() - start)
        ranked = [[key for key in got[i] if key != "bench-churn"] for i in range(len(asked))]
        rows.append((label, Result(label, samples), rates(ranked, answers), ""))
    churn = BankModel.objects.get(team=team, person=bank.person, kind=BankModel.Kind.GLOBAL).notes.get(
        key="bench-churn"
    )
    delete_note(note=churn, actor=actor)  # the bank as it was, for the ablation
    return rows


def print_shipped(rows: dict[tuple[str, int], list[tuple[str, Result, tuple[float, float, float], str]]]) -> None:
    print("\n### Recall by key set and bank size: hit@k over the questions answered in the bank, and latency\n")
    print("| keys | notes | questions | ranking | hit@1 | hit@5 | hit@10 | p50 ms | p95 ms | p50 x BM25 alone |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (keys, size), group in rows.items():
        base = group[0][1]
        for label, result, (at1, at5, at10), _ in group:
            n = len(result.samples)
            print(
                f"| {keys} | {size:,} | {n} | {label} | {at1:.2f} | {at5:.2f} | {at10:.2f} | "
                f"{result.p50_ms:.1f} | {result.p95_ms:.1f} | {result.p50_ms / base.p50_ms:.2f} |"
            )


# --- 2. the ablation ----------------------------------------------------------------------------


def tokens_of(key: str, description: str, content: str, key_weight: int, description_weight: int) -> Counter[str]:
    from memory.text import tokens

    return Counter(
        tokens(key.replace("-", " ")) * key_weight + tokens(description) * description_weight + tokens(content)
    )


def bm25(documents: list[Counter[str]], query: str) -> tuple[np.ndarray, np.ndarray]:
    """BM25 (k1 1.5, b 0.75, idf log((N+1)/df)) and the share of the query's idf each document covers."""
    from memory.text import tokens

    terms = tokens(query)
    n = len(documents)
    lengths = np.array([sum(d.values()) for d in documents], dtype=float)
    average = lengths.mean()
    idf = {t: math.log((n + 1) / max(1, sum(1 for d in documents if t in d))) for t in set(terms)}
    total = sum(idf.values()) or 1.0
    scores = np.zeros(n)
    covered = np.zeros(n)
    for i, document in enumerate(documents):
        for term in set(terms):
            tf = document.get(term, 0)
            if tf:
                covered[i] += idf[term] / total
                weight = tf * 2.5 / (1.5 * (0.25 + 0.75 * lengths[i] / average) + tf)
                scores[i] += idf[term] * weight * terms.count(term)
    return scores, covered


def keyword_strength(scores: np.ndarray, covered: np.ndarray) -> np.ndarray:
    top = scores.max()
    return scores / top * covered if top > 0 else np.zeros_like(scores)


def fuse_before(keyword: np.ndarray, sims: np.ndarray, floor: float, strong: float) -> np.ndarray:
    gate = np.clip((sims - floor) / (strong - floor), 0.0, 1.0)
    return np.maximum(keyword, gate) + 0.5 * np.minimum(keyword, gate)


def fuse_after(keyword: np.ndarray, sims: np.ndarray, floor: float, strong: float, weight: float) -> np.ndarray:
    return np.clip((sims - floor) / (strong - floor), 0.0, None) + weight * keyword


def fuse_rrf(keyword: np.ndarray, sims: np.ndarray, floor: float, k: int = 60) -> np.ndarray:
    by_keyword = np.argsort(np.argsort(-keyword))
    by_vector = np.argsort(np.argsort(-sims))
    return np.where(keyword > 0, 1 / (k + by_keyword), 0) + np.where(sims > floor, 1 / (k + by_vector), 0)


def ranked_keys(
    scores: np.ndarray, bm25_scores: np.ndarray, recency: np.ndarray, keys: list[str], keep_all: bool = False
) -> list[str]:
    """Best first; ties go to the higher BM25, then the newer note (as the shipped ranking breaks them)."""
    order = np.lexsort((-recency, -bm25_scores, -scores))
    return [keys[i] for i in order[:TOP] if keep_all or scores[i] > 0]


def ablation(team: Any, banks: dict[str, Bank], content_vectors: np.ndarray, question_vectors: np.ndarray) -> None:
    from django.conf import settings

    from memory import kept_banks, recall
    from memory.models import Note, NoteVector

    floor, strong = settings.VECTOR_FLOOR, settings.VECTOR_STRONG
    weight = getattr(recall, "KEYWORD_WEIGHT", None)
    print(
        f"\n### Ablation at 1,000 notes: one cause changed at a time (re-computed in process; VECTOR_FLOOR {floor}, "
        f"VECTOR_STRONG {strong}, keyword weight {weight})\n"
    )
    print(
        "| keys | ranking | hit@1 | hit@5 | hit@10 | tune hit@1 / @5 | held-out hit@1 / @5 | targeted @1 | reverse @1 |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for keys, bank in banks.items():
        notes = {n.key: n for n in Note.objects.filter(bank__person=bank.person)}
        order = [bank.key_of[f.index] for f in bank.facts]
        stored = dict(NoteVector.objects.filter(note__bank__person=bank.person).values_list("note__key", "embedding"))
        stored_matrix = np.array([stored[key] for key in order], dtype=np.float32)
        content_matrix = content_vectors[[f.index - 1 for f in bank.facts]]
        recency = np.array([notes[key].updated_at.timestamp() for key in order])
        weighted = [
            tokens_of(
                notes[k].key,
                notes[k].description,
                notes[k].content,
                kept_banks.KEY_WEIGHT,
                kept_banks.DESCRIPTION_WEIGHT,
            )
            for k in order
        ]
        flat = [tokens_of(notes[k].key, notes[k].description, notes[k].content, 1, 1) for k in order]
        asked = bank.asked
        answers = [bank.key_of[q.answer.index] for q in asked]
        qvec = question_vectors[[q_index(q) for q in asked]]
        variants: list[tuple[str, Callable[[np.ndarray, np.ndarray], np.ndarray], list[Counter[str]], np.ndarray]] = [
            ("BM25 alone (key x3, description x2)", lambda kw, s: kw, weighted, stored_matrix),
            ("vectors alone (exact cosine, numpy)", lambda kw, s: s, weighted, stored_matrix),
            ("vectors alone, content only embedded", lambda kw, s: s, weighted, content_matrix),
            (
                "before: gate saturating at VECTOR_STRONG, stronger + 1/2 weaker",
                lambda kw, s: fuse_before(kw, s, floor, strong),
                weighted,
                stored_matrix,
            ),
            (
                "before, key and description not weighted (x1)",
                lambda kw, s: fuse_before(kw, s, floor, strong),
                flat,
                stored_matrix,
            ),
            (
                "before, gate not saturating (up to cosine 1)",
                lambda kw, s: fuse_before(kw, s, floor, 1.0),
                weighted,
                stored_matrix,
            ),
            (
                "before, content only embedded",
                lambda kw, s: fuse_before(kw, s, floor, strong),
                weighted,
                content_matrix,
            ),
            ("reciprocal rank fusion (k 60)", lambda kw, s: fuse_rrf(kw, s, floor), weighted, stored_matrix),
        ]
        if weight is not None:
            variants += [
                (
                    f"after: vector strength + {weight} x keyword strength",
                    lambda kw, s: fuse_after(kw, s, floor, strong, weight),
                    weighted,
                    stored_matrix,
                ),
                (
                    "after, key and description not weighted (x1)",
                    lambda kw, s: fuse_after(kw, s, floor, strong, weight),
                    flat,
                    stored_matrix,
                ),
                (
                    "after, content only embedded",
                    lambda kw, s: fuse_after(kw, s, floor, strong, weight),
                    weighted,
                    content_matrix,
                ),
            ]
        for label, fuse, documents, matrix in variants:
            ranked = []
            for i, question in enumerate(asked):
                scores, covered = bm25(documents, question.text)
                sims = matrix @ qvec[i]
                fused = fuse(keyword_strength(scores, covered), sims)
                ranked.append(ranked_keys(fused, scores, recency, order, keep_all=label.startswith("vectors")))
            cells = [rates(ranked, answers)]
            for part in ("tune", "held-out", "targeted", "reverse"):
                picked = [i for i, q in enumerate(asked) if part in (q.half, q.kind)]
                cells.append(rates([ranked[i] for i in picked], [answers[i] for i in picked]))
            (a1, a5, a10), (t1, t5, _), (h1, h5, _), (g1, _, _), (r1, _, _) = cells
            print(
                f"| {keys} | {label} | {a1:.2f} | {a5:.2f} | {a10:.2f} | {t1:.2f} / {t5:.2f} | {h1:.2f} / {h5:.2f} "
                f"| {g1:.2f} | {r1:.2f} |"
            )
    print(
        "\nThe int8 model is not ablated: no fp32 all-MiniLM-L6-v2 runs here without torch (its vectors agree "
        "with the fp32 ones to cosine 0.9996 on the embedder's own check). Every text here went through its 8-bit "
        "session, whose vectors agree with its float session's to a cosine of about 0.99 (memory.embedders)."
    )


_Q_INDEX: dict[str, int] = {}


def q_index(question: Question) -> int:
    return _Q_INDEX[question.text]


def run(scratch_team_slug: str) -> None:
    from accounts.services import create_agent, create_team
    from memory.embedders import get_embedder

    use_embedder()  # the default (local), or BENCH_EMBEDDER, whatever EMBEDDER says
    started = time.perf_counter()
    all_facts = facts()
    asked = questions(all_facts)
    _Q_INDEX.update({q.text: i for i, q in enumerate(asked)})
    ordered = bank_order(all_facts, asked)
    team = create_team(slug=scratch_team_slug)
    agent = create_agent(team=team, slug="bench-recall")
    embedder = get_embedder()
    assert embedder is not None
    question_vectors = np.vstack([embedder.embed_query(q.text) for q in asked])

    banks: dict[tuple[str, int], Bank] = {}
    for keys in KEYSETS:
        for size in SIZES:
            bank = fill(team, agent, keys, size, ordered, asked)
            index(bank.person)
            banks[(keys, size)] = bank
    print(
        f"\n{len(all_facts):,} facts, {len(asked)} questions ({sum(q.kind == 'targeted' for q in asked)} targeted, "
        f"{sum(q.kind == 'reverse' for q in asked)} reverse; {sum(q.half == 'tune' for q in asked)} in the tuning half)"
    )
    for keys in KEYSETS:
        samples = banks[(keys, 1000)].write_samples
        write = Result("remember", samples)
        print(
            f"- remember while filling the {keys} 1,000-note bank: p50 {write.p50_ms:.1f} ms, p95 {write.p95_ms:.1f} ms"
        )
    single = measure("embed one query", lambda i: embedder.embed_query(asked[i % len(asked)].text), repeat=50)
    print(f"- the embedder alone, one question: p50 {single.p50_ms:.1f} ms, p95 {single.p95_ms:.1f} ms")

    rows = {key: shipped(team, agent, bank) for key, bank in banks.items()}
    print_shipped(rows)

    content_vectors = embedder.embed([fact.text for fact in sorted(all_facts, key=lambda f: f.index)])
    ablation(team, {keys: banks[(keys, 1000)] for keys in KEYSETS}, content_vectors, question_vectors)
    print(f"\nrecall benchmark: {time.perf_counter() - started:.0f} s")
