"""The retrieval audit's cost: each read with its audit row against the same read without auditing.

The reads are called at the tool layer, which `POST /api/v1/tools/<name>` and the MCP server
share, and the turn through `take_turn`, which `POST /api/v1/turns` calls. An audited read only
records its row (memory.services.reads.record_read); the row is written after the response, by
`flush_reads`, which is timed on its own below (untimed after each audited read, as a server runs it
once the response has left). Baseline and audited calls alternate, so drift hits both alike.
The last table shows what writing the row inside the read would cost instead.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any
from unittest import mock

from django.conf import settings

from bench.harness import Result, print_table

REPEAT = 300
NOTES = 60
MESSAGES = 200
TURNS = 120
WORDS = [
    "oslo", "bergen", "coffee", "climbing", "lisbon", "sister", "bakery", "piano", "train", "office", "weekend",
    "doctor", "allergy", "peanuts", "running", "cycling", "jazz", "novels", "garden", "cats", "dogs", "spring",
    "winter", "lessons", "photography", "ramen", "tea",
]  # fmt: skip


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def alternate(
    name: str, base_name: str, operation: Callable[[int], object], *, repeat: int, after: Callable[[], object]
) -> tuple[Result, Result]:
    """Time `operation` audited and not audited, alternating; `after` runs untimed after each audited call."""
    from memory.services import reads
    from memory.tools import ToolContext

    audited: list[float] = []
    baseline: list[float] = []
    for i in range(-3, repeat):
        for audit in (i % 2 == 0, i % 2 != 0):
            with ExitStack() as unaudited:
                if not audit:  # the read exactly as it was before the audit: its one call made a no-op
                    unaudited.enter_context(mock.patch.object(ToolContext, "record_read", return_value=None))
                    unaudited.enter_context(mock.patch("conversations.services.record_read", return_value=None))
                start = time.perf_counter()
                operation(i)
                took = time.perf_counter() - start
            if audit:
                after()
            if i >= 0:
                (audited if audit else baseline).append(took)
    assert reads.pending_reads() == 0
    return Result(name, audited), Result(base_name, baseline)


def added(rows: list[tuple[Result, Result]]) -> None:
    print("\n| read | p50 without audit ms | p50 audited ms | added to p50 ms (budget 1 ms) |")
    print("| --- | ---: | ---: | ---: |")
    for audited, baseline in rows:
        print(
            f"| {audited.name} | {baseline.p50_ms:.3f} | {audited.p50_ms:.3f} | {audited.p50_ms - baseline.p50_ms:+.3f} |"
        )


def run(scratch_team_slug: str) -> None:
    from accounts.services import create_agent, create_team, get_or_create_person
    from conversations.models import Message
    from conversations.services import record_message, start_conversation, take_turn
    from memory.indexing import NOTES as NOTE_INDEX
    from memory.services import Actor, remember
    from memory.services.reads import flush_reads, record_read
    from memory.tools import REGISTRY, ToolContext

    settings.EMBEDDER = "hashing"  # the audit's cost is the point here, not the embedder's
    rng = random.Random(18)
    team = create_team(slug=scratch_team_slug)
    agent = create_agent(team=team, slug="coach")
    person = get_or_create_person(team=team, external_id="ada")
    actor = Actor("import", "bench")
    for i in range(NOTES):
        remember(
            team=team, person=person, actor=actor, key=f"note-{i}", description=sentence(rng, 6),
            content=sentence(rng, 30),
        )  # fmt: skip
    NOTE_INDEX.reconcile()
    earlier = start_conversation(team=team, agent=agent, person=person)
    for i in range(MESSAGES):
        record_message(conversation=earlier, role="user" if i % 2 == 0 else "assistant", content=sentence(rng, 12))
    ctx = ToolContext(team=team, agent=agent, api_key=None, request_id="bench")

    def tool(name: str, **arguments: Any) -> Callable[[int], object]:
        chosen = REGISTRY[name]
        args = chosen.parse({"person": "ada", **arguments})
        return lambda i: chosen.run(ctx, args)

    rows = [
        alternate(
            "search (audited)", "search", tool("search", query="coffee in lisbon"), repeat=REPEAT, after=flush_reads
        ),
        alternate(
            "recall_memories (audited)",
            "recall_memories",
            tool("recall_memories", query="coffee in lisbon"),
            repeat=REPEAT,
            after=flush_reads,
        ),
        alternate(
            "recent_messages (audited)",
            "recent_messages",
            tool("recent_messages", limit=20),
            repeat=REPEAT,
            after=flush_reads,
        ),
        alternate(
            "search_conversation (audited)",
            "search_conversation",
            tool("search_conversation", query="coffee in lisbon"),
            repeat=REPEAT,
            after=flush_reads,
        ),
    ]
    new = start_conversation(team=team, agent=agent, person=person)
    turn_texts = [sentence(rng, 10) for _ in range(2 * TURNS + 10)]
    rows.append(
        alternate(
            "turn (audited)",
            "turn",
            lambda i: take_turn(
                team=team, agent=agent, person=person, message=turn_texts[i + 3], conversation_id=new.pk
            ),
            repeat=TURNS,
            after=flush_reads,
        )
    )
    print_table(
        "Each read with its audit row recorded, against the same read without (row written after the response)",
        [row for audited, baseline in rows for row in ((baseline, None), (audited, baseline))],
    )
    added(rows)

    # The write itself, which runs after the response: one read at a time, and a burst in one insert.
    def pending(count: int) -> None:
        for _ in range(count):
            record_read(
                team=team, agent=agent, person=person, tool="search", started=time.perf_counter(), query="q",
                notes=list(range(1, 11)),
            )  # fmt: skip

    single, burst = [], []
    for _ in range(REPEAT):
        pending(1)
        start = time.perf_counter()
        flush_reads()
        single.append(time.perf_counter() - start)
    for _ in range(30):
        pending(50)
        start = time.perf_counter()
        flush_reads()
        burst.append((time.perf_counter() - start) / 50)
    recorded = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        pending(1)
        recorded.append(time.perf_counter() - start)
    flush_reads()
    written_one = Result("write 1 pending read (after the response)", single)
    written_burst = Result("write 50 pending reads in one insert, per read", burst)
    record_only = Result("record a read (inside the read: build the row, append it)", recorded)
    print_table(
        "The audit row: recorded inside the read, written after it",
        [(record_only, None), (written_one, record_only), (written_burst, record_only)],
    )
    messages = Message.objects.filter(team=team).count()
    print(
        f"\n{NOTES} notes, {messages} messages; search p50 {statistics.median(rows[0][1].samples) * 1000:.2f} ms. "
        "Writing the row inside the read would add the 'write 1 pending read' p50 to it."
    )
