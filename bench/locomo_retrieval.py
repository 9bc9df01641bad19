"""LoCoMo retrieval: the conversation search the composer's passages use, on a public benchmark.

LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0; read in place, never copied into the repository)
has 10 very long two-person conversations and questions whose evidence is the turns that hold the
answer. Each conversation is imported through the history import (`import_conversations`), one
imported conversation per session, every turn a message carrying its session's real date (a
second apart, in order). Then each question of categories 1-4 is asked through `rank_messages`,
exactly as the passages layer and `search_conversation` ask it, and scored against its evidence:

- hit@k: any evidence turn is in the top k (passages show at most 4 hits, so hit@4 is what a turn gets);
- recall@k: the fraction of the question's evidence turns in the top k, averaged over questions.

Honest halves: conversations 0-4 are the **dev** half (the ranking was tuned on them only) and
5-9 the **test** half, untouched while tuning; both are printed. Side by side in the same run:
an in-process BM25 baseline (rank_bm25.BM25Okapi over the same turns of the same conversation,
tokenised with memory.text.tokens), the words half alone, the vector half alone, and the
product's ranking with each of its changes switched off in turn (the ablation rows). The
messages are embedded in bulk before any question is asked, with the local model, or with the
one BENCH_EMBEDDER names (`BENCH_EMBEDDER=e5 python -m bench locomo`: bench/harness.py).

Set LOCOMO_SKIP_SCALE=1 to leave out the latency at 100,000 messages (the slow part) while iterating,
or LOCOMO_ONLY_SCALE=1 to run only that part (the LoCoMo turns are still imported and embedded: the
100,000 messages are copies of them).

The data is looked for at $LOCOMO_DIR, then shared/data/locomo beside the repository (or beside
the folder of worktrees it is in); without it the benchmark says so and skips.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from bench.harness import Result, print_table, through_the_reference_session, use_embedder

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
HIT_KS = (1, 4, 5, 10)
RECALL_KS = (1, 5, 10)
DEV = range(0, 5)  # the conversations the ranking is tuned on; 5-9 are the test half
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
    sessions: list[tuple[int, datetime | None, list[dict[str, Any]]]]  # (number, date, turns), in order
    questions: list[Question] = field(default_factory=list)
    dropped: int = 0  # questions of categories 1-4 left with no usable evidence

    @property
    def turns(self) -> list[dict[str, Any]]:
        return [turn for _, _, turns in self.sessions for turn in turns]


def dataset_path() -> Path | None:
    """locomo10.json at $LOCOMO_DIR, or in shared/data/locomo beside the repository or its worktree folder."""
    root = Path(__file__).resolve().parent.parent
    places = [Path(os.environ["LOCOMO_DIR"])] if os.environ.get("LOCOMO_DIR") else []
    places += [root.parent / "shared" / "data" / "locomo", root.parent.parent / "shared" / "data" / "locomo"]
    return next((place / "locomo10.json" for place in places if (place / "locomo10.json").is_file()), None)


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
            (n, parse_when(conversation.get(f"session_{n}_date_time", "")), conversation[f"session_{n}"])
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


# --- loading through the history import -----------------------------------------------------------


@dataclass
class Loaded:
    sample: Sample
    agent: Any
    person: Any
    message_ids: list[int]


def import_lines(sample: Sample) -> list[dict[str, Any]]:
    """The sample as history-import lines: one conversation per session, each turn at its session's
    date (a second apart, so their order is their time); a session without a date follows the last."""
    roles = {sample.speaker_a: "user", sample.speaker_b: "assistant"}
    lines = []
    previous = datetime(2020, 1, 1, tzinfo=UTC)
    for number, when, turns in sample.sessions:
        at = when or previous + timedelta(days=1)
        previous = at
        messages = [
            {
                "role": roles[turn["speaker"]],
                "content": turn_text(turn),
                "created_at": (at + timedelta(seconds=i)).isoformat(),
                "external_id": turn["dia_id"],
            }
            for i, turn in enumerate(turns)
        ]
        lines.append(
            {
                "person": sample.speaker_a,
                "external_id": f"session_{number}",
                "started_at": at.isoformat(),
                "messages": messages,
            }
        )
    return lines


def load_sample(scratch_team_slug: str, sample: Sample, bar: tqdm) -> Loaded:
    from accounts.services import create_agent, create_team, get_or_create_person
    from conversations.history_import import import_conversations
    from conversations.models import Message

    team = create_team(slug=f"{scratch_team_slug}-{sample.sample_id}")
    agent = create_agent(team=team, slug="locomo", name=sample.speaker_b)  # the other speaker is the agent
    person = get_or_create_person(team=team, external_id=sample.speaker_a)
    report = import_conversations(team=team, agent=agent, items=list(import_lines(sample)), progress=bar.update)
    assert report.messages_created == len(sample.turns), report.summary()
    by_turn = dict(Message.objects.filter(team=team).values_list("external_id", "pk"))
    return Loaded(sample, agent, person, [by_turn[turn["dia_id"]] for turn in sample.turns])


def embed_messages(loaded: list[Loaded]) -> str:
    """Embed every loaded message in bulk with the configured model; returns a line for the report."""
    from conversations.indexing import MESSAGES
    from memory.embedders import get_embedder

    embedder = get_embedder()
    assert embedder is not None

    lengths = {
        pk: len(turn_text(turn))
        for item in loaded
        for pk, turn in zip(item.message_ids, item.sample.turns, strict=True)
    }
    ids = sorted(lengths, key=lengths.__getitem__)  # batches of like length pad least
    start = time.perf_counter()
    indexed = 0
    cpu = time.process_time()
    with tqdm(total=len(ids), desc=f"embed messages ({embedder.model})", leave=False, unit="msg") as bar:
        for offset in range(0, len(ids), EMBED_BATCH):
            batch = ids[offset : offset + EMBED_BATCH]
            indexed += MESSAGES.index(batch)
            bar.update(len(batch))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return (
        f"embedded {indexed:,} messages with {embedder.model} in {elapsed:.1f} s ({indexed / elapsed:,.0f} messages/s; "
        f"{1000 * cpu / max(1, indexed):.1f} ms of this process's CPU per message, storing included)"
    )


# --- asking ------------------------------------------------------------------------------------


@dataclass
class Retrieved:
    retriever: str
    half: str
    category: int
    ranked: list[str]  # dia_ids, best first
    evidence: set[str]


def score(rows: list[Retrieved]) -> dict[str, float]:
    out: dict[str, float] = {"n": len(rows)}
    for k in HIT_KS:
        out[f"hit@{k}"] = 100 * sum(bool(set(r.ranked[:k]) & r.evidence) for r in rows) / max(1, len(rows))
    for k in RECALL_KS:
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


def half_of(index: int) -> str:
    return "dev" if index in DEV else "test"


def ask(loaded: list[Loaded], retrievers: dict[str, Any]) -> tuple[list[Retrieved], dict[tuple[str, str], Result]]:
    from memory.vectors import forget_query_vectors

    rows: list[Retrieved] = []
    timings: dict[tuple[str, str], list[float]] = {(name, half): [] for name in retrievers for half in ("dev", "test")}
    total = sum(len(item.sample.questions) for item in loaded)
    with tqdm(total=total * len(retrievers), desc="questions", leave=False, unit="search") as bar:
        for index, item in enumerate(loaded):
            half = half_of(index)
            searchers = {name: make(item) for name, make in retrievers.items()}
            for question in item.sample.questions:
                for name, search in searchers.items():
                    # Every search embeds its own question, as search_conversation with an agent's
                    # new query does (the query vectors another row computed are not kept for it).
                    forget_query_vectors()
                    start = time.perf_counter()
                    ranked = search(question.text)
                    timings[name, half].append(time.perf_counter() - start)
                    rows.append(Retrieved(name, half, question.category, ranked, question.evidence))
                    bar.update(1)
    return rows, {key: Result(key[0], samples) for key, samples in timings.items() if samples}


_QUERY_VECTORS: dict[str, Any] = {}


def ranked_search(ranking: Any, *, reuse_query_vectors: bool = False, exact_queries: bool = False):
    """rank_messages with this ranking, as the passages layer and search_conversation call it.

    The ablation rows reuse the query vectors the product row computed (the same text gives the
    same vector), so the run stays short; their latency is not reported. exact_queries: the query
    embedded by the local model's reference session (float), not its 8-bit one (which stored the turns)."""

    def make(item: Loaded):
        from unittest import mock

        from conversations.queries import rank_messages
        from memory import vectors

        embed = vectors.embed_query  # what rank_messages' query-embedding thread calls, patched below

        def remembered(text: str) -> Any:
            if text not in _QUERY_VECTORS:
                _QUERY_VECTORS[text] = embed(text)
            return _QUERY_VECTORS[text]

        def search(query: str) -> list[str]:
            if exact_queries:
                with through_the_reference_session():
                    found = rank_messages(
                        agent=item.agent, person=item.person, query=query, limit=LIMIT, ranking=ranking
                    )
            elif reuse_query_vectors:
                with mock.patch.object(vectors, "embed_query", remembered):
                    found = rank_messages(
                        agent=item.agent, person=item.person, query=query, limit=LIMIT, ranking=ranking
                    )
            else:
                found = rank_messages(agent=item.agent, person=item.person, query=query, limit=LIMIT, ranking=ranking)
            return [hit.message.external_id for hit in found.hits]

        return search

    return make


