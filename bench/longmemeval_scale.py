"""LongMemEval at scale: every dev question asked inside one person's history of about 100,000
messages (over 10M tokens), against the same questions asked of their own haystacks alone.

Two crowded people, each a team of one agent and one person. The first's history is every distinct
session of every dev question's haystack, once (about 2,800 sessions, 29,000 turns, 7M tokens),
each at its own date: each question's evidence among every other question's sessions, which are
other users' lives (LongMemEval builds each haystack around one simulated user). The second's is
the same and then copies of the sessions that are no question's evidence, each copy a year earlier
than the one before, until it has about LONGMEMEVAL_SCALE_MESSAGES messages (100,000 by default;
LONGMEMEVAL_QUESTIONS=n keeps the first n questions, for a quick look): years of older talk,
repeated word for word. A session that is some question's evidence is dated as that question's
haystack dates it. Imported through `POST /api/v1/conversations/import`; each distinct text
embedded once, its vector stored for every message that says it. Each question is asked through
`rank_messages` at its own date (its relative dates read against it), top 10, scored by turn
(recall@10) and session (recall@5).

Alone: each question in a team of its own with its own haystack, as bench.longmemeval imports it.

Latency: each question's search in each crowded person, through the pair this process keeps
(conversations/kept_pairs.py, read before the timed searches), then through the database alone
(SEARCH_KEPT_MESSAGES=0: the words by the GIN index, the meaning by the HNSW index), in process.
Beside each path: how many results repeat an earlier result's text word for word, and how many
come from another question's evidence sessions (another user's life).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from tqdm import tqdm

from bench.longmemeval import (
    FILE,
    LIMIT,
    TYPES,
    Loaded,
    Question,
    TurnName,
    dataset_path,
    load_question,
    load_questions,
    mean,
    percentile,
    session_recall,
    turn_recall,
)

TARGET = int(os.environ.get("LONGMEMEVAL_SCALE_MESSAGES", "100000"))
YEAR = timedelta(days=365)


def crowded(questions: list[Question], target: int) -> Question:
    """One history holding every question's haystack, each session once; then, up to about
    `target` turns, copies of the sessions no question needs, a year earlier each time (see the
    module's doc)."""
    dated_by_evidence = {
        session: said
        for question in questions
        for session, said, _ in question.sessions
        if session in question.answer_sessions
    }
    sessions: dict[str, tuple[str, Any, list[dict[str, Any]]]] = {}
    for question in questions:
        for session, said, session_turns in question.sessions:
            if session not in sessions:
                sessions[session] = (session, dated_by_evidence.get(session, said), session_turns)
    needed = {session for question in questions for session in question.answer_sessions}
    history = list(sessions.values())
    fillers = [entry for entry in history if entry[0] not in needed]
    count = sum(len(entry[2]) for entry in history)
    copy = 0
    while count < target and fillers:
        copy += 1
        for session, said, session_turns in fillers:
            if count >= target:
                break
            history.append((f"{session}~{copy}", said - copy * YEAR, session_turns))
            count += len(session_turns)
    history.sort(key=lambda entry: entry[1])
    latest = max(question.date for question in questions)
    return Question(f"crowded to {target}", "all", "", latest, history, needed)


@dataclass
class Asking:
    """One way of asking every question: a pair, at each question's moved date or the present."""

    name: str
    loaded: dict[str, Loaded]  # question id -> the pair it is asked of
    shift: timedelta | None  # None: asked now (each alone pair's dates were moved to its question)
    kept: bool = True  # False: the database answers (no pair kept)
    ranked: dict[str, list[TurnName]] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    repeated: list[int] = field(default_factory=list)  # per question: results saying what an earlier one said
    others: list[int] = field(default_factory=list)  # per question: results from another question's evidence


def run(scratch_team_slug: str) -> None:
    dataset = dataset_path()
    if dataset is None:
        print(
            f"\nLongMemEval at scale: skipped, {FILE} was not found: set MNEMO_LONGMEMEVAL to the file or its folder."
        )
        return
    from django.conf import settings
    from django.db import connection
    from django.utils import timezone

    from bench.harness import use_embedder
    from conversations import kept_pairs
    from conversations.indexing import MESSAGES
    from conversations.models import Message, MessageVector
    from conversations.queries import rank_messages
    from memory.vectors import forget_query_vectors

    started = time.perf_counter()
    questions = load_questions(dataset)[: int(os.environ.get("LONGMEMEVAL_QUESTIONS", "0")) or None]
    distinct, full = crowded(questions, 0), crowded(questions, TARGET)
    settings.EMBEDDER = "none"  # imported without embedding, then embedded in one pass
    load_start = time.perf_counter()
    alone = [
        load_question(f"{scratch_team_slug}-alone-{index}", question)
        for index, question in enumerate(tqdm(questions, desc="import each haystack alone", unit="question"))
    ]
    # Every date moved so that the latest question is asked now; each question is asked at its own
    # date, moved alike.
    shift = timezone.now() - full.date
    print("Importing the two crowded people's histories (one line per session, through the API)...", flush=True)
    crowds = [load_question(f"{scratch_team_slug}-crowd-{i}", h, shift=shift) for i, h in enumerate((distinct, full))]
    load_elapsed = time.perf_counter() - load_start
    embedder_name = use_embedder()
    teams = [loaded.agent.team_id for loaded in [*alone, *crowds]]
    messages = Message.objects.filter(team__in=teams)
    embed_start = time.perf_counter()
    # Each distinct text embedded once (the haystacks share sessions, and the copies repeat them),
    # its vector then stored for every other message of these teams that says the same.
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT min(id) FROM {Message._meta.db_table} WHERE team_id = ANY(%s) GROUP BY content", [teams]
        )
        firsts = [pk for (pk,) in cursor.fetchall()]
    with tqdm(total=len(firsts), desc="embed each distinct text", unit="msg") as bar:
        report = MESSAGES.reconcile(rows=Message.objects.filter(pk__in=firsts), batch_size=256, progress=bar.update)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {MessageVector._meta.db_table} (team_id, message_id, namespace, model, dim, embedding, embedded_at)
            SELECT m.team_id, m.id, 'team:' || m.team_id, v.model, v.dim, v.embedding, now()  -- namespace_for
            FROM {Message._meta.db_table} m
            JOIN {Message._meta.db_table} first ON first.content = m.content AND first.id = ANY(%s)
            JOIN {MessageVector._meta.db_table} v ON v.message_id = first.id
            WHERE m.team_id = ANY(%s) AND m.id <> first.id
            """,
            [firsts, teams],
        )
        copied = cursor.rowcount
        cursor.execute(f"ANALYZE {MessageVector._meta.db_table}")
        cursor.execute(f"ANALYZE {Message._meta.db_table}")
    embed_elapsed = time.perf_counter() - embed_start
    assert not MESSAGES.stale(rows=messages).exists(), report
    sizes = []
    for crowd in crowds:
        rows = Message.objects.filter(team_id=crowd.agent.team_id)
        sizes.append((rows.count(), sum(len(text) for text in rows.values_list("content", flat=True).iterator())))
    evidence_of = {session: q.question_id for q in questions for session in q.answer_sessions}

    def ask(path: Asking, question: Question) -> None:
        loaded = path.loaded[question.question_id]
        forget_query_vectors()  # each search embeds its question, as search_conversation's does
        begun = time.perf_counter()
        hits = rank_messages(
            agent=loaded.agent, person=loaded.person, query=question.question, limit=LIMIT,
            now=None if path.shift is None else question.date + path.shift,
        ).hits  # fmt: skip
        path.seconds.append(time.perf_counter() - begun)
        path.ranked[question.question_id] = [loaded.turns[hit.message.pk] for hit in hits]
        said = [hit.message.content for hit in hits]
        path.repeated.append(sum(text in said[:place] for place, text in enumerate(said)))
        path.others.append(
            sum(
                evidence_of.get(loaded.turns[hit.message.pk][0], question.question_id) != question.question_id
                for hit in hits
            )
        )

    def keep(loaded: Loaded) -> float:
        """Ask until this process keeps the pair whole (a large one is read on a thread, the
        searches meanwhile in SQL); the seconds it took."""
        begun = time.perf_counter()
        while True:
            rank_messages(agent=loaded.agent, person=loaded.person, query=questions[0].question, limit=LIMIT)
            if kept_pairs.is_kept(loaded.agent, loaded.person):
                return time.perf_counter() - begun
            if time.perf_counter() - begun > 600:
                raise AssertionError("the crowded pair was not kept within 10 minutes")
            time.sleep(0.2)

    by_question = {q.question_id: loaded for q, loaded in zip(questions, alone, strict=True)}
    paths = [
        Asking("alone (each pair's first search reads it)", by_question, None),
        Asking(f"crowded, {sizes[0][0]:,} messages, kept pair", dict.fromkeys(by_question, crowds[0]), shift),
        Asking(f"crowded, {sizes[1][0]:,} messages, kept pair", dict.fromkeys(by_question, crowds[1]), shift),
        Asking(
            f"crowded, {sizes[0][0]:,} messages, database only", dict.fromkeys(by_question, crowds[0]), shift, False
        ),
        Asking(
            f"crowded, {sizes[1][0]:,} messages, database only", dict.fromkeys(by_question, crowds[1]), shift, False
        ),
    ]
    read_seconds = []
    for path in paths:
        if not path.kept:
            settings.SEARCH_KEPT_MESSAGES = 0  # no pair is kept: the database answers both halves
            kept_pairs.forget_kept_pairs()
        elif path.shift is not None:
            read_seconds.append(keep(next(iter(path.loaded.values()))))
        for question in tqdm(questions, desc=path.name, unit="question"):
            ask(path, question)

    print(
        f"\nLongMemEval_S dev sample, all {len(questions)} questions, each asked at its own date. Two crowded "
        f"people, each one team: {sizes[0][0]:,} messages ({sizes[0][1] / 1e6:.1f}M characters, about "
        f"{sizes[0][1] / 4e6:.1f}M tokens at 4 characters a token), every distinct session of every question's "
        f"haystack once; and {sizes[1][0]:,} messages ({sizes[1][1] / 1e6:.1f}M characters, about "
        f"{sizes[1][1] / 4e6:.1f}M tokens), the same and copies of the sessions no question needs, a year "
        f"earlier each. Alone: each question's own haystack, a team of its own. Imported through POST "
        f"/api/v1/conversations/import in {load_elapsed:.0f} s; {report.indexed:,} distinct texts embedded with "
        f"EMBEDDER={embedder_name} and their vectors stored for {copied:,} more messages saying the same, in "
        f"{embed_elapsed:.0f} s; the crowded pairs read into this process in "
        f"{', '.join(f'{seconds:.1f}' for seconds in read_seconds)} s. Top {LIMIT}, in process."
    )
    by_id = {question.question_id: question for question in questions}

    def figures(path: Asking, kinds: list[str]) -> dict[str, float]:
        picked = [by_id[qid] for qid in path.ranked if by_id[qid].question_type in kinds]
        return {
            "n": len(picked),
            "turn recall@10": mean(turn_recall(path.ranked[q.question_id], q.evidence, LIMIT) for q in picked),
            "session recall@5": mean(session_recall(path.ranked[q.question_id], q.answer_sessions, 5) for q in picked),
        }

    lone, small, large = paths[0], paths[1], paths[2]
    print(
        "\n### LongMemEval inside one crowded person, against each question alone (turn recall@10, session recall@5)\n"
    )
    print(
        f"| question type | n | alone | {small.name} | {large.name} | alone s@5 | {sizes[0][0]:,} s@5 | {sizes[1][0]:,} s@5 |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    present = Counter(question.question_type for question in questions)
    for label, kinds in [*[(kind, [kind]) for kind in TYPES if present[kind]], ("all", list(TYPES))]:
        row = [figures(path, kinds) for path in (lone, small, large)]
        print(
            f"| {label} | {row[0]['n']:.0f} | "
            + " | ".join(f"{r['turn recall@10']:.1f}" for r in row)
            + " | "
            + " | ".join(f"{r['session recall@5']:.1f}" for r in row)
            + " |"
        )
    print("\n### Search latency in process, and what the results hold (each question once per path)\n")
    print(
        "| path | turn recall@10 | session recall@5 | p50 ms | p95 ms | results repeating an earlier one's text | results from another question's evidence |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for path in paths:
        found = figures(path, list(TYPES))
        print(
            f"| {path.name} | {found['turn recall@10']:.1f} | {found['session recall@5']:.1f} | "
            f"{percentile(path.seconds, 0.5) * 1000:.1f} | {percentile(path.seconds, 0.95) * 1000:.1f} | "
            f"{sum(path.repeated) / (LIMIT * len(questions)):.1%} | {sum(path.others) / (LIMIT * len(questions)):.1%} |"
        )
    print(f"\nLongMemEval at scale: {time.perf_counter() - started:.0f} s")
