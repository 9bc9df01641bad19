"""LoCoMo retrieval: the conversation search the composer's passages use, on a public benchmark.

LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0, read from ../shared/data/locomo, never vendored)
has 10 very long two-person conversations and questions whose evidence is the turns that hold the
answer. Every turn is recorded as a Message through the write path (one conversation per session),
then each question of categories 1-4 is asked through `search_messages`, exactly as the passages
layer asks it, and scored against its evidence turns:

- hit@k: any evidence turn is in the top k;
- recall@k: the fraction of the question's evidence turns in the top k, averaged over questions.

Side by side in the same run: an in-process BM25 baseline (rank_bm25.BM25Okapi over the same turns
of the same conversation, tokenised with memory.text.tokens), and the same search_messages with no
embedder (what answers while the embedder is down). The messages are embedded in bulk with the
local model before any question is asked. Team reference figures on this data:
BM25 hit@10 61.9 / recall@10 55.2; Postgres OR-of-terms ts_rank_cd 64.0 / 57.5; fused with MiniLM
vectors 65.6 / 58.1; the LoCoMo paper's DRAGON retriever recall@10 66.2.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from bench.harness import Result, print_table

DATASET = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo" / "locomo10.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (1, 5, 10)
LIMIT = 10
EMBED_BATCH = 256
_SESSION = re.compile(r"^session_(\d+)$")
_EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")


@dataclass
class Question:
    text: str
    category: int
    evidence: set[str]


@dataclass
class Sample:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: list[tuple[datetime | None, list[dict[str, Any]]]]  # in chronological order
    questions: list[Question] = field(default_factory=list)
    dropped: int = 0  # questions of categories 1-4 left with no usable evidence

    @property
    def turns(self) -> list[dict[str, Any]]:
        return [turn for _, turns in self.sessions for turn in turns]


def parse_when(raw: str) -> datetime | None:
    """'1:56 pm on 8 May, 2023' -> an aware datetime (UTC); None when it does not parse."""
    try:
        return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except (AttributeError, ValueError):
        return None


def turn_text(turn: dict[str, Any]) -> str:
    text = turn["text"]
    if turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


def normalise_evidence(raw: list[str], known: set[str]) -> set[str]:
    """Split packed strings ("D8:6; D9:17"), repair "D:11:26" and "D30:05", drop ids of no turn."""
    found = set()
    for item in raw:
        for session, turn in _EVIDENCE_ID.findall(str(item)):
            found.add(f"D{int(session)}:{int(turn)}")
    return found & known


def load_samples(path: Path) -> list[Sample]:
    samples = []
    for raw in json.loads(path.read_text()):
        conversation = raw["conversation"]
        numbers = sorted(int(m.group(1)) for key in conversation if (m := _SESSION.match(key)))
        sessions = [
            (parse_when(conversation.get(f"session_{n}_date_time", "")), conversation[f"session_{n}"])
            for n in numbers
            if conversation[f"session_{n}"]
        ]
        sample = Sample(raw["sample_id"], conversation["speaker_a"], conversation["speaker_b"], sessions)
        known = {turn["dia_id"] for turn in sample.turns}
        for item in raw["qa"]:
            if item["category"] not in CATEGORIES:
                continue
            evidence = normalise_evidence(item.get("evidence", []), known)
            if evidence:
                sample.questions.append(Question(item["question"], item["category"], evidence))
            else:
                sample.dropped += 1
        samples.append(sample)
    return samples


# --- loading through the write path --------------------------------------------------------------


@dataclass
class Loaded:
    sample: Sample
    agent: Any
    person: Any
    message_ids: list[int]


def load_sample(scratch_team_slug: str, sample: Sample, bar: tqdm) -> Loaded:
    from django.utils import timezone

    from accounts.services import create_agent, create_team, get_or_create_person
    from conversations.services import record_message, start_conversation

    team = create_team(slug=f"{scratch_team_slug}-{sample.sample_id}")
    agent = create_agent(team=team, slug="locomo")
    person = get_or_create_person(team=team, external_id=sample.speaker_a)
    roles = {sample.speaker_a: "user", sample.speaker_b: "assistant"}
    ids = []
    for when, turns in sample.sessions:
        at = when or timezone.now()
        conversation = start_conversation(team=team, agent=agent, person=person, started_at=at)
        for turn in turns:
            message = record_message(
                conversation=conversation,
                role=roles[turn["speaker"]],
                content=turn_text(turn),
                created_at=at,
                external_id=turn["dia_id"],
            )
            ids.append(message.pk)
            bar.update(1)
    return Loaded(sample, agent, person, ids)


def embed_messages(loaded: list[Loaded]) -> str:
    """Embed every loaded message in bulk with the configured (local) model; returns a line for the report."""
    from conversations.indexing import MESSAGES

    lengths = {
        pk: len(turn_text(turn))
        for item in loaded
        for pk, turn in zip(item.message_ids, item.sample.turns, strict=True)
    }
    ids = sorted(lengths, key=lengths.__getitem__)  # batches of like length pad least
    start = time.perf_counter()
    indexed = 0
    with tqdm(total=len(ids), desc="embed messages (local)", leave=False, unit="msg") as bar:
        for offset in range(0, len(ids), EMBED_BATCH):
            batch = ids[offset : offset + EMBED_BATCH]
            indexed += MESSAGES.index(batch)
            bar.update(len(batch))
    elapsed = time.perf_counter() - start
    return (
        f"embedded {indexed:,} messages with the local model in {elapsed:.1f} s ({indexed / elapsed:,.0f} messages/s)"
    )


# --- asking ------------------------------------------------------------------------------------


@dataclass
class Retrieved:
    retriever: str
    category: int
    ranked: list[str]  # dia_ids, best first
    evidence: set[str]


def score(rows: list[Retrieved]) -> dict[str, float]:
    out: dict[str, float] = {"n": len(rows)}
    for k in KS:
        out[f"hit@{k}"] = 100 * sum(bool(set(r.ranked[:k]) & r.evidence) for r in rows) / max(1, len(rows))
        out[f"recall@{k}"] = (
            100 * sum(len(set(r.ranked[:k]) & r.evidence) / len(r.evidence) for r in rows) / max(1, len(rows))
        )
    return out


class Bm25Baseline:
    """BM25Okapi over the turns of one conversation, as the team measured it."""

    def __init__(self, sample: Sample) -> None:
        from rank_bm25 import BM25Okapi

        from memory.text import tokens

        self._tokens = tokens
        turns = sample.turns
        self.ids = [turn["dia_id"] for turn in turns]
        documents = [tokens(turn_text(turn)) for turn in turns]
        self.vocab = [set(doc) for doc in documents]
        self.index = BM25Okapi(documents)

    def search(self, query: str, limit: int = LIMIT) -> list[str]:
        wanted = self._tokens(query)
        if not wanted:
            return []
        scores = self.index.get_scores(wanted)
        order = np.argsort(-scores, kind="stable")
        query_set = set(wanted)
        # Only turns sharing a term are results (a turn with none is not a match, whatever its score).
        return [self.ids[i] for i in order[: limit * 4] if query_set & self.vocab[i]][:limit]


def ask(loaded: list[Loaded], retrievers: dict[str, Any]) -> tuple[list[Retrieved], dict[str, Result]]:
    rows: list[Retrieved] = []
    timings: dict[str, list[float]] = {name: [] for name in retrievers}
    total = sum(len(item.sample.questions) for item in loaded)
    with tqdm(total=total * len(retrievers), desc="questions", leave=False, unit="search") as bar:
        for item in loaded:
            searchers = {name: make(item) for name, make in retrievers.items()}
            for question in item.sample.questions:
                for name, search in searchers.items():
                    start = time.perf_counter()
                    ranked = search(question.text)
                    timings[name].append(time.perf_counter() - start)
                    rows.append(Retrieved(name, question.category, ranked, question.evidence))
                    bar.update(1)
    return rows, {name: Result(name, samples) for name, samples in timings.items()}


def product_search(item: Loaded):
    from conversations.queries import search_messages

    def search(query: str) -> list[str]:
        hits = search_messages(agent=item.agent, person=item.person, query=query, limit=LIMIT)
        return [hit.message.external_id for hit in hits]

    return search


def words_only_search(item: Loaded):
    """The same search with no embedder: what answers while the embedder is down."""
    from django.conf import settings

    from conversations.queries import search_messages

    def search(query: str) -> list[str]:
        settings.EMBEDDER = "none"
        try:
            hits = search_messages(agent=item.agent, person=item.person, query=query, limit=LIMIT)
        finally:
            settings.EMBEDDER = "local"
        return [hit.message.external_id for hit in hits]

    return search


def print_quality(title: str, rows: list[Retrieved], retrievers: list[str], categories: Sequence[int | None]) -> None:
    print(f"\n### {title}\n")
    columns = ["n"] + [f"hit@{k}" for k in KS] + [f"recall@{k}" for k in KS]
    print("| retriever | category | " + " | ".join(columns) + " |")
    print("| --- | --- | " + " | ".join("---:" for _ in columns) + " |")
    for category in categories:
        for retriever in retrievers:
            picked = [r for r in rows if r.retriever == retriever and category in (None, r.category)]
            scores = score(picked)
            label = "all (1-4)" if category is None else f"{category} {CATEGORIES[category]}"
            cells = [f"{scores['n']:.0f}"] + [f"{scores[c]:.1f}" for c in columns[1:]]
            print(f"| {retriever} | {label} | " + " | ".join(cells) + " |")


def run(scratch_team_slug: str) -> None:
    if not DATASET.exists():
        print(f"\nLoCoMo retrieval: skipped, the dataset is not at {DATASET} (see shared/data/locomo/README.md).")
        return
    from django.conf import settings

    from conversations.indexing import MESSAGES
    from conversations.models import Message

    started = time.perf_counter()
    samples = load_samples(DATASET)
    questions = sum(len(s.questions) for s in samples)
    dropped = sum(s.dropped for s in samples)

    # Load with no embedder (no per-message tasks queued), then embed everything in one bulk pass.
    settings.EMBEDDER = "none"
    turns = sum(len(s.turns) for s in samples)
    load_start = time.perf_counter()
    with tqdm(total=turns, desc="record LoCoMo turns", leave=False, unit="msg") as bar:
        loaded = [load_sample(scratch_team_slug, sample, bar) for sample in samples]
    load_elapsed = time.perf_counter() - load_start
    settings.EMBEDDER = "local"  # the default, whatever the environment says
    embedded = embed_messages(loaded)
    unindexed = MESSAGES.stale(rows=Message.objects.filter(pk__in=[pk for i in loaded for pk in i.message_ids]))
    assert not unindexed.exists(), "every LoCoMo message has a vector before the questions are asked"

    retrievers = {
        "BM25Okapi (in process)": lambda item: Bm25Baseline(item.sample).search,
        "search_messages": product_search,
        "search_messages, words only (no embedder)": words_only_search,
    }
    rows, timings = ask(loaded, retrievers)
    names = list(retrievers)

    print(
        f"\nLoCoMo: {len(samples)} conversations, {sum(len(s.sessions) for s in samples)} sessions, "
        f"{turns:,} turns recorded through record_message in {load_elapsed:.1f} s; {questions:,} questions of "
        f"categories 1-4 with evidence ({dropped} dropped: no usable evidence); top {LIMIT} per question."
    )
    print(embedded)
    print_quality("LoCoMo retrieval, all questions (categories 1-4)", rows, names, [None])
    print_quality("LoCoMo retrieval by category", rows, names, sorted(CATEGORIES))
    baseline = timings[names[0]]
    print_table(
        f"LoCoMo search latency, {questions:,} questions (BM25 index prebuilt per conversation)",
        [(baseline, None)] + [(timings[name], baseline) for name in names[1:]],
    )
    print(f"\nLoCoMo retrieval benchmark: {time.perf_counter() - started:.0f} s")