def retrievers() -> tuple[dict[str, Any], list[str]]:
    """Every retriever of the run, and which of them are the ablation rows (the product with one change off)."""
    from dataclasses import replace

    from conversations.queries import DEFAULT_RANKING, RANKING_CHANGES

    found: dict[str, Any] = {
        "BM25Okapi (in process)": lambda item: Bm25Baseline(item.sample).search,
        "words only": ranked_search(replace(DEFAULT_RANKING, meaning=False)),
        "vectors only": ranked_search(replace(DEFAULT_RANKING, words=False)),
        PRODUCT: ranked_search(DEFAULT_RANKING),
    }
    ablations = []
    for label, without in RANKING_CHANGES.items():
        name = f"{PRODUCT} without {label}"
        found[name] = ranked_search(without, reuse_query_vectors=True)
        ablations.append(name)
    exact = f"{PRODUCT}, questions through the reference session (float; turns stored through the 8-bit one)"
    found[exact] = ranked_search(DEFAULT_RANKING, exact_queries=True)
    ablations.append(exact)
    return found, ablations


PRODUCT = "rank_messages"
REFERENCE_QUERIES = f"{PRODUCT}, the query through the reference session (float)"
COLUMNS = ["n"] + [f"hit@{k}" for k in HIT_KS] + [f"recall@{k}" for k in RECALL_KS]


