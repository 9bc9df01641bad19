"""Curator cost: provider calls and characters per 100 exchanges for the threshold curator, against
a per-message extractor (one call per message, as systems that extract on every add do), on the
same conversations. Real conversational text from LoCoMo when it is present, else a synthetic set."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import Count, Sum
from tqdm import tqdm

if TYPE_CHECKING:
    from accounts.models import Team  # imported where used: Django is set up by then

LOCOMO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo" / "locomo10.json"
CONVERSATIONS = 5
EXCHANGES = 100


def conversation_set() -> tuple[str, list[list[tuple[str, str]]]]:
    if LOCOMO.exists():
        samples = json.loads(LOCOMO.read_text())[:CONVERSATIONS]
        chats = []
        for sample in samples:
            conversation = sample["conversation"]
            turns = [turn for index in range(1, 40) for turn in conversation.get(f"session_{index}", [])]
            a = conversation["speaker_a"]
            pairs, pending = [], None
            for turn in turns:
                if turn["speaker"] == a and pending is None:
                    pending = turn["text"]
                elif turn["speaker"] != a and pending is not None:
                    pairs.append((pending, turn["text"]))
                    pending = None
                if len(pairs) == EXCHANGES:
                    break
            chats.append(pairs)
        return f"LoCoMo, first {EXCHANGES} exchanges of {CONVERSATIONS} conversations", chats
    rng = random.Random(3)
    facts = ["I live in Oslo.", "I work at Acme.", "I love sailing.", "I'm allergic to peanuts.", "I moved to Bergen."]
    chats = [
        [(rng.choice(facts) + " How are you today?", "I'm well, thanks for asking.") for _ in range(EXCHANGES)]
        for _ in range(CONVERSATIONS)
    ]
    return f"synthetic, {EXCHANGES} exchanges x {CONVERSATIONS}", chats


def run(scratch_team_slug: str) -> None:
    from accounts.services import create_agent, create_team, get_or_create_person
    from conversations.services import curation_due, record_message, start_conversation
    from curator.models import ProviderCall
    from curator.services import curate_conversation

    settings.EMBEDDER = "none"  # cost of curation only; indexing is measured elsewhere
    label, chats = conversation_set()
    team = create_team(slug=scratch_team_slug)
    agent = create_agent(team=team, slug="curator-bench")
    results = {}
    for strategy in ("per-message extractor", "threshold curator"):
        for index, pairs in enumerate(tqdm(chats, desc=strategy, unit="conversation")):
            person = get_or_create_person(team=team, external_id=f"{strategy}-{index}")
            conversation = start_conversation(team=team, agent=agent, person=person)
            for said, replied in pairs:
                record_message(conversation=conversation, role="user", content=said)
                if strategy == "per-message extractor":
                    curate_conversation(conversation_id=conversation.pk)
                record_message(conversation=conversation, role="assistant", content=replied)
                conversation.refresh_from_db()
                if strategy == "threshold curator" and curation_due(conversation):
                    curate_conversation(conversation_id=conversation.pk)
        calls = ProviderCall.objects.filter(team=team, conversation_id__in=_conversations(team, strategy))
        totals = calls.aggregate(n=Count("id"), chars_in=Sum("chars_in"), chars_out=Sum("chars_out"))
        exchanges = sum(len(pairs) for pairs in chats)
        results[strategy] = {
            "calls": totals["n"] * 100 / exchanges,
            "chars_in": (totals["chars_in"] or 0) * 100 / exchanges,
            "chars_out": (totals["chars_out"] or 0) * 100 / exchanges,
        }
    base = results["per-message extractor"]
    print(f"\n### Curator cost per 100 exchanges ({label}; provider: rules, characters as a model would read them)\n")
    print("| strategy | calls | chars in | chars out | calls x baseline | chars in x baseline |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for strategy, row in results.items():
        print(
            f"| {strategy} | {row['calls']:.1f} | {row['chars_in']:,.0f} | {row['chars_out']:,.0f} | "
            f"{row['calls'] / base['calls']:.2f} | {row['chars_in'] / base['chars_in']:.2f} |"
        )
    print(
        f"\nthresholds: every {settings.CURATOR_EVERY_EXCHANGES} exchanges or {settings.CURATOR_EVERY_CHARS:,} characters"
    )


def _conversations(team: Team, strategy: str) -> list[int]:
    from conversations.models import Conversation

    return list(
        Conversation.objects.filter(team=team, person__external_id__startswith=strategy).values_list("pk", flat=True)
    )
