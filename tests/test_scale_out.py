"""More than one of each process on one Postgres and one Redis: two web servers (each started as
`manage.py run` starts its web processes) and two Celery workers, all real processes reaching the
test database and the test run's queue through DATABASE_URL and REDIS_URL.

- concurrent upserts of one key through both web servers leave one note and every revision;
- a conversation that crosses the curator threshold through both is curated exactly once;
- a worker killed with SIGKILL in the middle of a curator pass loses nothing, and the pass is
  applied once (by the other worker, when Redis hands it on after the visibility timeout).
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from conversations.models import Conversation
from curator.models import ProviderCall
from memory.models import Note, Revision
from tests.conftest import TEST_QUEUE
from tests.support.fixtures import (
    LiveServer,
    Tenant,
    WorkerProcess,
    run_celery_worker,
    serve_web,
)
from tests.support.gated_worker import gate_client

pytestmark = pytest.mark.worker

# Seconds before Redis hands a task no worker has acknowledged to another worker. Short for the
# test that kills a worker; a task merely slow to start or finish (a busy machine) would be handed on
# as well and run twice, so the other tests keep the production default (an hour).
VISIBILITY_TIMEOUT = 3
DEADLINE = 40.0
# A pass that ran to its end, with what it said it did ("read 10 messages; applied 2 operation(s)").
CURATE_DONE = re.compile(r"Task curator\.tasks\.curate_conversation\[[^]]+\] succeeded in [\d.e-]+s: '([^']*)'")


@pytest.fixture(scope="module")
def web(django_db_setup: None, django_db_blocker: Any) -> Iterator[list[LiveServer]]:
    """Two web servers (one process each) on the test database; the rate limit out of reach."""
    with ExitStack() as stack, django_db_blocker.unblock():
        yield [stack.enter_context(serve_web(name, API_RATE="1000000/min")) for name in ("scale-a", "scale-b")]


@pytest.fixture
def gate_prefix() -> str:
    return f"gate:{uuid.uuid4().hex[:8]}:"


def _two_workers(gate_prefix: str, **env: str) -> Iterator[list[WorkerProcess]]:
    # Tasks earlier tests left in the run's queue are about rows long gone: start from an empty queue.
    gate_client().delete(TEST_QUEUE)
    with ExitStack() as stack:
        extra_env = {"CURATOR_GATE_PREFIX": gate_prefix, **env}
        yield [
            stack.enter_context(run_celery_worker(app="tests.support.gated_curator", extra_env=extra_env))
            for _ in range(2)
        ]


@pytest.fixture
def workers(transactional_db: None, gate_prefix: str) -> Iterator[list[WorkerProcess]]:
    """Two Celery workers (one process each), with the broker's default visibility timeout."""
    yield from _two_workers(gate_prefix)


@pytest.fixture
def handing_on_workers(transactional_db: None, gate_prefix: str) -> Iterator[list[WorkerProcess]]:
    """Two Celery workers (one process each) that hand a dead worker's tasks on after VISIBILITY_TIMEOUT."""
    yield from _two_workers(gate_prefix, CELERY_VISIBILITY_TIMEOUT=str(VISIBILITY_TIMEOUT))


def _clients(tenant: Tenant, web: list[LiveServer]) -> list[httpx.Client]:
    headers = {"Authorization": f"Bearer {tenant.key.plaintext}"}
    return [httpx.Client(base_url=server.url, headers=headers, timeout=30) for server in web]


def _post(client: httpx.Client, path: str, body: dict[str, Any], expected: int) -> dict[str, Any]:
    response = client.post(path, json=body)
    assert response.status_code == expected, (client.base_url, path, response.status_code, response.text[:300])
    answer: dict[str, Any] = response.json()
    return answer


def _exchange(turn_via: httpx.Client, reply_via: httpx.Client, conversation: int, said: str, answered: str) -> None:
    """One exchange: the person's message as a turn through one server, the reply through the other."""
    body = {"person": "ada", "conversation": conversation, "message": said, "profile": "memory_only"}
    turn = _post(turn_via, "/api/v1/turns", body, 201)["turn"]
    _post(reply_via, f"/api/v1/turns/{turn}/reply", {"content": answered}, 201)