def print_quality(
    title: str, rows: list[Retrieved], names: list[str], half: str, categories: Sequence[int | None]
) -> None:
    print(f"\n### {title}\n")
    print("| retriever | category | " + " | ".join(COLUMNS) + f" | recall@10 vs {names[0]} |")
    print("| --- | --- | " + " | ".join("---:" for _ in COLUMNS) + " | ---: |")
    for category in categories:
        picked = {
            name: score([r for r in rows if r.retriever == name and r.half == half and category in (None, r.category)])
            for name in names
        }
        baseline = picked[names[0]]["recall@10"]
        for name in names:
            scores = picked[name]
            label = "all (1-4)" if category is None else f"{category} {CATEGORIES[category]}"
            cells = [f"{scores['n']:.0f}"] + [f"{scores[c]:.1f}" for c in COLUMNS[1:]]
            delta = "—" if name == names[0] else f"{scores['recall@10'] - baseline:+.1f}"
            print(f"| {name} | {label} | " + " | ".join(cells) + f" | {delta} |")


def run(scratch_team_slug: str) -> None:
    dataset = dataset_path()
    if dataset is None:
        print("\nLoCoMo retrieval: skipped, locomo10.json was not found (set LOCOMO_DIR to the folder that has it).")
        return
    from django.conf import settings

    from conversations.indexing import MESSAGES
    from conversations.models import Message

    started = time.perf_counter()
    samples = load_samples(dataset)
    questions = sum(len(s.questions) for s in samples)
    dropped = sum(s.dropped for s in samples)

    # Import with no embedder (no per-batch tasks queued), then embed everything in one bulk pass.
    settings.EMBEDDER = "none"
    turns = sum(len(s.turns) for s in samples)
    load_start = time.perf_counter()
    with tqdm(total=turns, desc="import LoCoMo sessions", leave=False, unit="msg") as bar:
        loaded = [load_sample(scratch_team_slug, sample, bar) for sample in samples]
    load_elapsed = time.perf_counter() - load_start
    embedder_name = use_embedder()  # the default (local), or BENCH_EMBEDDER, whatever EMBEDDER says
    embedded = embed_messages(loaded)
    unindexed = MESSAGES.stale(rows=Message.objects.filter(pk__in=[pk for i in loaded for pk in i.message_ids]))
    assert not unindexed.exists(), "every LoCoMo message has a vector before the questions are asked"

    if os.environ.get("LOCOMO_ONLY_SCALE"):
        print(f"\nLoCoMo questions: skipped (LOCOMO_ONLY_SCALE is set). {embedded}.")
        at_scale(scratch_team_slug, loaded)
        print(f"\nLoCoMo retrieval benchmark: {time.perf_counter() - started:.0f} s")
        return
    found, ablations = retrievers()
    rows, timings = ask(loaded, found)
    names = [name for name in found if name not in ablations]

    print(
        f"\nLoCoMo: {len(samples)} conversations, {sum(len(s.sessions) for s in samples)} sessions, "
        f"{turns:,} turns imported through import_conversations with their sessions' dates in {load_elapsed:.1f} s; "
        f"{questions:,} questions of categories 1-4 with evidence ({dropped} dropped: no usable evidence); "
        f"top {LIMIT} per question. Dev half: conversations {DEV.start}-{DEV.stop - 1} (tuned on); "
        f"test half: the rest (untouched while tuning)."
    )
    print(
        f"{embedded}. Embedder: EMBEDDER={embedder_name} (BENCH_EMBEDDER), VECTOR_FLOOR {settings.VECTOR_FLOOR}, "
        f"VECTOR_STRONG {settings.VECTOR_STRONG}."
    )
    for half in ("test", "dev"):
        label = "test half (conversations 5-9, untouched while tuning)" if half == "test" else "dev half (0-4)"
        print_quality(f"LoCoMo {label}: all questions", rows, names, half, [None])
        print_quality(f"LoCoMo {label}: by category", rows, names, half, sorted(CATEGORIES))
        if ablations:
            print_quality(
                f"LoCoMo {label}: ablation, one change off at a time", rows, [PRODUCT, *ablations], half, [None, 1]
            )
        baseline = timings[names[0], half]
        print_table(
            f"LoCoMo {label}: search latency in process (BM25 index prebuilt per conversation)",
            [(baseline, None)] + [(timings[name, half], baseline) for name in names[1:]],
        )
    if os.environ.get("LOCOMO_SKIP_SCALE"):
        print(f"\nLatency at {SCALE:,} messages: skipped (LOCOMO_SKIP_SCALE is set).")
    else:
        at_scale(scratch_team_slug, loaded)
    print(f"\nLoCoMo retrieval benchmark: {time.perf_counter() - started:.0f} s")


