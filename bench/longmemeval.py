"""LongMemEval: the conversation search and the composed turn on the LongMemEval_S dev sample.

LongMemEval (Wu et al., ICLR 2025; MIT licence; read in place, never copied into the repository)
asks questions of one user's chat history with an assistant: each question has its own haystack
of about 50 sessions (about 500 turns), a few of which hold the evidence (its `has_answer`
turns). Each question is a team of its own, one agent and one person; every session is imported
as one conversation through the history import's API (`POST /api/v1/conversations/import`), each
turn at its session's date (a second apart, in order). Then, per question:

- the question is asked through `rank_messages` (top 10), as `search_conversation` and the
  composer's passages ask it, and scored by turn (recall@10, hit@10: the `has_answer` turns) and
  by session (recall@5, recall@10: the evidence sessions with a turn among the results);
- the question is the message of a turn composed in a new conversation (`POST /api/v1/turns`):
  the share of its evidence turns the composed turn shows (all of a turn of at most 100
  characters, or a contiguous 100-character slice of a longer one), and the characters composed.

Side by side in the same run: an in-process BM25 baseline (rank_bm25.BM25Okapi over the same
turns, tokenised with memory.text.tokens), the words half alone and the vector half alone. The
questions are split in two halves, stratified by question type, by a hash of their ids: the
**tune** half (at most half of each type) is the one to tune on, the **test** half is reported
untouched. LONGMEMEVAL_HALF=tune|test|all (all by default) chooses what is run, and
LONGMEMEVAL_QUESTIONS=n keeps the first n questions of each half (a quick look).

The data is the LongMemEval_S dev sample (`dev-60.jsonl.gz`): at $MNEMO_LONGMEMEVAL (the file
or its folder), else in shared/data/longmemeval beside the repository (or beside the folder of
worktrees it is in); without it the benchmark says so and skips.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import re
import statistics
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from bench.harness import Result, print_table

FILE = "dev-60.jsonl.gz"
LIMIT = 10
SLICE = 100  # evidence in the turn: all of a turn this long or shorter, else a slice this long
HALVES = ("tune", "test")
TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)
PRODUCT = "rank_messages"
BM25 = "BM25Okapi (in process)"
WORDS = "words only"
VECTORS = "vectors only"

TurnName = tuple[str, int]  # (session id, index in its session): how LongMemEval names a turn


# --- scoring (pure) -------------------------------------------------------------------------------


def turn_recall(ranked: Sequence[TurnName], evidence: set[TurnName], k: int) -> float | None:
    """The share of the evidence turns among the first k results; None for a question without any."""
    if not evidence:
        return None
    return len(set(ranked[:k]) & evidence) / len(evidence)


def turn_hit(ranked: Sequence[TurnName], evidence: set[TurnName], k: int) -> float | None:
    """1.0 when an evidence turn is among the first k results, else 0.0; None without any."""
    if not evidence:
        return None
    return 1.0 if set(ranked[:k]) & evidence else 0.0


def session_recall(ranked: Sequence[TurnName], sessions: set[str], k: int) -> float:
    """The share of the evidence sessions with at least one turn among the first k results."""
    if not sessions:
        return 0.0
    return len({session for session, _ in ranked[:k]} & sessions) / len(sessions)


def shown(turn: str, composed: str, width: int = SLICE) -> bool:
    """Whether the composed text shows this turn: all of it when it is at most `width` characters,
    else any contiguous slice of it `width` long."""
    if len(turn) <= width:
        return turn in composed
    return any(turn[start : start + width] in composed for start in range(len(turn) - width + 1))


_JSON_ESCAPE = re.compile(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})')
_UNESCAPED = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def unescaped(text: str) -> str:
    """A block's text with JSON's string escapes read back (passages are JSON lines, and the first
    may be cut mid-line, so the lines are not parsed): a turn's newlines and quotes then match."""
    return _JSON_ESCAPE.sub(lambda m: _UNESCAPED.get(m[1]) or chr(int(m[1][1:], 16)), text)


