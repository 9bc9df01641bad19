"""History import: 20,000 messages through `import_conversations` (bulk, one transaction) against
recording a subset of the same messages one by one through `record_message`.

The figure to hold is at least 2,000 messages/s for the import. The embedder is off for both: the
import queues embedding after commit, in the background, so it is not part of what is timed.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta

from django.conf import settings

CONVERSATIONS = 200
PER_CONVERSATION = 100  # 20,000 messages in all
BASELINE_MESSAGES = 1_000
WORDS = [
    "coffee",
    "climbing",
    "Lisbon",
    "sister",
    "moved",
    "flat",
    "greyhound",
    "Biscuit",
    "running",
    "trail",
    "jazz",
    "piano",
    "sourdough",
    "train",
    "office",
    "weekend",
    "doctor",
    "advice",
    "cycling",
    "books",
    "photography",
    "ramen",
    "tea",
    "Berlin",
    "Leeds",
    "garden",
]


def history(rng: random.Random) -> list[object]:
    start = datetime(2023, 5, 8, 9, 0, tzinfo=UTC)
    items: list[object] = []
    for c in range(CONVERSATIONS):
        when = start + timedelta(days=c)
        items.append(
            {
                "person": f"person-{c % 20}",
                "external_id": f"conv-{c}",
                "messages": [
                    {
                        "role": "user" if m % 2 == 0 else "assistant",
                        "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))),
                        "created_at": (when + timedelta(seconds=30 * m)).isoformat(),
                        "external_id": f"conv-{c}-m{m}",
                    }
                    for m in range(PER_CONVERSATION)
                ],
            }
        )
    return items


def run(scratch_team_slug: str) -> None:
    from accounts.services import create_agent, create_team, get_or_create_person
    from conversations.history_import import import_conversations
    from conversations.services import record_message, start_conversation

    settings.EMBEDDER = "none"
    team = create_team(slug=scratch_team_slug)
    agent = create_agent(team=team, slug="coach", persona="You are a friendly coach.")
    items = history(random.Random(11))
    total = CONVERSATIONS * PER_CONVERSATION

    began = time.perf_counter()
    report = import_conversations(team=team, agent=agent, items=items)
    imported = time.perf_counter() - began
    assert report.messages_created == total, report.summary()

    began = time.perf_counter()
    again = import_conversations(team=team, agent=agent, items=items)
    reimported = time.perf_counter() - began
    assert again.messages_created == 0, again.summary()

    # The baseline: the first messages of the same history, one record_message call (one transaction) each.
    baseline_agent = create_agent(team=team, slug="baseline", persona="")
    subset: list[tuple[object, dict[str, str]]] = []
    for item in items:
        assert isinstance(item, dict)
        subset.extend((item, message) for message in item["messages"])
    subset = subset[:BASELINE_MESSAGES]
    conversations: dict[str, object] = {}
    began = time.perf_counter()
    for item, message in subset:
        assert isinstance(item, dict)
        conversation = conversations.get(item["external_id"])
        if conversation is None:
            person = get_or_create_person(team=team, external_id=item["person"])
            conversation = start_conversation(team=team, agent=baseline_agent, person=person)
            conversations[item["external_id"]] = conversation
        record_message(
            conversation=conversation,  # type: ignore[arg-type]
            role=message["role"],
            content=message["content"],
            created_at=datetime.fromisoformat(message["created_at"]),
            external_id=message["external_id"],
        )
    one_by_one = time.perf_counter() - began

    baseline_rate = len(subset) / one_by_one
    rows = [
        ("import_conversations (bulk, one transaction)", total, imported),
        ("import_conversations again (all present)", total, reimported),
        ("record_message one by one (baseline)", len(subset), one_by_one),
    ]
    print("\n### history import\n")
    print("| operation | messages | seconds | messages/s | x baseline rate |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, count, seconds in rows:
        rate = count / seconds
        print(f"| {name} | {count:,} | {seconds:.2f} | {rate:,.0f} | {rate / baseline_rate:.1f} |")
    verdict = "meets" if total / imported >= 2_000 else "MISSES"
    print(f"\nThe import {verdict} the 2,000 messages/s target ({total / imported:,.0f} messages/s).")
