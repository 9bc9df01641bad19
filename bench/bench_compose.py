"""Compose benchmark: a full turn with 1,000 notes in the person's banks and 100,000 messages in
the database, broken down by layer, against the memory_only profile as the in-run baseline."""

from __future__ import annotations

import random
import statistics
from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from tqdm import tqdm

from bench.harness import Result, measure, print_table

NOTES = 1_000
MESSAGES = 100_000
OWN_MESSAGES = 2_000
PEOPLE = 100
TURNS = 40

WORDS = [
    "sailing",
    "fjord",
    "harbour",
    "boat",
    "ferry",
    "island",
    "weather",
    "rain",
    "sun",
    "storm",
    "cabin",
    "hiking",
    "trail",
    "mountain",
    "ski",
    "snow",
    "coffee",
    "tea",
    "breakfast",
    "dinner",
    "recipe",
    "garden",
    "tomato",
    "basil",
    "dog",
    "cat",
    "greyhound",
    "kitten",
    "school",
    "teacher",
    "exam",
    "project",
    "deadline",
    "meeting",
    "manager",
    "salary",
    "promotion",
    "apartment",
    "rent",
    "move",
    "Bergen",
    "Oslo",
    "Tromso",
    "Paris",
    "Berlin",
    "guitar",
    "piano",
    "concert",
    "novel",
    "library",
    "painting",
    "museum",
    "birthday",
    "wedding",
    "sister",
    "brother",
    "mother",
    "father",
    "daughter",
    "son",
    "doctor",
    "allergy",
    "peanut",
    "running",
    "marathon",
    "yoga",
    "bicycle",
    "train",
    "flight",
    "holiday",
    "passport",
    "visa",
    "language",
    "Norwegian",
    "Spanish",
    "lesson",
]


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def run(scratch_team_slug: str) -> None:
    from accounts.services import create_agent, create_team, get_or_create_person
    from conversations.composer import LAYERS, compose
    from conversations.models import Conversation, Message
    from conversations.services import record_message, start_conversation
    from memory.indexing import NOTES as NOTE_INDEX
    from memory.services import Actor, get_or_create_bank, remember, update_bank_settings

    settings.EMBEDDER = "local"
    rng = random.Random(7)
    team = create_team(slug=scratch_team_slug)
    agent = create_agent(team=team, slug="coach", persona="You are a friendly coach.")
    person = get_or_create_person(team=team, external_id="ada")
    actor = Actor("import", "bench")
    scope = "project:apollo"
    for kind in ("private", "shared", "global"):
        bank = get_or_create_bank(team=team, person=person, scope=scope, kind=kind)
        update_bank_settings(bank=bank, actor=actor, changes={"soft_limit": 5_000, "hard_limit": 5_000})
    for i in tqdm(range(NOTES), desc="notes", unit="note"):
        remember(
            team=team, person=person, actor=actor, scope=scope, bank=("private", "shared", "global")[i % 3],
            key=f"note-{i}", description=sentence(rng, 6)[:200], content=sentence(rng, 40),
        )  # fmt: skip
    with tqdm(total=NOTES, desc="embedding notes", unit="note") as bar:
        NOTE_INDEX.reconcile(progress=bar.update)

    now = timezone.now()
    own = start_conversation(team=team, agent=agent, person=person, started_at=now - timedelta(days=200))
    batch: list[Message] = []
    with tqdm(total=MESSAGES, desc="messages", unit="msg") as bar:
        conversations = [own] + [
            Conversation.objects.create(
                team=team,
                agent=agent,
                person=get_or_create_person(team=team, external_id=f"other-{p}"),
                started_at=now - timedelta(days=200),
            )
            for p in range(PEOPLE - 1)
        ]
        per_other, extra = divmod(MESSAGES - OWN_MESSAGES, PEOPLE - 1)
        for index, conversation in enumerate(conversations):
            count = OWN_MESSAGES if conversation is own else per_other + (1 if index <= extra else 0)
            for order in range(1, count + 1):
                batch.append(
                    Message(
                        team=team,
                        conversation=conversation,
                        role="user" if order % 2 else "assistant",
                        content=sentence(rng, rng.randint(5, 40)),
                        order=order,
                        created_at=now - timedelta(days=200) + timedelta(minutes=order),
                    )
                )
                if len(batch) == 5_000:
                    Message.objects.bulk_create(batch)
                    bar.update(len(batch))
                    batch = []
        Message.objects.bulk_create(batch)
        bar.update(len(batch))

    messages = [sentence(rng, rng.randint(6, 16)) for _ in range(TURNS + 10)]
    recorded = [record_message(conversation=own, role="user", content=text) for text in messages]
    timings: dict[str, list[float]] = {layer: [] for layer in LAYERS if layer != "persona"}

    def full(i: int) -> None:
        result = compose(
            team=team, agent=agent, person=person, conversation=own, message=recorded[i % len(recorded)], scope=scope
        )
        if i >= 0:
            for layer, ms in result.timings_ms.items():
                timings[layer].append(ms)

    def memory_only(i: int) -> None:
        compose(
            team=team, agent=agent, person=person, conversation=own, message=recorded[i % len(recorded)],
            scope=scope, profile="memory_only",
        )  # fmt: skip

    baseline = measure("compose, memory_only profile (persona + notes)", memory_only, repeat=TURNS)
    whole = measure("compose, full profile (all layers)", full, repeat=TURNS)
    print(
        f"\n{NOTES:,} notes in the person's banks, {Message.objects.filter(team=team).count():,} messages in the database"
    )
    print_table("Turn composition", [(baseline, None), (whole, baseline)])
    rows: list[tuple[Result, Result | None]] = [
        (Result(f"layer: {layer}", [ms / 1000 for ms in samples]), None)
        for layer, samples in timings.items()
        if samples
    ]
    print_table("Full composition by layer", rows)
    shares = {layer: statistics.mean(samples) for layer, samples in timings.items() if samples}
    total = sum(shares.values())
    print("\nshare of the mean: " + ", ".join(f"{layer} {100 * ms / total:.0f}%" for layer, ms in shares.items()))