def split_halves(questions: Iterable[tuple[str, str]]) -> dict[str, str]:
    """question id -> "tune" or "test": within each type, ordered by a hash of the id, the first
    half (rounded down) is the tune half. The same ids always split the same way."""
    by_type: dict[str, list[str]] = {}
    for question_id, question_type in questions:
        by_type.setdefault(question_type, []).append(question_id)
    halves = {}
    for ids in by_type.values():
        ordered = sorted(ids, key=lambda question_id: hashlib.sha256(question_id.encode()).hexdigest())
        for position, question_id in enumerate(ordered):
            halves[question_id] = "tune" if position < len(ordered) // 2 else "test"
    return halves


def parse_date(raw: str) -> datetime:
    """'2023/05/28 (Sun) 19:47' -> an aware datetime; LongMemEval gives no timezone: UTC."""
    return datetime.strptime(raw, "%Y/%m/%d (%a) %H:%M").replace(tzinfo=UTC)


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


# --- the data ---------------------------------------------------------------------------------------


@dataclass
class Question:
    question_id: str
    question_type: str
    question: str
    date: datetime
    sessions: list[tuple[str, datetime, list[dict[str, Any]]]]  # (id, date, turns), as the haystack lists them
    answer_sessions: set[str]
    half: str = ""

    @property
    def evidence(self) -> set[TurnName]:
        return {
            (session, index)
            for session, _, turns in self.sessions
            for index, turn in enumerate(turns)
            if turn.get("has_answer")
        }


def dataset_path() -> Path | None:
    """The sample at $MNEMO_LONGMEMEVAL (the file or its folder), else in shared/data/longmemeval
    beside the repository or its worktree folder."""
    root = Path(__file__).resolve().parent.parent
    places = []
    if os.environ.get("MNEMO_LONGMEMEVAL"):
        given = Path(os.environ["MNEMO_LONGMEMEVAL"])
        places += [given, given / FILE]
    places += [place / "shared" / "data" / "longmemeval" / FILE for place in (root.parent, root.parent.parent)]
    return next((place for place in places if place.is_file()), None)


def load_questions(path: Path) -> list[Question]:
    questions = []
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            raw = json.loads(line)
            sessions = [
                (session, parse_date(date), turns)
                for session, date, turns in zip(
                    raw["haystack_session_ids"], raw["haystack_dates"], raw["haystack_sessions"], strict=True
                )
            ]
            questions.append(
                Question(
                    raw["question_id"],
                    raw["question_type"],
                    raw["question"],
                    parse_date(raw["question_date"]),
                    sessions,
                    set(raw["answer_session_ids"]),
                )
            )
    halves = split_halves((q.question_id, q.question_type) for q in questions)
    for question in questions:
        question.half = halves[question.question_id]
    return questions


# --- importing through the API --------------------------------------------------------------------


@dataclass
class Refused:
    name: TurnName
    reason: str  # "empty", or the import's error code
    evidence: bool
    chars: int


@dataclass
class Loaded:
    question: Question
    agent: Any
    person: Any
    client: Any
    headers: dict[str, str]
    turns: dict[int, TurnName] = field(default_factory=dict)  # message id -> its turn
    refused: list[Refused] = field(default_factory=list)
    requests: int = 0


PERSON = "user"
_REFUSED_FIELD = re.compile(r"^\[(\d+)\]\.messages\[(\d+)\]")


def import_lines(
    question: Question, shift: timedelta = timedelta(0)
) -> tuple[list[dict[str, Any]], list[list[TurnName]], list[Refused]]:
    """The haystack as history-import lines, one conversation per session at its date (a second a
    turn) moved by `shift`, the turns named by their place in their session; empty turns left out
    (and listed). A session id a haystack holds twice is imported twice, as two conversations."""
    lines: list[dict[str, Any]] = []
    names: list[list[TurnName]] = []
    refused: list[Refused] = []
    seen: Counter[str] = Counter()
    for position, (session, said, turns) in enumerate(question.sessions):
        date = said + shift
        seen[session] += 1
        messages, named = [], []
        for index, turn in enumerate(turns):
            if not turn["content"].strip():
                refused.append(Refused((session, index), "empty", bool(turn.get("has_answer")), len(turn["content"])))
                continue
            messages.append(
                {
                    "role": turn["role"],
                    "content": turn["content"],
                    "created_at": (date + timedelta(seconds=index)).isoformat(),
                    "external_id": f"{position}:{index}",
                }
            )
            named.append((session, index))
        if messages:
            external_id = session if seen[session] == 1 else f"{session}#{seen[session]}"
            lines.append(
                {"person": PERSON, "external_id": external_id, "started_at": date.isoformat(), "messages": messages}
            )
            names.append(named)
    return lines, names, refused


