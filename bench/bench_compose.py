"""Compose benchmark, at two sizes: a typical person (three banks of 64 notes, 5,000 messages of
theirs) and a large one (1,000 notes; 100,000 messages in the database), each broken down by layer,
against the memory_only profile of the same size as the in-run baseline.

The messages are sentences drawn from a vocabulary of 76 words, so that every query word is in a
seventh of them: the hardest case for the passages' keyword search, and no message has a vector.
When the LoCoMo data is at hand (bench/locomo_retrieval.py says where it is looked for), the
typical person is measured a second time with real dialogue: LoCoMo's turns as their 5,000
messages, each embedded, and LoCoMo's questions as the turns' messages."""

from __future__ import annotations

import itertools
import random
import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.test.utils import override_settings
from django.utils import timezone
from tqdm import tqdm

from bench.harness import Result, measure, print_table, through_the_reference_session, warm_embedder

NOTES = 1_000
MESSAGES = 100_000
OWN_MESSAGES = 2_000
PEOPLE = 100
TURNS = 100
WARMUP = 5  # turns run before the measured ones (the first of them is reported on its own)

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


@dataclass(frozen=True)
class Size:
    name: str
    notes: int  # spread over the person's private, shared and global banks
    own_messages: int  # in the conversation the turns continue
    earlier_messages: int  # in the person's earlier conversations with the same agent
    other_messages: int  # in other people's conversations (same team)
    dialogue: bool = False  # LoCoMo's turns as the messages (embedded), its questions as the turns


SIZES = (
    Size("typical person", notes=192, own_messages=1_000, earlier_messages=4_000, other_messages=0),
    Size(
        "typical person, real dialogue",
        notes=192,
        own_messages=1_000,
        earlier_messages=4_000,
        other_messages=0,
        dialogue=True,
    ),
    Size(
        "large person",
        notes=NOTES,
        own_messages=OWN_MESSAGES,
        earlier_messages=0,
        other_messages=MESSAGES - OWN_MESSAGES,
    ),
)


def _dialogue() -> tuple[list[str], list[str]] | None:
    """LoCoMo's turns, in order, and its questions (categories 1-4), or None without the data."""
    from bench.locomo_retrieval import dataset_path, load_samples, turn_text

    path = dataset_path()
    if path is None:
        return None
    samples = load_samples(path)
    turns = [turn_text(turn) for sample in samples for turn in sample.turns]
    questions = [question.text for sample in samples for question in sample.questions]
    return turns, random.Random(7).sample(questions, len(questions))


def _bulk_messages(
    conversation: Any, count: int, rng: random.Random, start: Any, bar: Any, said: Any | None = None
) -> None:
    """`count` messages: sentences of the bench's vocabulary, or the next of `said` (an iterator).
    Written in bulk, not through conversations.services, and so before any search of the pair: a
    kept pair learns of later appends through their conversation's row, which this does not write."""
    from conversations.models import Message

    batch: list[Message] = []
    for order in range(1, count + 1):
        batch.append(
            Message(
                team_id=conversation.team_id,
                conversation=conversation,
                role="user" if order % 2 else "assistant",
                content=next(said) if said is not None else sentence(rng, rng.randint(5, 40)),
                order=order,
                created_at=start + timedelta(minutes=order),
            )
        )
        if len(batch) == 5_000:
            Message.objects.bulk_create(batch)
            bar.update(len(batch))
            batch = []
    Message.objects.bulk_create(batch)
    bar.update(len(batch))


