"""The HTTP path: the same API calls in process (Django's test client: middleware, DRF, the
views) and over HTTP against the real server (`manage.py run`'s web processes), one client at
a time on a keep-alive connection. The difference is what the server, the network stack and
the ASGI layer add to each call."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from typing import Any

from bench.harness import Result, measure, print_table
from bench.server import Client, serve

NOTES = 10
REPEAT = {"me": 300, "recall": 150, "remember": 150, "record": 150, "turn": 80}
QUERY = "which coffee does she order before climbing in Lisbon"


def seed(scratch_team_slug: str, *, people: int, notes: int) -> tuple[str, list[str]]:
    """A team with one agent and `people` people of `notes` embedded notes each; returns (key, person ids)."""
    from accounts.services import create_agent, create_team, get_or_create_person, issue_api_key
    from bench.bench_memory import note_text
    from memory.indexing import NOTES as NOTE_INDEX
    from memory.services import Actor, remember

    team = create_team(slug=scratch_team_slug)
    agent = create_agent(team=team, slug="coach", persona="You are a friendly coach.")
    key = issue_api_key(agent=agent).plaintext
    actor = Actor("import", "bench")
    rng = random.Random(11)
    ids = [f"person-{p}" for p in range(people)]
    for external_id in ids:
        person = get_or_create_person(team=team, external_id=external_id)
        for i in range(notes):
            text = note_text(rng, i)
            remember(
                team=team, person=person, actor=actor, key=text.key, description=text.description,
                content=text.content, kind=text.kind, category=text.category,
            )  # fmt: skip
    NOTE_INDEX.reconcile()
    return key, ids


def conversation_with(team_slug: str, external_id: str) -> int:
    """A conversation of the team's agent with this person: where the benchmark records messages."""
    from accounts.models import Agent, Person
    from conversations.services import start_conversation

    agent = Agent.objects.select_related("team").get(team__slug=team_slug, slug="coach")
    person = Person.objects.get(team=agent.team, external_id=external_id)
    return start_conversation(team=agent.team, agent=agent, person=person).pk


def calls(person: str, conversation: int) -> dict[str, tuple[str, str, Callable[[int], dict[str, Any] | None], int]]:
    """name -> (method, path, body for call i, expected status)."""
    return {
        "GET /api/v1/me": ("GET", "/api/v1/me", lambda i: None, 200),
        "record a message (POST .../messages)": (
            "POST", f"/api/v1/conversations/{conversation}/messages",
            lambda i: {"role": "user", "content": f"I had coffee by the harbour, take {i}."}, 201,
        ),
        "recall_memories": (
            "POST", "/api/v1/tools/recall_memories", lambda i: {"person": person, "query": QUERY}, 200,
        ),
        "remember (upsert)": (
            "POST", "/api/v1/tools/remember",
            lambda i: {"person": person, "key": "bench-upsert", "description": "A note rewritten on every call",
                       "content": f"Version {i} of the note."},
            200,
        ),
        "turn, memory_only": (
            "POST", "/api/v1/turns",
            lambda i: {"person": person, "message": f"Tell me about coffee, take {i}.", "profile": "memory_only"},
            201,
        ),
        "turn, full": (
            "POST", "/api/v1/turns", lambda i: {"person": person, "message": f"And climbing? Take {i}.", "profile": "full"},
            201,
        ),
    }  # fmt: skip


def _repeat(name: str) -> int:
    for word in ("record", "recall", "remember", "turn"):
        if word in name:
            return REPEAT[word]
    return REPEAT["me"]


def run(scratch_team_slug: str) -> None:
    from django.conf import settings
    from django.test import Client as DjangoClient

    from config.celery import app
    from config.redis import redis_client

    settings.API_RATE = "100000000/min"  # as serve() lifts it for the server: one key makes every call
    # The tasks the in-process writes send wait in a queue of this run's own, dropped at the end.
    queue = app.conf.task_default_queue = f"bench-http-inprocess-{os.getpid()}"
    key, (person_in_process, person_http) = seed(scratch_team_slug, people=2, notes=NOTES)
    conversation = {person: conversation_with(scratch_team_slug, person) for person in (person_in_process, person_http)}
    django_client = DjangoClient(headers={"Authorization": f"Bearer {key}"})

    def in_process(method: str, path: str, body: Callable[[int], Any], status: int) -> Callable[[int], object]:
        def call(i: int) -> None:
            if method == "GET":
                response = django_client.get(path)
            else:
                response = django_client.post(path, body(i), content_type="application/json")
            assert response.status_code == status, (path, response.status_code, response.content[:200])

        return call

    cpu: dict[tuple[str, str], float] = {}  # (name, where) -> CPU ms per call on the serving side

    def timed(name: str, where: str, operation: Callable[[int], object], cpu_seconds: Callable[[], float]) -> Result:
        before = cpu_seconds()
        result = measure(f"{name}, {where}", operation, repeat=_repeat(name))
        cpu[name, where] = (cpu_seconds() - before) * 1000 / (len(result.samples) + 3)  # measure's warm-up too
        return result

    local = {name: timed(name, "in process", in_process(*spec), time.process_time)
             for name, spec in calls(person_in_process, conversation[person_in_process]).items()}  # fmt: skip
    with serve("http", worker=False) as server:
        client = Client(server, key=key)

        def over_http(method: str, path: str, body: Callable[[int], Any], status: int) -> Callable[[int], object]:
            return lambda i: client.request(method, path, body(i), expect=status)

        remote = {name: timed(name, "over HTTP", over_http(*spec), server.web_cpu_seconds)
                  for name, spec in calls(person_http, conversation[person_http]).items()}  # fmt: skip
        client.close()
    redis_client().delete(queue)
    print(
        f"\nA person with {NOTES} notes; {server.web_processes} web process(es), no worker running (the tasks wait in "
        "a queue of their own, dropped afterwards); one client, keep-alive, on the same machine."
    )
    rows: list[tuple[Result, Result | None]] = []
    for name in local:
        rows += [(local[name], None), (remote[name], local[name])]
    print_table("The HTTP path against the same calls in process", rows)
    print("\nServing-side CPU per call: the benchmark process in process, the web processes over HTTP.\n")
    print("| operation | in process p50 ms | over HTTP p50 ms | HTTP adds ms | CPU ms in process | CPU ms over HTTP |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in local:
        print(f"| {name} | {local[name].p50_ms:.2f} | {remote[name].p50_ms:.2f} | "
              f"{remote[name].p50_ms - local[name].p50_ms:+.2f} | {cpu[name, 'in process']:.2f} | "
              f"{cpu[name, 'over HTTP']:.2f} |")  # fmt: skip