def bodies(lines: list[dict[str, Any]], limit: int) -> list[list[int]]:
    """The lines' indexes grouped into request bodies of at most `limit` bytes of JSON each."""
    groups: list[list[int]] = [[]]
    size = 2
    for index, line in enumerate(lines):
        length = len(json.dumps(line, ensure_ascii=False).encode()) + 1
        if groups[-1] and size + length > limit:
            groups.append([])
            size = 2
        groups[-1].append(index)
        size += length
    return groups


def load_question(slug: str, question: Question, shift: timedelta | None = None) -> Loaded:
    from django.conf import settings
    from django.test import Client

    from accounts.services import create_agent, create_team, get_or_create_person, issue_api_key
    from conversations.models import Message

    team = create_team(slug=slug)
    agent = create_agent(team=team, slug="assistant", name="Mnemo")
    person = get_or_create_person(team=team, external_id=PERSON)
    loaded = Loaded(
        question,
        agent,
        person,
        Client(),
        {"Authorization": f"Bearer {issue_api_key(agent=agent).plaintext}"},
    )
    # Every date moved so that the question is asked now: a turn is composed at the present, and the
    # question's "last Friday" or "two weeks ago" then means what it meant on the question's date.
    shift = datetime.now(UTC) - question.date if shift is None else shift
    lines, names, loaded.refused = import_lines(question, shift=shift)
    for group in bodies(lines, settings.API_MAX_BODY_BYTES - 4096):
        body = [lines[i] for i in group]
        while body:
            response = loaded.client.post(
                "/api/v1/conversations/import",
                data=json.dumps(body, ensure_ascii=False),
                content_type="application/json",
                headers=loaded.headers,
            )
            loaded.requests += 1
            if response.status_code == 201:
                break
            # The import refuses the whole body for one turn it cannot take (too long, or a
            # character it refuses): that turn is left out, listed, and the body sent again.
            error = response.json()["error"]
            where = _REFUSED_FIELD.match(error.get("field") or "")
            if response.status_code not in (400, 422) or where is None:
                raise AssertionError(f"the import answered {response.status_code}: {error}")
            line, index = int(where[1]), int(where[2])
            messages = body[line]["messages"]
            session_index = names[group[line]].pop(index)
            turn = question.sessions[int(messages[index]["external_id"].split(":")[0])][2][session_index[1]]
            loaded.refused.append(
                Refused(
                    session_index,
                    f"{error['code']} ({response.status_code}: {error['message'].split(': ', 1)[-1].split(' at position')[0][:60]})",
                    bool(turn.get("has_answer")),
                    len(turn["content"]),
                )
            )
            del messages[index]
            if not messages:
                del body[line]
                del group[line]
    by_id = dict(Message.objects.filter(team=team).values_list("external_id", "pk"))
    for line_names, imported in zip(names, lines, strict=True):
        for name, message in zip(line_names, imported["messages"], strict=True):
            if message["external_id"] in by_id:
                loaded.turns[by_id[message["external_id"]]] = name
    return loaded


# --- asking ---------------------------------------------------------------------------------------


def _tokens() -> Any:
    from memory.text import tokens

    return tokens


def _unstemmed() -> Any:
    from memory.text import STOP_WORDS, words

    return lambda text: [word for word in words(text) if word not in STOP_WORDS]


def _stop_words_kept() -> Any:
    from memory.text import stem, words

    return lambda text: [stem(word) for word in words(text)]


# memory.text.tokens (stop words out, stemmed), and each of its two steps left out.
TOKENISERS = {"tokens": _tokens, "unstemmed": _unstemmed, "stop words kept": _stop_words_kept}