def _wait_for(condition: Any, what: str, workers: list[WorkerProcess]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        for worker in workers:
            assert worker.process.poll() is None, f"a worker died waiting for {what}:\n{worker.log_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE:.0f}s"
        time.sleep(0.05)


def _drain(workers: list[WorkerProcess]) -> None:
    """Return once the run's queue is empty and no worker has a task in hand (every task sent so
    far has run to its end)."""
    from config.celery import app

    queue = gate_client()

    def idle() -> bool:
        if queue.llen(TEST_QUEUE):
            return False
        inspect = app.control.inspect(timeout=1)
        active, reserved = inspect.active() or {}, inspect.reserved() or {}
        return len(active) == len(workers) and not any(active.values()) and not any(reserved.values())

    _wait_for(idle, "an empty queue and idle workers", workers)


@pytest.mark.django_db(transaction=True)
def test_concurrent_upserts_of_one_key_through_two_web_servers_leave_one_note_and_every_revision(
    tenant: Tenant, web: list[LiveServer]
) -> None:
    clients = _clients(tenant, web)
    contents = [f"Lives in city number {i}." for i in range(36)]
    answers: list[dict[str, Any]] = []
    failures: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(12)

    def lane(n: int) -> None:
        client = clients[n % 2]  # half the lanes through each web server
        start.wait()
        for content in contents[n::12]:
            body = {"person": "ada", "key": "home-city", "description": "Where Ada lives", "content": content}
            try:
                answer = _post(client, "/api/v1/tools/remember", body, 200)
            except AssertionError as exc:
                with lock:
                    failures.append(str(exc))
                continue
            with lock:
                answers.append(answer)

    threads = [threading.Thread(target=lane, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    assert sorted(answer["action"] for answer in answers) == ["created"] + ["updated"] * 35
    notes = Note.objects.filter(team=tenant.team, key="home-city")
    assert notes.count() == 1
    note = notes.get()
    assert {answer["id"] for answer in answers} == {note.pk}
    revisions = Revision.objects.filter(team=tenant.team, note_key="home-city").order_by("pk")
    assert [r.action for r in revisions] == [Revision.Action.CREATE] + [Revision.Action.UPDATE] * 35
    before = [(r.before or {}).get("content") for r in revisions]
    after = [(r.after or {}).get("content") for r in revisions]
    assert sorted(map(str, after)) == sorted(contents)
    # Each revision starts from the one before it: no write was lost between two others.
    assert before == [None, *after[:-1]]
    assert note.content == after[-1]


@pytest.mark.django_db(transaction=True)
def test_a_conversation_crossing_the_curator_threshold_through_two_web_servers_is_curated_once(
    tenant: Tenant, web: list[LiveServer], workers: list[WorkerProcess], settings: Any
) -> None:
    assert settings.CURATOR_EVERY_EXCHANGES == 4
    a, b = _clients(tenant, web)
    conversation = _post(a, "/api/v1/conversations", {"person": "ada"}, 201)["id"]
    chat = [("Hi, I'm Ada. I live in Oslo.", "Nice to meet you, Ada!"), ("How are you?", "Well, thanks."),
            ("Any plans?", "A walk, maybe.")]  # fmt: skip
    for n, (said, answered) in enumerate(chat):
        _exchange((a, b)[n % 2], (b, a)[n % 2], conversation, said, answered)

    # The fourth and fifth exchanges arrive at once, one through each server: both cross the threshold.
    start = threading.Barrier(2)
    problems: list[str] = []

    def exchange(client: httpx.Client, n: int) -> None:
        start.wait()
        try:
            _exchange(client, client, conversation, f"Question {n}?", f"Answer {n}.")
        except AssertionError as exc:
            problems.append(str(exc))

    threads = [threading.Thread(target=exchange, args=(client, n)) for n, client in enumerate((a, b))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []

    def curated() -> bool:
        state = Conversation.objects.get(pk=conversation)
        return state.last_curated_at is not None and not state.curation_pending

    _wait_for(curated, "curator pass", workers)
    _drain(workers)  # a second pass, had one been sent, has run by now
    passes = [outcome for worker in workers for outcome in CURATE_DONE.findall(worker.log_text())]
    assert len(passes) == 1, passes
    assert passes[0].startswith("read "), passes
    assert ProviderCall.objects.filter(team=tenant.team, purpose="curate").count() == 1
    assert sorted(Note.objects.filter(team=tenant.team).values_list("key", flat=True)) == ["home-city", "name"]
    assert Revision.objects.filter(team=tenant.team, actor=Revision.Actor.CURATOR).count() == 2
    # The pass read up to where the conversation was when it ran: the 5th exchange may have come after.
    assert 8 <= Conversation.objects.get(pk=conversation).curated_through <= 10


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_in_the_middle_of_a_curator_pass_loses_nothing_and_the_pass_applies_once(
    tenant: Tenant, web: list[LiveServer], handing_on_workers: list[WorkerProcess], gate_prefix: str
) -> None:
    workers = handing_on_workers
    a, b = _clients(tenant, web)
    gate = gate_client()
    conversation = _post(a, "/api/v1/conversations", {"person": "ada"}, 201)["id"]
    gate.set(f"{gate_prefix}armed:{conversation}", 1)
    chat = [("Hi, I'm Ada. I live in Oslo.", "Hello!"), ("I work at Acme.", "Nice."), ("Fine day.", "It is."),
            ("Bye for now.", "Bye!")]  # fmt: skip
    for n, (said, answered) in enumerate(chat):
        _exchange((a, b)[n % 2], (b, a)[n % 2], conversation, said, answered)

    # The pass has applied its first operation inside its transaction and waits at the gate: kill
    # that worker, its parent first (so nothing acknowledges the task), then the process running it.
    held = gate.blpop([f"{gate_prefix}held"], timeout=DEADLINE)
    assert held is not None, [worker.log_text()[-2000:] for worker in workers]
    parent, child = (int(pid) for pid in held[1].split())
    victim = next(worker for worker in workers if worker.process.pid == parent)
    survivor = next(worker for worker in workers if worker is not victim)
    os.kill(parent, signal.SIGKILL)
    os.kill(child, signal.SIGKILL)
    victim.process.wait(timeout=10)
    assert victim.process.returncode == -signal.SIGKILL

    # Nothing of the interrupted pass was committed, and the conversation still waits for it.
    assert not Note.objects.filter(team=tenant.team).exists()
    assert Conversation.objects.get(pk=conversation).curation_pending

    def curated() -> bool:
        return Conversation.objects.get(pk=conversation).last_curated_at is not None

    _wait_for(curated, "the pass handed on to the other worker", [survivor])
    _wait_for(lambda: CURATE_DONE.search(survivor.log_text()), "the pass's outcome in the log", [survivor])
    assert [outcome.split(";")[0] for outcome in CURATE_DONE.findall(survivor.log_text())] == ["read 8 messages"]
    assert sorted(Note.objects.filter(team=tenant.team).values_list("key", flat=True)) == [
        "employer", "home-city", "name",
    ]  # fmt: skip
    revisions = Revision.objects.filter(team=tenant.team, actor=Revision.Actor.CURATOR)
    assert sorted(revisions.values_list("note_key", "action")) == [
        ("employer", "create"), ("home-city", "create"), ("name", "create"),
    ]  # fmt: skip
    state = Conversation.objects.get(pk=conversation)
    assert (state.curated_through, state.curation_pending, state.exchanges_since_curation) == (8, False, 0)
    # Both attempts asked the provider (each call is recorded); only the second one's plan was applied.
    assert ProviderCall.objects.filter(team=tenant.team, purpose="curate").count() == 2