def _populate(size: Size, team_slug: str) -> Callable[..., Result]:
    """A team with one person of this size; returns a function measuring one profile's compose."""
    from accounts.services import create_agent, create_team, get_or_create_person
    from conversations.composer import Profile, compose
    from conversations.indexing import MESSAGES
    from conversations.kept_pairs import forget_kept_pairs
    from conversations.models import Conversation, Message, MessageVector
    from conversations.retrieval import STATISTICS
    from conversations.services import record_message, start_conversation
    from memory import kept_banks, vectors
    from memory.indexing import NOTES as NOTE_INDEX
    from memory.models import Bank, Note, NoteVector
    from memory.queries import forget_kept_notes
    from memory.services import Actor, get_or_create_bank, remember, update_bank_settings

    rng = random.Random(7)
    team = create_team(slug=team_slug)
    agent = create_agent(team=team, slug="coach", persona="You are a friendly coach.")
    person = get_or_create_person(team=team, external_id="ada")
    actor = Actor("import", "bench")
    scope = "project:apollo"
    for kind in ("private", "shared", "global"):
        bank = get_or_create_bank(team=team, person=person, scope=scope, kind=kind)
        update_bank_settings(bank=bank, actor=actor, changes={"soft_limit": 5_000, "hard_limit": 5_000})
    for i in tqdm(range(size.notes), desc=f"{size.name}: notes", unit="note"):
        remember(
            team=team, person=person, actor=actor, scope=scope, bank=("private", "shared", "global")[i % 3],
            key=f"note-{i}", description=sentence(rng, 6)[:200], content=sentence(rng, 40),
        )  # fmt: skip
    with tqdm(total=size.notes, desc=f"{size.name}: embedding notes", unit="note") as bar:
        NOTE_INDEX.reconcile(progress=bar.update)

    now = timezone.now()
    start = now - timedelta(days=200)
    total = size.own_messages + size.earlier_messages + size.other_messages
    dialogue = _dialogue() if size.dialogue else None
    said = itertools.cycle(dialogue[0]) if dialogue is not None else None
    with tqdm(total=total, desc=f"{size.name}: messages", unit="msg") as bar:
        own = start_conversation(team=team, agent=agent, person=person, started_at=start)
        _bulk_messages(own, size.own_messages, rng, start, bar, said)
        earlier = size.earlier_messages // 1_000
        for _ in range(earlier):
            past = Conversation.objects.create(team=team, agent=agent, person=person, started_at=start)
            _bulk_messages(past, size.earlier_messages // earlier, rng, start, bar, said)
        if size.other_messages:
            others = PEOPLE - 1
            per_other, extra = divmod(size.other_messages, others)
            for index in range(others):
                other = get_or_create_person(team=team, external_id=f"other-{index}")
                conversation = Conversation.objects.create(team=team, agent=agent, person=other, started_at=start)
                _bulk_messages(conversation, per_other + (1 if index < extra else 0), rng, start, bar)

    messages = (
        dialogue[1][: TURNS + 10]
        if dialogue is not None
        else [sentence(rng, rng.randint(6, 16)) for _ in range(TURNS + 10)]
    )
    # Each measured turn's message is answered before the next is said, as in a real conversation:
    # its window then ends with the agent's reply and the person's new message, not with every
    # message of the bench in one run of the person's (merged into one item, as _merge_roles does).
    recorded = []
    for text in messages:
        recorded.append(record_message(conversation=own, role="user", content=text))
        reply = next(said) if said is not None else sentence(rng, rng.randint(5, 40))
        record_message(conversation=own, role="assistant", content=reply)
    if dialogue is not None:  # the person's messages embedded, as a worker would have long before
        count = Message.objects.filter(team=team).count()
        with tqdm(total=count, desc=f"{size.name}: embedding", unit="msg") as bar:
            MESSAGES.reconcile(rows=Message.objects.filter(team=team), batch_size=256, progress=bar.update)
    # Measured as a database that autovacuum has analysed since (as it would have long before a
    # person grows this large): without statistics the words half of the passages' search scores
    # every message holding a query word (in this vocabulary of 76 words, nearly all 5,000 of the
    # typical person's), and this process would keep that view for STATISTICS_SECONDS.
    with connection.cursor() as cursor:
        for table in (Message, Conversation, MessageVector, Note, NoteVector, Bank):
            cursor.execute(f"ANALYZE {connection.ops.quote_name(table._meta.db_table)}")
    STATISTICS.forget()

    def measure_in_python() -> Result:
        """The notes layer as it was chosen before: every visible note read with its content, the
        digest sorted and the notes ranked in Python (the functions are still there for other readers)."""
        from memory.queries import build_digest, visible_notes
        from memory.vectors import order_by_meaning

        def one(i: int) -> None:
            vectors.forget_query_vectors()
            seen = visible_notes(team=team, person=person, agent=agent, scope=scope)
            build_digest(team=team, person=person, agent=agent, scope=scope, visible=seen)
            order_by_meaning(team=team, notes=seen.notes, query=recorded[i % len(recorded)].content)

        return measure(f"{size.name}: notes chosen in Python (every note read)", one, repeat=TURNS)

    def measure_profile(profile: str, *, keep: bool = True, beside_exact: bool = False) -> Result:
        """One profile's turns. With keep=False nothing is kept of the notes between turns (each reads
        every applicable note, as every turn did before memory.queries kept them per bank version).
        With beside_exact every other turn embeds its message through the reference session, not the
        8-bit one: the two alternate, so a noisy machine weighs on both alike. Those turns are
        the result's `exactly`; its layers are the other turns'."""
        if profile == "python":
            return measure_in_python()
        timings: dict[str, list[float]] = {}

        def one(i: int) -> None:
            vectors.forget_query_vectors()  # every turn embeds its own message, as a real one does
            if not keep:
                forget_kept_notes()
                kept_banks.forget_kept()
            exact = beside_exact and i >= 0 and i % 2 == 1  # warm-up and first turns: the product's
            with through_the_reference_session() if exact else nullcontext():
                result = compose(
                    team=team, agent=agent, person=person, conversation=own,
                    message=recorded[(i // 2 if beside_exact else i) % len(recorded)], scope=scope, profile=Profile(profile),
                )  # fmt: skip
            if i >= 0 and not exact:
                for layer, ms in result.timings_ms.items():
                    timings.setdefault(layer, []).append(ms)

        name = f"{size.name}: compose, {profile} profile" + ("" if keep else ", nothing kept")
        # The first turn, before the warm-up: nothing of this person kept, their rows not yet read by
        # this profile (the first profile measured also pays for this process's first turn).
        forget_kept_notes()
        kept_banks.forget_kept()
        forget_kept_pairs()
        started = time.perf_counter()
        one(-1)
        first = Result(f"{name}: first turn (cold)", [time.perf_counter() - started])
        # Nothing kept: the pair searched in SQL too (SEARCH_KEPT_MESSAGES=0), as before pairs were kept.
        with override_settings(**({} if keep else {"SEARCH_KEPT_MESSAGES": 0})):
            result = measure(
                name, lambda i: one(i if i >= 0 else i - 1), repeat=TURNS * (2 if beside_exact else 1), warmup=WARMUP
            )
        if beside_exact:
            result.exactly = Result(  # type: ignore[attr-defined]
                f"{name}, message embedded through the reference session (turns alternating with the row above)",
                result.samples[1::2],
            )
            result.samples = result.samples[0::2]
        result.layers = timings  # type: ignore[attr-defined]
        result.first = first  # type: ignore[attr-defined]
        return result

    return measure_profile


def run(scratch_team_slug: str) -> None:
    settings.EMBEDDER = "local"
    warm_embedder()
    measured: list[tuple[Size, Result, Result, Result, Result, Result]] = []
    for index, size in enumerate(SIZES):
        if size.dialogue and _dialogue() is None:
            print(f"\n{size.name}: skipped, LoCoMo's locomo10.json was not found (set LOCOMO_DIR to its folder).")
            continue
        measure_profile = _populate(size, f"{scratch_team_slug}-{index}")
        baseline = measure_profile("memory_only")
        whole = measure_profile("full", beside_exact=True)
        exactly: Result = whole.exactly  # type: ignore[attr-defined]
        unkept = measure_profile("full", keep=False)
        in_python = measure_profile("python")
        measured.append((size, baseline, whole, unkept, exactly, in_python))

    for size, *_ in measured:
        print(
            f"\n{size.name}: {size.notes:,} notes in three banks; {size.own_messages:,} messages in the conversation, "
            f"{size.earlier_messages:,} in earlier ones, {size.other_messages:,} of other people"
            + ("; LoCoMo's turns as the messages (embedded), its questions as the turns" if size.dialogue else "")
        )
    print(
        f"\nEach profile: its first turn is timed alone (nothing kept of the person's notes), then {WARMUP - 1} "
        f"more warm-up turns, then {TURNS} measured turns. Every turn embeds its message. The tables are analysed "
        "once loaded."
    )
    print_table(
        "Turn composition (server-side, in process): memory_only is the in-run baseline of each size; "
        "'nothing kept' reads every applicable note, and its bank's rows and vectors, each turn, and searches the "
        "pair in SQL (as before notes were kept per bank version and pairs per process); 'through the reference "
        "session' embeds the turn's message with the local model's reference session (float), not its 8-bit one",
        [
            row
            for _, baseline, whole, unkept, exactly, _ in measured
            for row in (
                (baseline, None),
                (whole, baseline),
                (unkept, baseline),
                (exactly, baseline),
                (whole.first, None),  # type: ignore[attr-defined]
                (baseline.first, None),  # type: ignore[attr-defined]
            )
        ],
    )
    for size, _, whole, unkept, _, in_python in measured:
        timings: dict[str, list[float]] = whole.layers  # type: ignore[attr-defined]
        unkept_timings: dict[str, list[float]] = unkept.layers  # type: ignore[attr-defined]
        rows: list[tuple[Result, Result | None]] = []
        for layer, samples in timings.items():
            if not samples:
                continue
            before = unkept_timings.get(layer)
            rows.append(
                (
                    Result(f"{size.name}: {layer}", [ms / 1000 for ms in samples]),
                    Result(f"{size.name}: {layer}, nothing kept", [ms / 1000 for ms in before]) if before else None,
                )
            )
        rows.append((in_python, None))
        print_table(f"Full composition by part, {size.name} (the baseline: the same part with nothing kept)", rows)
        shares = {layer: statistics.mean(samples) for layer, samples in timings.items() if samples}
        total = sum(shares.values()) or 1.0
        print("\nshare of the mean: " + ", ".join(f"{layer} {100 * ms / total:.0f}%" for layer, ms in shares.items()))