class Bm25:
    """BM25 over one haystack's turns, tokenised with memory.text.tokens. Okapi as rank_bm25 has
    it, or a variant for the diagnosis: no length normalisation (b=0), a term counted once per
    turn (binary), and the words half's IDF (ln(1 + (N - n + 0.5) / (n + 0.5)))."""

    def __init__(
        self,
        texts: list[str],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        binary: bool = False,
        okapi_idf: bool = True,
        tokeniser: str = "tokens",
    ) -> None:
        self._tokens = TOKENISERS[tokeniser]()
        tokens = self._tokens
        documents = [tokens(text) for text in texts]
        self.k1, self.b, self.binary = k1, b, binary
        self.lengths = np.array([len(doc) for doc in documents], dtype=np.float64)
        self.average = float(self.lengths.mean()) if len(documents) else 0.0
        self.frequencies = [Counter(doc) for doc in documents]
        held = Counter(term for doc in documents for term in set(doc))
        n = len(documents)
        if okapi_idf:  # rank_bm25.BM25Okapi's: negative IDFs raised to a quarter of the mean
            idf = {term: math.log(n - count + 0.5) - math.log(count + 0.5) for term, count in held.items()}
            floor = 0.25 * sum(idf.values()) / max(1, len(idf))
            self.idf = {term: value if value >= 0 else floor for term, value in idf.items()}
        else:
            self.idf = {term: math.log(1 + (n - count + 0.5) / (count + 0.5)) for term, count in held.items()}

    def scores(self, query: str) -> np.ndarray:
        scores = np.zeros(len(self.frequencies))
        norms = self.k1 * (1 - self.b + self.b * self.lengths / max(self.average, 1e-9))
        for term in set(self._tokens(query)):
            if term not in self.idf:
                continue
            tf = np.array(
                [min(1, f.get(term, 0)) if self.binary else f.get(term, 0) for f in self.frequencies], dtype=np.float64
            )
            scores += self.idf[term] * tf * (self.k1 + 1) / (tf + norms)
        return scores


def top_matching(scores: np.ndarray, matching: list[bool], limit: int) -> list[int]:
    """The best `limit` indexes among the matching ones (a turn sharing no term is not a result)."""
    order = np.argsort(-scores, kind="stable")
    return [int(i) for i in order if matching[i]][:limit]


@dataclass
class Asked:
    question: Question
    ranked: dict[str, list[TurnName]]  # per retriever, best first
    lengths: dict[str, list[int]]  # per retriever, the results' characters
    roles: dict[str, list[str]]
    seconds: dict[str, float]
    turn_seconds: float = 0.0
    composed_chars: int = 0
    shown_share: float | None = None
    passages: int = 0
    passages_cut: bool = False
    first_passage_agent: bool = False
    passage_chars: int = 0
    # What a passages layer of other bounds would have shown (same ranking, same line format).
    what_if: dict[str, float | None] = field(default_factory=dict)


DIAGNOSIS_BM25: dict[str, dict[str, Any]] = {
    "BM25, words not stemmed": {"tokeniser": "unstemmed"},
    "BM25, stop words kept": {"tokeniser": "stop words kept"},
    "BM25, no length normalisation (b=0)": {"b": 0.0},
    "BM25, a term once per turn (binary tf)": {"binary": True},
    "BM25, binary tf and b=0, the words half's IDF (the words half's formula)": {
        "b": 0.0,
        "binary": True,
        "okapi_idf": False,
    },
    "BM25, binary tf, the words half's IDF, with length normalisation (b=0.75)": {"binary": True, "okapi_idf": False},
}
WHAT_IF = {
    "4 passages, 2,000 characters (the default)": (4, 2_000),
    "4 passages, 8,000 characters": (4, 8_000),
    "10 passages, 8,000 characters": (10, 8_000),
}


