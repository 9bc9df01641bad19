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
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from bench.harness import use_embedder

DATA = Path(__file__).resolve().parent / "data" / "multilingual.json"
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
    rows = []
    for name, search in retrievers.items():
        found = [search(question) for question, _ in questions]
        scores = {
            f"hit@{k}": 100
            * sum(pks[i] in hits[:k] for (_, i), hits in zip(questions, found, strict=True))
            / len(questions)
            for k in KS
        }
        rows.append((label, name, scores))
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
