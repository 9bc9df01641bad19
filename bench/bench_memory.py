"""The memory write path and recall over curated banks of 10, 100 and 1,000 notes.

Per size: `remember` of net-new keys (the curated policy, with limits high enough never to refuse)
and `remember` upserts of existing keys (changed content), each against a raw read round-trip on
the same bank (the floor any write must pay), and `recall_memories` against the same recall over
the 10-note bank.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from bench.harness import Result, measure, print_table

SIZES = (10, 100, 1000)
REPEAT = 150
# Fewer repeats over the big banks keep `make bench` short.
RECALL_REPEAT = {10: 150, 100: 60, 1000: 20}
LIMIT = 5000  # soft and hard limit: 1,000 notes plus the net-new writes fit without FULL or consolidation
QUERY = "which coffee does she order before climbing in Lisbon"

# Small word lists, combined deterministically into short, varied, realistic notes.
PEOPLE = ["she", "he", "Ana", "her sister", "his manager", "the team lead", "their neighbour", "Tom"]
VERBS = ["prefers", "dislikes", "enjoys", "has given up", "recommends", "avoids", "has started", "talks about"]
THINGS = [
    "oat milk flat whites",
    "spicy ramen",
    "bouldering",
    "vinyl records",
    "early standups",
    "sourdough baking",
    "trail running",
    "jazz piano",
    "board games",
    "green tea",
    "sci-fi novels",
    "peanut-free snacks",
    "cold brew coffee",
    "Portuguese lessons",
    "film photography",
    "cycling to work",
]
PLACES = ["in Lisbon", "at the office", "on weekends", "in Berlin", "after work", "at home", "on the train", "in Leeds"]
REASONS = [
    "since moving last spring",
    "because of a doctor's advice",
    "ever since university",
    "to unwind",
    "when the weather is good",
    "with old friends",
    "to keep fit",
    "for the quiet",
]
KINDS = ["fact", "preference", "preference", "fact", "identity", "fact", "ephemeral", "daily"]
CATEGORIES = ["food", "hobbies", "work", "travel", "health", ""]


@dataclass(frozen=True)
class NoteText:
    key: str
    description: str
    content: str
    kind: str
    category: str


def note_text(rng: random.Random, index: int) -> NoteText:
    who, verb, thing = rng.choice(PEOPLE), rng.choice(VERBS), rng.choice(THINGS)
    place, reason = rng.choice(PLACES), rng.choice(REASONS)
    description = f"{who.capitalize()} {verb} {thing} {place}"
    content = f"{description} {reason}."
    if rng.random() < 0.5:
        other = rng.choice(THINGS)
        content += f" Mentioned {other} too, {rng.choice(REASONS)}."
    key = f"{thing.split()[-1]}-{verb.split()[-1]}-{index}"
    return NoteText(key, description, content, rng.choice(KINDS), rng.choice(CATEGORIES))


@dataclass
class Fixture:
    team: Any
    agent: Any
    person: Any
    bank: Any
    keys: list[str]


def prefill(team: Any, agent: Any, size: int) -> Fixture:
    from accounts.services import get_or_create_person
    from memory.models import Bank
    from memory.services import Actor, get_or_create_bank, remember, update_bank_settings

    person = get_or_create_person(team=team, external_id=f"bench-person-{size}")
    bank = get_or_create_bank(team=team, person=person, scope="", kind=Bank.Kind.GLOBAL)
    bank = update_bank_settings(
        bank=bank, actor=Actor("admin", "bench"), changes={"soft_limit": LIMIT, "hard_limit": LIMIT}
    )
    actor = Actor.for_agent(agent)
    rng = random.Random(size)
    keys = []
    for index in tqdm(range(size), desc=f"pre-fill {size:,}-note bank", leave=False, unit="note"):
        text = note_text(rng, index)
        result = remember(
            team=team,
            person=person,
            actor=actor,
            key=text.key,
            description=text.description,
            content=text.content,
            kind=text.kind,
            category=text.category,
            bank=Bank.Kind.GLOBAL,
        )
        assert result.action == "created", result.action
        keys.append(result.key)
    return Fixture(team, agent, person, result.bank, keys)


def run(scratch_team_slug: str) -> None:
    from accounts.services import create_agent, create_team
    from memory.models import Bank, Note
    from memory.recall import recall_memories
    from memory.services import Actor, delete_note, remember

    team = create_team(slug=scratch_team_slug)
    agent = create_agent(team=team, slug="bench-memory")
    actor = Actor.for_agent(agent)
    fixtures = {size: prefill(team, agent, size) for size in SIZES}

    def recall(fixture: Fixture) -> Callable[[int], None]:
        def run(i: int) -> None:
            hits = recall_memories(team=team, person=fixture.person, agent=agent, query=QUERY)
            assert hits, "the bench query should match something"

        return run

    # Recall first, over the banks exactly as filled (the writes below rewrite some notes).
    recalls = {
        size: measure(f"recall_memories, {size:,}-note bank", recall(fixture), repeat=RECALL_REPEAT[size])
        for size, fixture in fixtures.items()
    }

    for size, fixture in fixtures.items():
        bank, keys, person = fixture.bank, fixture.keys, fixture.person
        corrections = [note_text(random.Random(f"{size}-{i}"), i) for i in range(-3, REPEAT)]

        def read_round_trip(i: int, bank: Any = bank, keys: list[str] = keys) -> None:
            note = Note.objects.filter(team=team, bank=bank, key=keys[i % len(keys)]).first()
            assert note is not None
            Note.objects.filter(pk=note.pk).exists()

        def remember_new(i: int, person: Any = person, corrections: list[NoteText] = corrections) -> None:
            text = corrections[i + 3]
            result = remember(
                team=team,
                person=person,
                actor=actor,
                key=f"bench-new-{i + 3}",  # warm-up runs pass -1..-3
                description=text.description,
                content=text.content,
                kind=text.kind,
                category=text.category,
                bank=Bank.Kind.GLOBAL,
            )
            assert result.action == "created", result.action

        def upsert(
            i: int, person: Any = person, keys: list[str] = keys, corrections: list[NoteText] = corrections
        ) -> None:
            text = corrections[i + 3]
            result = remember(
                team=team,
                person=person,
                actor=actor,
                key=keys[i % len(keys)],
                description=text.description,
                content=f"Correction: {text.content}",
                kind=text.kind,
                category=text.category,
                bank=Bank.Kind.GLOBAL,
            )
            assert result.action == "updated", result.action

        baseline = measure(
            f"raw read round-trip (.first() + .exists()), {size:,} notes", read_round_trip, repeat=REPEAT
        )
        grown = size + REPEAT + 3
        created = measure(f"remember net-new key, {size:,} → {grown:,} notes", remember_new, repeat=REPEAT)
        # Back to `size` notes (through the write path, untimed) before the upserts.
        cleanup = Actor("admin", "bench-cleanup")
        for note in Note.objects.filter(team=team, bank=bank, key__startswith="bench-new-").select_related("bank"):
            delete_note(note=note, actor=cleanup)
        assert Note.objects.filter(team=team, bank=bank).count() == size
        updated = measure(f"remember upsert of an existing key, {size:,} notes", upsert, repeat=REPEAT)

        rows: list[tuple[Result, Result | None]] = [(baseline, None), (created, baseline), (updated, baseline)]
        rows.append((recalls[10], None))
        if size != 10:
            rows.append((recalls[size], recalls[10]))
        print_table(f"Memory write path and recall, curated bank of {size:,} notes", rows)