def ask(loaded: Loaded) -> Asked:
    from dataclasses import replace

    from rank_bm25 import BM25Okapi

    from conversations import budget
    from conversations.composer import _passage_line
    from conversations.models import Message
    from conversations.queries import DEFAULT_RANKING, RANKING_CHANGES, rank_messages
    from memory.framing import PASSAGES_HEADER
    from memory.text import tokens
    from memory.vectors import forget_query_vectors

    question = loaded.question
    rows = {
        pk: (content, role)
        for pk, content, role in Message.objects.filter(pk__in=list(loaded.turns)).values_list("pk", "content", "role")
    }
    ids = sorted(loaded.turns)
    texts = [rows[pk][0] for pk in ids]
    documents = [tokens(text) for text in texts]
    vocabulary = [set(doc) for doc in documents]
    okapi = BM25Okapi(documents)
    variants = {name: Bm25(texts, **options) for name, options in DIAGNOSIS_BM25.items()}

    def in_process(scores_of: Any, tokenise: Any = tokens, vocabulary: list[set[str]] = vocabulary) -> Any:
        def search(query: str) -> list[int]:
            wanted = set(tokenise(query))
            if not wanted:
                return []
            return [ids[i] for i in top_matching(scores_of(query), [bool(wanted & v) for v in vocabulary], LIMIT)]

        return search

    def through(ranking: Any) -> Any:
        def search(query: str) -> list[int]:
            hits = rank_messages(agent=loaded.agent, person=loaded.person, query=query, limit=LIMIT, ranking=ranking)
            return [hit.message.pk for hit in hits.hits]

        return search

    searchers = {
        BM25: in_process(lambda query: okapi.get_scores(tokens(query))),
        WORDS: through(replace(DEFAULT_RANKING, meaning=False)),
        VECTORS: through(replace(DEFAULT_RANKING, words=False)),
        PRODUCT: through(DEFAULT_RANKING),
    }
    searchers |= {f"{PRODUCT} without {change}": through(ranking) for change, ranking in RANKING_CHANGES.items()}
    searchers |= {
        name: in_process(variant.scores, variant._tokens, [set(variant._tokens(text)) for text in texts])
        for name, variant in variants.items()
    }
    # Untimed: this process reads the pair (its words and vectors) at its first search.
    rank_messages(agent=loaded.agent, person=loaded.person, query=question.question, limit=LIMIT)
    asked = Asked(question, {}, {}, {}, {})
    for name, search in searchers.items():
        forget_query_vectors()  # each search embeds its question, as search_conversation's does
        start = time.perf_counter()
        found = search(question.question)
        asked.seconds[name] = time.perf_counter() - start
        asked.ranked[name] = [loaded.turns[pk] for pk in found]
        asked.lengths[name] = [len(rows[pk][0]) for pk in found]
        asked.roles[name] = [rows[pk][1] for pk in found]

    # The passages other bounds would show, from the product's ranking, laid out as the composer does.
    forget_query_vectors()
    hits = rank_messages(agent=loaded.agent, person=loaded.person, query=question.question, limit=14).hits
    evidence = question.evidence
    for label, (most, chars) in WHAT_IF.items():
        share = (chars - len(PASSAGES_HEADER)) // most - 1
        lines = [_passage_line(hit.message, question.question, share) for hit in hits]
        plan = budget.plan_passages(len(PASSAGES_HEADER), [len(line) for line in lines], chars, most)
        text = "\n".join([PASSAGES_HEADER, *lines[: plan.count]])
        if plan.first_cut_to is not None:
            text = budget.cut(text, len(PASSAGES_HEADER) + 1 + plan.first_cut_to)
        asked.what_if[label] = evidence_shown(loaded, rows, evidence, unescaped(text))

    compose_turn(loaded, asked, rows)
    return asked


def evidence_shown(
    loaded: Loaded, rows: dict[int, tuple[str, str]], evidence: set[TurnName], composed: str
) -> float | None:
    """The share of the evidence turns the composed text shows (an evidence turn that could not be
    imported counts as not shown)."""
    if not evidence:
        return None
    texts = {name: rows[pk][0] for pk, name in loaded.turns.items() if name in evidence}
    return sum(name in texts and shown(texts[name], composed) for name in evidence) / len(evidence)


