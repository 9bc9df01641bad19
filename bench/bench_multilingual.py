"""Multilingual conversation search: a small labelled set of our own (bench/data/multilingual.json).

One conversation per language (Russian, German), and questions that each ask about one message in
other word forms than the message uses ("собаке" for "собаку", "Romane" for "Roman"). Each
message is recorded through record_message, which reads its words in its own language
(memory.language), and embedded with the local model (or the one BENCH_EMBEDDER names:
`BENCH_EMBEDDER=e5`, multilingual-e5-small). Side by side in the same run:

- in-process BM25 over English tokens (memory.text.tokens: the English stop words and stemmer);
- words only, everything read as English: what the keyword half did before (the same messages
  and queries with the `english` configuration forced);
- words only, each text in its own language (the product's keyword half);
- vectors only (the local MiniLM model is English-only; e5 is multilingual), and the product's ranking.

Then note recall, on a second set of our own (bench/data/multilingual_notes.json): one person's
notes per language (Russian, German, and the same notes in English as the baseline), each written
through remember, which reads a note's language (memory.language.note_config), and questions
asking about one note each in other word forms. Each language has a bank of its own, and all three
share one more. Side by side in the same run, words only (recall_memories, mode bm25):

- every note read as English: what note recall did before (recall's tokens made to read every
  note and the query as English for the search);
- each note in its language, the query read in the query's own language (text_search_config of the
  query, as the conversation search reads it);
- each note in its language and the query read in each note's language (the product);

and vectors only, then recall_memories (hybrid) with every note read as English and as shipped.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from bench.harness import use_embedder

DATA = Path(__file__).resolve().parent / "data" / "multilingual.json"
NOTES_DATA = Path(__file__).resolve().parent / "data" / "multilingual_notes.json"
KS = (1, 3)


def _bm25(messages: list[tuple[int, str]]) -> Callable[[str], list[int]]:
    from rank_bm25 import BM25Okapi

    from memory.text import tokens

    documents = [tokens(text) for _, text in messages]
    index = BM25Okapi(documents)

    def search(query: str) -> list[int]:
        wanted = tokens(query)
        scores = index.get_scores(wanted)
        order = np.argsort(-scores, kind="stable")
        return [messages[i][0] for i in order if set(wanted) & set(documents[i])][:10]

    return search


def measure(
    slug: str, language: str, labelled: dict[str, Any], embedder: str
) -> list[tuple[str, str, dict[str, float]]]:
    from accounts.services import create_agent, create_team, get_or_create_person
    from conversations import queries
    from conversations.indexing import MESSAGES
    from conversations.models import Message
    from conversations.queries import DEFAULT_RANKING, rank_messages
    from conversations.services import record_message, start_conversation

    team = create_team(slug=f"{slug}-{language}")
    agent = create_agent(team=team, slug="helper", name="Helper")
    person = get_or_create_person(team=team, external_id="anna")
    conversation = start_conversation(team=team, agent=agent, person=person)
    recorded = [
        record_message(conversation=conversation, role=role, content=text) for role, text in labelled["messages"]
    ]
    pks = [m.pk for m in recorded]
    MESSAGES.index(pks)
    detected = Message.objects.filter(pk__in=pks, language=language).count()

    def ranked(ranking: Any) -> Callable[[str], list[int]]:
        def search(query: str) -> list[int]:
            found = rank_messages(agent=agent, person=person, query=query, limit=10, ranking=ranking)
            return [hit.message.pk for hit in found.hits]

        return search

    def as_english(query: str) -> list[int]:
        # Before: every text read as English. Forced on this scratch team's rows, then put back.
        languages = dict(Message.objects.filter(pk__in=pks).values_list("pk", "language"))
        Message.objects.filter(pk__in=pks).update(language="english")
        try:
            with mock.patch.object(queries, "text_search_config", return_value="english"):
                return ranked(replace(DEFAULT_RANKING, meaning=False))(query)
        finally:
            for pk, original in languages.items():
                Message.objects.filter(pk=pk).update(language=original)

    retrievers: dict[str, Callable[[str], list[int]]] = {
        "BM25Okapi, English tokens (in process)": _bm25([(m.pk, m.content) for m in recorded]),
        "words only, everything read as English (before)": as_english,
        "words only, each text in its language": ranked(replace(DEFAULT_RANKING, meaning=False)),
        f"vectors only ({embedder})": ranked(replace(DEFAULT_RANKING, words=False)),
        "rank_messages": ranked(DEFAULT_RANKING),
    }
    questions = labelled["questions"]
    label = f"{language} ({len(questions)} questions; {detected}/{len(recorded)} messages read as {language})"
    return [
        (label, name, _hit_rates([pks[i] for _, i in questions], [search(q) for q, _ in questions]))
        for name, search in retrievers.items()
    ]


def _hit_rates(answers: list[Any], found: list[list[Any]]) -> dict[str, float]:
    """hit@k for each k in KS: the share of questions whose answer is among the first k found."""
    return {
        f"hit@{k}": 100 * sum(answer in hits[:k] for answer, hits in zip(answers, found, strict=True)) / len(answers)
        for k in KS
    }


type NoteRows = list[tuple[str, str, dict[str, float]]]


def measure_notes(slug: str, label: str, notes: list[list[str]], questions: list[list[str]]) -> NoteRows:
    from accounts.services import create_agent, create_team, get_or_create_person
    from memory import kept_banks, recall
    from memory.indexing import NOTES
    from memory.kept_banks import TERMS
    from memory.language import ENGLISH, text_search_config
    from memory.models import Bank, Note
    from memory.recall import recall_memories
    from memory.services import Actor, remember
    from memory.text import tokens

    team = create_team(slug=f"{slug}-notes-{label.split()[0]}")
    agent = create_agent(team=team, slug="helper", name="Helper")
    person = get_or_create_person(team=team, external_id="anna")
    actor = Actor.for_agent(agent)
    written = [
        remember(
            team=team, person=person, actor=actor, key=key, description=description, content=content,
            bank=Bank.Kind.GLOBAL,
        ).note
        for key, description, content in notes
    ]  # fmt: skip
    pks = [note.pk for note in written if note is not None]
    NOTES.index(pks)
    read_as = Counter(Note.objects.filter(pk__in=pks).values_list("language", flat=True))

    def ranked(mode: Any) -> Callable[[str], list[str]]:
        def search(query: str) -> list[str]:
            found = recall_memories(team=team, person=person, agent=agent, query=query, limit=10, mode=mode)
            return [hit.note.key for hit in found.hits]

        return search

    def read_with(read: Callable[..., list[str]], search: Callable[[str], list[str]], query: str) -> list[str]:
        # Recall's tokens replaced for one search; the words it kept meanwhile (by text, and with
        # each bank) are dropped after.
        with mock.patch.object(recall, "tokens", read), mock.patch.object(kept_banks, "tokens", read):
            TERMS.clear()
            kept_banks.forget_kept()
            try:
                return search(query)
            finally:
                TERMS.clear()
                kept_banks.forget_kept()

    def as_english(search: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
        # Before: every note, and the query, read as English.
        return lambda query: read_with(lambda text, language=ENGLISH: tokens(text), search, query)

    def query_in_its_language(query: str) -> list[str]:
        # An ablation: the query read once, in its own language, against every note.
        def read(text: str, language: str = ENGLISH) -> list[str]:
            return tokens(text, text_search_config(text) if text == query else language)

        return read_with(read, ranked("bm25"), query)

    retrievers: dict[str, Callable[[str], list[str]]] = {
        "words only, every note read as English (before)": as_english(ranked("bm25")),
        "words only, notes in their language, query in its own": query_in_its_language,
        "words only, notes in their language, query in each note's": ranked("bm25"),
        "vectors only (MiniLM)": ranked("vector"),
        "recall_memories, every note read as English (before)": as_english(ranked("hybrid")),
        "recall_memories": ranked("hybrid"),
    }
    languages = ", ".join(f"{count} {language}" for language, count in read_as.most_common())
    title = f"{label} ({len(questions)} questions; notes read as {languages})"
    return [
        (title, name, _hit_rates([answer for _, answer in questions], [search(q) for q, _ in questions]))
        for name, search in retrievers.items()
    ]


def note_recall(scratch_team_slug: str) -> NoteRows:
    data = json.loads(NOTES_DATA.read_text())["languages"]
    rows = []
    for language, labelled in data.items():
        rows += measure_notes(scratch_team_slug, language, labelled["notes"], labelled["questions"])
    # All three in one bank: each key prefixed with its language, every question asked of all of them.
    notes = [
        [f"{language[:2]}-{key}", *rest] for language, labelled in data.items() for key, *rest in labelled["notes"]
    ]
    questions = [
        [question, f"{language[:2]}-{answer}"]
        for language, labelled in data.items()
        for question, answer in labelled["questions"]
    ]
    rows += measure_notes(scratch_team_slug, "mixed (all three in one bank)", notes, questions)
    return rows


def run(scratch_team_slug: str) -> None:
    from memory.embedders import get_embedder

    use_embedder()  # the default (local), or BENCH_EMBEDDER, whatever EMBEDDER says
    embedder = get_embedder()
    assert embedder is not None
    data = json.loads(DATA.read_text())["languages"]
    rows = [
        row
        for language, labelled in data.items()
        for row in measure(scratch_team_slug, language, labelled, embedder.model)
    ]
    print(f"\n### Multilingual conversation search (bench/data/multilingual.json), {embedder.model}\n")
    print("| language | retriever | " + " | ".join(f"hit@{k}" for k in KS) + " |")
    print("| --- | --- | " + " | ".join("---:" for _ in KS) + " |")
    for language, name, scores in rows:
        print(f"| {language} | {name} | " + " | ".join(f"{scores[f'hit@{k}']:.0f}" for k in KS) + " |")
    note_rows = note_recall(scratch_team_slug)
    print("\n### Multilingual note recall (bench/data/multilingual_notes.json)\n")
    print("| notes | retriever | " + " | ".join(f"hit@{k}" for k in KS) + " |")
    print("| --- | --- | " + " | ".join("---:" for _ in KS) + " |")
    for label, name, scores in note_rows:
        print(f"| {label} | {name} | " + " | ".join(f"{scores[f'hit@{k}']:.0f}" for k in KS) + " |")
