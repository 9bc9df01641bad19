"""Recording a message, and embedding what was recorded.

Message recording (wall time, in process): `record_message` into a short and a 5,000-message
conversation (what it costs must not grow with the conversation), a turn's own message (found and
written in one round trip, as `take_turn` does, against the lookup-then-record it replaced) and
`POST /api/v1/conversations/<id>/messages`, against inserting the row alone and an authenticated
`GET /api/v1/me`. The after-commit embedding task is queued for real, on a queue of this run's own
that is deleted afterwards; in a request it is queued after the response (memory.indexing's outbox),
which the test client still waits for, so the in-process POST includes it and a row shows its cost.

The embedding task (CPU time of this process, which is what a worker pays): one short note per task
and sixteen per task, with the default single onnxruntime thread and with one thread per core (the
old default), against the embedder alone on one note; and the local model's reference session
(float) alone, beside its 8-bit one that embeds every text.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from django.conf import settings
from tqdm import tqdm

from bench.harness import Result, measure, print_table

REPEAT = 200
LONG = 5_000
NOTES_PER_RUN = 96
WORDS = ["sailing", "fjord", "coffee", "tea", "garden", "dog", "project", "deadline", "Bergen", "Oslo", "piano"]


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def _cpu(name: str, operation: Callable[[int], int], *, repeat: int) -> Result:
    """CPU seconds per item: `operation(i)` does one run and returns how many items it handled."""
    operation(-1)
    samples: list[float] = []
    for i in tqdm(range(repeat), desc=name, leave=False, unit="op"):
        start = time.process_time()
        items = operation(i)
        samples.extend([(time.process_time() - start) / max(items, 1)] * max(items, 1))
    return Result(name, samples)


def _recording(team_slug: str) -> None:
    from django.test import Client

    from accounts.services import create_agent, create_team, get_or_create_person, issue_api_key
    from config.redis import cache_redis
    from conversations.indexing import MESSAGES
    from conversations.models import Message
    from conversations.services import conversation_for, record_message, record_turn_message, start_conversation
    from memory.indexing import dispatch, pending_keys

    rng = random.Random(3)
    team = create_team(slug=team_slug)
    agent = create_agent(team=team, slug="coach")
    key = issue_api_key(agent=agent).plaintext
    ada = get_or_create_person(team=team, external_id="ada")
    short = start_conversation(team=team, agent=agent, person=ada)
    bob = get_or_create_person(team=team, external_id="bob")
    long = start_conversation(team=team, agent=agent, person=bob)
    Message.objects.bulk_create(
        Message(team=team, conversation=long, role=("user", "assistant")[n % 2], content=_sentence(rng, 12), order=n,
                created_at=long.started_at)
        for n in range(1, LONG + 1)
    )  # fmt: skip
    texts = [_sentence(rng, rng.randint(6, 20)) for _ in range(50)]
    orders = iter(range(10_000_000, 20_000_000))
    raw = start_conversation(team=team, agent=agent, person=get_or_create_person(team=team, external_id="raw"))

    def insert_only(i: int) -> None:
        Message.objects.create(
            team=team, conversation=raw, role="user", content=texts[i % 50], order=next(orders),
            created_at=raw.started_at,
        )  # fmt: skip

    def record_short(i: int) -> None:
        record_message(conversation=short, role="user", content=texts[i % 50])

    def record_long(i: int) -> None:
        record_message(conversation=long, role="user", content=texts[i % 50])

    def lookup_then_record(i: int) -> None:  # how a turn recorded its message before (a lookup first)
        from django.db import transaction

        with transaction.atomic():
            conversation = conversation_for(team=team, agent=agent, person=ada, conversation_id=short.pk)
            record_message(conversation=conversation, role="user", content=texts[i % 50])

    def turn_message(i: int) -> None:
        record_turn_message(team=team, agent=agent, person=ada, conversation_id=short.pk, content=texts[i % 50])

    queued = iter(range(10**9, 2 * 10**9))  # no such rows: the lists are dropped at the end
    pending, wake = pending_keys(MESSAGES)

    def queue_task(i: int) -> None:  # what a request's outbox sends once its response has gone
        cache_redis().delete(wake)  # no task queued yet: this one queues it
        dispatch(MESSAGES, [next(queued)])

    def queue_behind(i: int) -> None:  # a task is queued already: the row joins its list
        dispatch(MESSAGES, [next(queued)])

    client = Client()
    headers = {"Authorization": f"Bearer {key}"}
    url = f"/api/v1/conversations/{short.pk}/messages"

    def me(i: int) -> None:
        assert client.get("/api/v1/me", headers=headers).status_code == 200

    def post(i: int) -> None:
        answer = client.post(
            url, {"role": "user", "content": texts[i % 50]}, content_type="application/json", headers=headers
        )
        assert answer.status_code == 201, answer.content

    baseline = measure("INSERT one message row, nothing else", insert_only, repeat=REPEAT)
    short_run = measure("record_message, conversation of ~200 messages", record_short, repeat=REPEAT)
    long_run = measure(f"record_message, conversation of {LONG:,}+ messages", record_long, repeat=REPEAT)
    before_run = measure("a turn's message the old way (conversation_for, then record_message)", lookup_then_record,
                         repeat=REPEAT)  # fmt: skip
    turn_run = measure("a turn's own message (record_turn_message: found and written at once)", turn_message,
                       repeat=REPEAT)  # fmt: skip
    me_run = measure("GET /api/v1/me (authenticated, in process)", me, repeat=REPEAT)
    post_run = measure("POST /api/v1/conversations/<id>/messages (in process, outbox sent too)", post, repeat=REPEAT)
    queue_run = measure("dispatch, no task queued: the row listed and a task queued (after the response)",
                        queue_task, repeat=REPEAT)  # fmt: skip
    behind_run = measure("dispatch, a task queued already: the row listed only", queue_behind, repeat=REPEAT)
    cache_redis().delete(pending, wake)
    print_table(
        "Recording a message (in process; outside a request the embedding task is queued on commit)",
        [(baseline, None), (short_run, baseline), (long_run, short_run), (before_run, baseline),
         (turn_run, before_run), (me_run, None), (post_run, me_run), (queue_run, None), (behind_run, queue_run)],
    )  # fmt: skip
    print(
        "\nOver HTTP the outbox's send follows the response (request_finished): `python -m bench http` times "
        "POST .../messages as a client sees it."
    )


def _embedding(team_slug: str) -> None:
    from accounts.services import create_team, get_or_create_person
    from config.redis import cache_redis
    from memory.embedders import LocalMiniLM, get_embedder
    from memory.indexing import NOTES, dispatch, drain, pending_keys
    from memory.models import Note
    from memory.services import Actor, get_or_create_bank, remember, update_bank_settings

    rng = random.Random(5)
    team = create_team(slug=team_slug)
    person = get_or_create_person(team=team, external_id="ada")
    actor = Actor("import", "bench")
    bank = get_or_create_bank(team=team, person=person, scope="", kind="global")
    update_bank_settings(bank=bank, actor=actor, changes={"soft_limit": 10_000, "hard_limit": 10_000})
    runs = 5
    made: list[int] = []
    for i in tqdm(range(NOTES_PER_RUN * runs + 40), desc="notes", unit="note"):
        note = remember(
            team=team, person=person, actor=actor, key=f"n-{i}", description=_sentence(rng, 5),
            content=_sentence(rng, 14),
        ).note  # fmt: skip
        assert note is not None
        made.append(note.pk)
    single = get_embedder()
    assert isinstance(single, LocalMiniLM)
    per_core = LocalMiniLM(threads=0)
    single.warm_up()  # each loads its 8-bit session before it is timed
    per_core.warm_up()
    pools = [iter(made[k * NOTES_PER_RUN : (k + 1) * NOTES_PER_RUN]) for k in range(runs)]
    pools.append(iter(made[runs * NOTES_PER_RUN :]))  # the embedder-alone note comes from here
    text = NOTES.text(Note.objects.get(pk=made[0]))

    def embed_alone(i: int) -> int:
        single.embed([text])
        return 1

    def embed_reference(i: int) -> int:
        single.embed_reference([text])
        return 1

    def tasks(pool: int, per_task: int, embedder: LocalMiniLM) -> Callable[[int], int]:
        def one(i: int) -> int:
            ids = [pk for _, pk in zip(range(per_task), pools[pool], strict=False)]
            return NOTES.index(ids, embedder)

        return one

    def queued_one_by_one(pool: int, per_take: int) -> Result:
        """Rows dispatched one at a time while a task is queued (untimed: the writers' side), then
        taken by that task from the pending list (timed: the worker's side), per note."""
        keys = pending_keys(NOTES)
        samples: list[float] = []
        for _ in tqdm(range(NOTES_PER_RUN // per_take), desc="queued one by one", leave=False):
            cache_redis().delete(*keys)
            for pk in [pk for _, pk in zip(range(per_take), pools[pool], strict=False)]:
                dispatch(NOTES, [pk])
            start = time.process_time()
            stored = drain(NOTES)
            samples.extend([(time.process_time() - start) / max(stored, 1)] * max(stored, 1))
        cache_redis().delete(*keys)
        return Result(f"{per_take} notes dispatched one by one, taken by the queued task (memory.indexing.drain)",
                      samples)  # fmt: skip

    alone = _cpu("embedder alone, one short note", embed_alone, repeat=60)
    rows = [
        (alone, None),
        (_cpu("the reference session (float) alone, one short note", embed_reference, repeat=60), alone),
        (_cpu("task, one note per task, 1 thread", tasks(0, 1, single), repeat=NOTES_PER_RUN - 2), alone),
        (_cpu("task, 16 notes per task, 1 thread", tasks(1, 16, single), repeat=NOTES_PER_RUN // 16 - 1), alone),
        (_cpu("task, one note per task, a thread per core", tasks(2, 1, per_core), repeat=NOTES_PER_RUN - 2), alone),
        (
            _cpu("task, 16 notes per task, a thread per core", tasks(3, 16, per_core), repeat=NOTES_PER_RUN // 16 - 1),
            alone,
        ),
        (queued_one_by_one(4, 8), alone),
    ]
    print(
        "\n(CPU time per note in these rows: the p50/p95 columns are CPU milliseconds per note, ops/s is notes per CPU second)"
    )
    print_table("The embedding task, CPU per short note (notes of about 20 words)", rows)


def run(scratch_team_slug: str) -> None:
    from config.celery import app

    settings.EMBEDDER = "local"
    queue = f"{scratch_team_slug}-queue"
    app.conf.task_default_queue = queue  # nothing consumes it; deleted below
    try:
        _recording(scratch_team_slug)
        _embedding(f"{scratch_team_slug}-embed")
    finally:
        with app.connection_for_write() as connection:
            connection.default_channel.queue_delete(queue)  # type: ignore[attr-defined]  # kombu's redis channel