def compose_turn(loaded: Loaded, asked: Asked, rows: dict[int, tuple[str, str]]) -> None:
    """The question as the message of a turn in a new conversation, through the API."""
    from memory.vectors import forget_query_vectors

    created = loaded.client.post(
        "/api/v1/conversations", data={"person": PERSON}, content_type="application/json", headers=loaded.headers
    )
    assert created.status_code == 201, created.content
    forget_query_vectors()
    start = time.perf_counter()
    response = loaded.client.post(
        "/api/v1/turns",
        data={"person": PERSON, "message": asked.question.question, "conversation": created.json()["id"]},
        content_type="application/json",
        headers=loaded.headers,
    )
    asked.turn_seconds = time.perf_counter() - start
    assert response.status_code == 201, response.content
    body = response.json()
    asked.composed_chars = sum(block["chars"] for block in body["blocks"])
    composed = "\n".join(
        [unescaped(block["text"]) for block in body["blocks"]] + [str(m.get("content", "")) for m in body["messages"]]
    )
    asked.shown_share = evidence_shown(loaded, rows, asked.question.evidence, composed)
    for block in body["blocks"]:
        if block["layer"] == "passages":
            asked.passages = sum(line.startswith("{") for line in block["text"].split("\n"))
            first = block["text"].split("\n{", 1)[-1]
            asked.first_passage_agent = '"who": "agent"' in first[:80]
            asked.passages_cut = "cut" in block["flags"]
            asked.passage_chars = block["chars"]


# --- reporting ------------------------------------------------------------------------------------


def mean(values: Iterable[float | None]) -> float:
    kept = [value for value in values if value is not None]
    return 100 * sum(kept) / len(kept) if kept else math.nan


def quality(rows: list[Asked], name: str) -> dict[str, float]:
    return {
        "turn recall@10": mean(turn_recall(r.ranked[name], r.question.evidence, 10) for r in rows),
        "turn hit@10": mean(turn_hit(r.ranked[name], r.question.evidence, 10) for r in rows),
        "session recall@5": mean(session_recall(r.ranked[name], r.question.answer_sessions, 5) for r in rows),
        "session recall@10": mean(session_recall(r.ranked[name], r.question.answer_sessions, 10) for r in rows),
    }


def groups(rows: list[Asked]) -> list[tuple[str, list[Asked]]]:
    by_type = [(kind, [r for r in rows if r.question.question_type == kind]) for kind in TYPES]
    return [(kind, picked) for kind, picked in by_type if picked] + [("all", rows)]