SCALE = 100_000
SCALE_QUESTIONS = 100


def at_scale(scratch_team_slug: str, loaded: list[Loaded]) -> None:
    """Latency with 100,000 messages between one agent and one person: the LoCoMo turns imported
    again and again (real words, real term frequencies) through the history import, each copy
    given its source turn's vector (copied in SQL: embedding 100,000 messages here would take an
    hour), then test-half questions asked of that pair."""
    from dataclasses import replace

    from django.conf import settings
    from django.db import connection
    from django.test import override_settings

    from accounts.services import create_agent, create_team, get_or_create_person
    from conversations.history_import import import_conversations
    from conversations.models import Message
    from conversations.queries import DEFAULT_RANKING, rank_messages
    from memory.indexing import namespace_for

    settings.EMBEDDER = "none"
    team = create_team(slug=f"{scratch_team_slug}-scale")
    agent = create_agent(team=team, slug="locomo", name="Melanie")
    person = get_or_create_person(team=team, external_id="caroline")
    turns = [(pk, turn) for item in loaded for pk, turn in zip(item.message_ids, item.sample.turns, strict=True)]
    roles = dict(Message.objects.filter(pk__in=[pk for pk, _ in turns]).values_list("pk", "role"))
    start = time.perf_counter()
    copy, total = 0, 0
    with tqdm(total=SCALE, desc="import 100,000 messages", leave=False, unit="msg") as bar:
        while total < SCALE:
            batch = turns[: SCALE - total]
            day = datetime(2021, 1, 1, tzinfo=UTC) + timedelta(days=copy)
            lines = [
                {
                    "person": "caroline",
                    "external_id": f"copy-{copy}-{offset}",
                    "messages": [
                        {
                            "role": roles[pk],
                            "content": turn_text(turn),
                            "created_at": (day + timedelta(seconds=offset + i)).isoformat(),
                            "external_id": f"{copy}:{pk}",
                        }
                        for i, (pk, turn) in enumerate(batch[offset : offset + 500])
                    ],
                }
                for offset in range(0, len(batch), 500)
            ]
            import_conversations(team=team, agent=agent, items=list(lines), progress=bar.update)
            total += len(batch)
            copy += 1
    imported = time.perf_counter() - start
    use_embedder()
    from memory.embedders import get_embedder

    embedder = get_embedder()
    assert embedder is not None
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO conversations_messagevector (team_id, message_id, namespace, model, dim, embedding, embedded_at)
            SELECT m.team_id, m.id, %(namespace)s, v.model, v.dim, v.embedding, now()
            FROM conversations_message m
            JOIN conversations_messagevector v
              ON v.message_id = split_part(m.external_id, ':', 2)::bigint AND v.model = %(model)s
            WHERE m.team_id = %(team)s
            """,
            {"namespace": namespace_for(team.pk), "model": embedder.model, "team": team.pk},
        )
        vectors = cursor.rowcount
        # Vacuumed as well as analysed, as autovacuum leaves a table some time after a bulk load:
        # left to autovacuum, its pass over these 200,000 new rows ran during the timed searches
        # (seen in pg_stat_user_tables), competing with them for the machine's two cores.
        cursor.execute("VACUUM (ANALYZE) conversations_message, conversations_messagevector")
    questions = [q.text for index, item in enumerate(loaded) if half_of(index) == "test" for q in item.sample.questions]
    questions = questions[:SCALE_QUESTIONS]
    in_sql_name = f"{PRODUCT}, in SQL (nothing kept of the pair, as before)"
    before = f"{PRODUCT}, exact throughout (before)"  # and its query through the reference session
    variants = {
        "words only": (replace(DEFAULT_RANKING, meaning=False), False),
        "vectors only": (replace(DEFAULT_RANKING, words=False), False),
        PRODUCT: (DEFAULT_RANKING, False),
        in_sql_name: (DEFAULT_RANKING, None),
        before: (DEFAULT_RANKING, True),
        REFERENCE_QUERIES: (DEFAULT_RANKING, False),
    }
    from conversations.retrieval import STATISTICS, Scope, approximate_depth
    from memory.vectors import embed_query, forget_query_vectors

    STATISTICS.forget()
    # The exact row searches in SQL too: kept whole, this pair's vectors would take some 150 MB.
    exact_settings = {"SEARCH_EXACT_UP_TO": 10**9, "SEARCH_COMMON_WORD_MESSAGES": 10**9, "SEARCH_KEPT_MESSAGES": 0}
    in_sql = {"SEARCH_KEPT_MESSAGES": 0}

    def variant_settings(exact: bool | None) -> dict[str, int]:
        return exact_settings if exact else in_sql if exact is None else {}

    from conversations.kept_pairs import forget_kept_pairs, kept_counts, reading, vectors_kept

    forget_kept_pairs()
    first = Result(
        f"{PRODUCT}: the process's first search of the pair (in SQL: a thread reads the pair meanwhile)",
        [_timed(lambda: rank_messages(agent=agent, person=person, query=questions[0], limit=LIMIT))],
    )
    started = time.perf_counter()
    while reading() or not kept_counts()[0]:
        time.sleep(0.005)
    read = Result(
        f"{PRODUCT}: the pair's words read and kept by that thread (from that search on)",
        [time.perf_counter() - started + first.samples[0]],
    )
    kept_words, kept_vectors = kept_counts()
    kind = vectors_kept(agent, person)
    timings: dict[str, list[float]] = {name: [] for name in variants}
    ranked: dict[str, list[list[int]]] = {name: [] for name in variants}
    kept_row = f"{PRODUCT}, the query's vector kept (embedded before, as a turn's message may be)"
    timings[kept_row] = []
    # One variant at a time: the ones searched in SQL drop the kept pair (SEARCH_KEPT_MESSAGES=0),
    # which the kept ones would otherwise read anew after each. Each variant warms up first
    # (caches, the statistics, the pair read again), then keeps the pair for all its questions.
    for name, (ranking, exact) in tqdm(variants.items(), desc="variants at 100,000 messages", leave=False):
        with (
            override_settings(**variant_settings(exact)),
            through_the_reference_session() if name in (REFERENCE_QUERIES, before) else nullcontext(),
        ):
            for question in questions[:5]:
                rank_messages(agent=agent, person=person, query=question, limit=LIMIT, ranking=ranking)
            while reading():  # a variant after one searched in SQL reads the pair again, on a thread
                time.sleep(0.005)
            for question in questions:
                forget_query_vectors()  # each search embeds its own query (see ask)
                begin = time.perf_counter()
                hits = rank_messages(agent=agent, person=person, query=question, limit=LIMIT, ranking=ranking).hits
                timings[name].append(time.perf_counter() - begin)
                ranked[name].append([hit.message.pk for hit in hits])
                if name == PRODUCT:
                    embed_query(question)
                    begin = time.perf_counter()
                    rank_messages(agent=agent, person=person, query=question, limit=LIMIT)
                    timings[kept_row].append(time.perf_counter() - begin)
    scope = Scope.of(agent, person)
    depth = approximate_depth(scope, embedder.dim)
    # The copies repeat each turn about 17 times, so agreement is counted by source turn.
    sources = {
        pk: external_id.split(":")[-1]
        for pk, external_id in Message.objects.filter(
            pk__in={pk for lists in ranked.values() for one in lists for pk in one}
        ).values_list("pk", "external_id")
    }

    def agreement(name: str) -> float:
        shared = [
            len({sources[pk] for pk in a} & {sources[pk] for pk in b}) / max(1, len({sources[pk] for pk in b}))
            for a, b in zip(ranked[name], ranked[before], strict=True)
        ]
        return 100 * sum(shared) / max(1, len(shared))

    print(
        f"\n{total:,} messages between one agent and one person imported in {imported:.1f} s "
        f"({total / imported:,.0f} messages/s); {vectors:,} vectors copied from their source turns; "
        "both tables vacuumed and analysed before any search was timed."
    )
    print(
        f"Meaning in SQL (the row searched in SQL): through the HNSW index asking for {depth} neighbours (hnsw.ef_search)"
        if depth
        else "Meaning in SQL (the row searched in SQL): by an exact scan (the approximate path was not taken)"
    )
    how = {
        "quantised": "kept small (conversations.quantised): found by their signs, the closest scored from 8 bits",
        "exact": "kept whole, scanned exactly",
        None: "not kept (they do not fit SEARCH_KEPT_VECTORS' room): the meaning half asks the HNSW index",
    }[kind]
    print(
        f"Kept by this process for the search: the words of {kept_words:,} messages and room for {kept_vectors:,} "
        f"vectors kept whole; the pair's vectors {how}."
    )
    print(
        f"Top {LIMIT} of {PRODUCT} agreeing with the exact search, by source turn: "
        f"{agreement(PRODUCT):.1f}%; searched in SQL: {agreement(in_sql_name):.1f}% (a 5-question warm-up ran first)."
    )
    results = {name: Result(name, samples) for name, samples in timings.items()}
    # Every search above embedded its query (none was kept), but the kept row's: what embedding
    # alone costs, measured apart on the same questions.
    embedding = Result(
        f"embedding the query alone ({embedder.model})",
        [_timed(lambda q=question: embedder.embed_query(q)) for question in questions],
    )
    with through_the_reference_session():
        embedding_exactly = Result(
            f"embedding the query alone, through the reference session ({embedder.model}, float)",
            [_timed(lambda q=question: embedder.embed_query(q)) for question in questions],
        )
    rows: list[tuple[Result, Result | None]] = [(results[before], None)]
    rows += [(results[name], results[before]) for name in variants if name != before]
    rows.append((results[kept_row], results[before]))
    rows.append((first, results[before]))
    rows.append((read, results[before]))
    rows.append((embedding, results[before]))
    rows.append((embedding_exactly, results[before]))
    print_table(
        f"Conversation search latency at {total:,} messages for the pair, {len(questions)} test-half questions", rows
    )


def _timed(operation: Any) -> float:
    begin = time.perf_counter()
    operation()
    return time.perf_counter() - begin