def print_half(title: str, rows: list[Asked]) -> None:
    print(f"\n### {title}: {PRODUCT} and the composed turn, by question type\n")
    columns = ["n", "turn recall@10", "turn hit@10", "session recall@5", "session recall@10"]
    extra = ["evidence in the turn", "composed chars (mean)", "search p50 / p95 ms"]
    others = [f"{name} turn recall@10" for name in (BM25, VECTORS, WORDS)]
    print("| question type | " + " | ".join(columns + extra + others) + " |")
    print("| --- | " + " | ".join("---:" for _ in columns + extra + others) + " |")
    for kind, picked in groups(rows):
        scores = quality(picked, PRODUCT)
        latency = [r.seconds[PRODUCT] * 1000 for r in picked]
        cells = [f"{len(picked)}"] + [f"{scores[c]:.1f}" for c in columns[1:]]
        cells += [
            f"{mean(r.shown_share for r in picked):.1f}",
            f"{statistics.mean(r.composed_chars for r in picked):,.0f}",
            f"{statistics.median(latency):.1f} / {percentile(latency, 0.95):.1f}",
        ]
        cells += [f"{quality(picked, name)['turn recall@10']:.1f}" for name in (BM25, VECTORS, WORDS)]
        print(f"| {kind} | " + " | ".join(cells) + " |")

    print(f"\n### {title}: ablation, one change of {PRODUCT} off at a time (turn recall@10)\n")
    ablated = [name for name in rows[0].ranked if name.startswith(f"{PRODUCT} without ")] if rows else []
    kinds = groups(rows)
    print("| retriever | " + " | ".join(kind for kind, _ in kinds) + " | session recall@5, all |")
    print("| --- | " + " | ".join("---:" for _ in kinds) + " | ---: |")
    for name in [PRODUCT, *ablated]:
        cells = [f"{quality(picked, name)['turn recall@10']:.1f}" for _, picked in kinds]
        print(f"| {name} | " + " | ".join(cells) + f" | {quality(rows, name)['session recall@5']:.1f} |")

    print(f"\n### {title}: every retriever, all questions\n")
    print(
        "| retriever | turn recall@10 | turn hit@10 | session recall@5 | session recall@10 | vs BM25 turn recall@10 |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    baseline = quality(rows, BM25)["turn recall@10"]
    for name in [BM25, WORDS, VECTORS, PRODUCT]:
        scores = quality(rows, name)
        delta = "—" if name == BM25 else f"{scores['turn recall@10'] - baseline:+.1f}"
        print(f"| {name} | " + " | ".join(f"{scores[c]:.1f}" for c in columns[1:]) + f" | {delta} |")
    latencies = {name: Result(name, [r.seconds[name] for r in rows]) for name in (BM25, WORDS, VECTORS, PRODUCT)}
    turns = Result("POST /api/v1/turns (the question composed in a new conversation)", [r.turn_seconds for r in rows])
    table: list[tuple[Result, Result | None]] = [(latencies[BM25], None)]
    table += [(latencies[name], latencies[BM25]) for name in (WORDS, VECTORS, PRODUCT)]
    table.append((turns, latencies[BM25]))
    print_table(f"{title}: search latency in process (top {LIMIT}; BM25 over an index prebuilt per haystack)", table)


def print_diagnosis(rows: list[Asked], languages: dict[str, Counter[str]]) -> None:
    """Why the words half ranks below BM25, and why the turn shows little of the evidence."""
    print("\n### Diagnosis (both halves): the words half against BM25 and its variants\n")
    print(
        "| retriever | turn recall@10 | turn hit@10 | session recall@10 | results' chars, median | "
        "results from the assistant | evidence turns' median rank (found ones) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in [BM25, *DIAGNOSIS_BM25, WORDS, VECTORS, PRODUCT]:
        scores = quality(rows, name)
        lengths = [length for r in rows for length in r.lengths[name]]
        roles = [role for r in rows for role in r.roles[name]]
        ranks = [r.ranked[name].index(turn) + 1 for r in rows for turn in r.question.evidence if turn in r.ranked[name]]
        print(
            f"| {name} | {scores['turn recall@10']:.1f} | {scores['turn hit@10']:.1f} | "
            f"{scores['session recall@10']:.1f} | {statistics.median(lengths) if lengths else 0:,.0f} | "
            f"{100 * roles.count('assistant') / max(1, len(roles)):.1f}% | "
            f"{statistics.median(ranks) if ranks else math.nan:.1f} |"
        )
    evidence_lengths = [
        len(turn["content"])
        for r in rows
        for _, _, turns in r.question.sessions
        for turn in turns
        if turn.get("has_answer")
    ]
    all_lengths = [len(turn["content"]) for r in rows for _, _, turns in r.question.sessions for turn in turns]
    print(
        f"\nTurns' characters, median: evidence turns {statistics.median(evidence_lengths):,.0f}, "
        f"every turn {statistics.median(all_lengths):,.0f}."
    )
    print(
        "Text-search configurations the words are read with (memory.language): "
        + "; ".join(
            f"{what}: " + ", ".join(f"{config} {n:,}" for config, n in counts.most_common())
            for what, counts in languages.items()
        )
        + "."
    )

    print("\n### Diagnosis (both halves): what the composed turn's passages hold\n")
    shown = [r for r in rows if r.shown_share is not None]
    hit4 = mean(turn_hit(r.ranked[PRODUCT], r.question.evidence, 4) for r in rows)
    recall4 = mean(turn_recall(r.ranked[PRODUCT], r.question.evidence, 4) for r in rows)
    passages = Counter(r.passages for r in rows)
    print(
        f"{PRODUCT}'s top 4 (what at most 4 passages could show): turn recall@4 {recall4:.1f}, hit@4 {hit4:.1f}. "
        f"Passages shown per turn: {', '.join(f'{count} in {n}' for count, n in sorted(passages.items()))} "
        f"(of {len(rows)} turns); the first passage cut to fit in {sum(r.passages_cut for r in rows)}, "
        f"the agent's in {sum(r.first_passage_agent for r in rows)}; "
        f"passages' characters, median {statistics.median(r.passage_chars for r in rows):,.0f}. "
        f"Evidence in the turn: {mean(r.shown_share for r in shown):.1f}."
    )
    print("\n| passages layer (same ranking, same lines) | evidence shown |")
    print("| --- | ---: |")
    for label in WHAT_IF:
        print(f"| {label} | {mean(r.what_if[label] for r in rows):.1f} |")


def run(scratch_team_slug: str) -> None:
    dataset = dataset_path()
    if dataset is None:
        print(
            f"\nLongMemEval: skipped, {FILE} (the LongMemEval_S dev sample) was not found: set MNEMO_LONGMEMEVAL "
            "to the file or the folder that has it."
        )
        return
    half = os.environ.get("LONGMEMEVAL_HALF", "all")
    if half not in (*HALVES, "all"):
        raise SystemExit(f"LONGMEMEVAL_HALF={half!r}: choose tune, test or all.")
    from django.conf import settings

    from bench.harness import use_embedder
    from conversations.indexing import MESSAGES
    from conversations.models import Message

    started = time.perf_counter()
    everything = load_questions(dataset)
    wanted = HALVES if half == "all" else (half,)
    most = int(os.environ.get("LONGMEMEVAL_QUESTIONS", "0")) or None
    questions = [q for h in wanted for q in [q for q in everything if q.half == h][:most]]

    # Imported with no embedder (nothing queued per body), then embedded in one pass.
    settings.EMBEDDER = "none"
    load_start = time.perf_counter()
    loaded = [
        load_question(f"{scratch_team_slug}-{index}", question)
        for index, question in enumerate(tqdm(questions, desc="import haystacks (API)", unit="question", leave=False))
    ]
    load_elapsed = time.perf_counter() - load_start
    embedder_name = use_embedder()
    messages = Message.objects.filter(team__in=[item.agent.team_id for item in loaded])
    count = messages.count()
    embed_start, cpu = time.perf_counter(), time.process_time()
    with tqdm(total=count, desc="embed messages", unit="msg", leave=False) as bar:
        report = MESSAGES.reconcile(rows=messages, batch_size=256, progress=bar.update)
    embed_elapsed, cpu = time.perf_counter() - embed_start, time.process_time() - cpu
    assert not MESSAGES.stale(rows=messages).exists(), report
    from memory.language import text_search_config

    evidence_ids = [pk for item in loaded for pk, name in item.turns.items() if name in item.question.evidence]
    languages = {
        "every turn": Counter(messages.values_list("language", flat=True)),
        "evidence turns": Counter(Message.objects.filter(pk__in=evidence_ids).values_list("language", flat=True)),
        "questions": Counter(text_search_config(q.question) for q in questions),
    }
    with_vectors = time.perf_counter()
    asked = [ask(item) for item in tqdm(loaded, desc="questions", unit="question", leave=False)]
    asked_elapsed = time.perf_counter() - with_vectors

    refused = [r for item in loaded for r in item.refused]
    reasons = Counter(r.reason for r in refused)
    print(
        f"\nLongMemEval_S dev sample: {len(questions)} questions ({', '.join(wanted)} half), each its own team; "
        f"{sum(len(q.sessions) for q in questions):,} sessions, {count:,} turns imported through "
        f"POST /api/v1/conversations/import ({sum(i.requests for i in loaded)} requests) with their sessions' "
        f"dates in {load_elapsed:.1f} s. Not imported: {len(refused)} turns "
        f"({', '.join(f'{n} {reason}' for reason, n in sorted(reasons.items())) or 'none'}; "
        f"{sum(r.evidence for r in refused)} of them evidence; the longest {max((r.chars for r in refused), default=0):,} "
        f"characters), their evidence counted as not found."
    )
    print(
        f"Embedded {report.indexed:,} messages with EMBEDDER={embedder_name} in {embed_elapsed:.0f} s "
        f"({report.indexed / max(embed_elapsed, 1e-9):.0f} messages/s, {cpu:.0f} s of this process's CPU); "
        f"questions asked and turns composed in {asked_elapsed:.0f} s. VECTOR_FLOOR {settings.VECTOR_FLOOR}, "
        f"VECTOR_STRONG {settings.VECTOR_STRONG}. Top {LIMIT} per search; halves split by type on a hash of "
        "the question id (the tune half at most half of each type)."
    )
    for name in wanted:
        rows = [r for r in asked if r.question.half == name]
        label = "test half (untouched while tuning)" if name == "test" else "tune half"
        print_half(f"LongMemEval {label}", rows)
    print_diagnosis(asked, languages)
    print(f"\nLongMemEval benchmark: {time.perf_counter() - started:.0f} s")
