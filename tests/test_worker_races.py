"""Deletes race the index on a real worker: each note and message is deleted while its embedding
task is in the middle of its work, and every delete must succeed and leave nothing behind.

The worker runs the real tasks with the hashing embedder held at a gate (tests/support/gated_worker.py):
the test writes an item through the write path, waits until the worker announces that it is
embedding that item, then lets the task finish and deletes the item at nearly the same moment,
with a seeded jitter on either side so the delete's and the task's transactions interleave every
way. One item in five is let finish before its delete starts, and one in five is deleted before
its task goes on: both orders then happen on every run, however a busy machine skews the timing
of the others.
Several lanes (threads, each with its own connection and API client) run at once, so deletes of
notes and of messages also overlap each other and several tasks are in flight.
"""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
from collections import deque
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from accounts.services import get_or_create_person
from config.celery import app
from conversations.models import Conversation, Message, MessageVector
from conversations.services import erase_message, record_message
from memory.models import Note, NoteVector, Revision
from memory.services import Actor, delete_note, erase_note, remember
from tests.conftest import TEST_QUEUE
from tests.support.fixtures import Tenant, run_celery_worker
from tests.support.gated_worker import gate_client

ITEMS = 200  # notes, and as many messages
LANES_PER_KIND = 4  # lanes of notes, and as many of messages; each a thread
IN_FLIGHT = 3  # items of a lane written ahead of the one being deleted
WORKER_CONCURRENCY = 8  # prefork processes: every lane has a task mid-embedding at once
DEADLINE = 150  # seconds for the whole race, which takes 15-35 on a busy 2-core machine
TASK_LINE = re.compile(
    r"Task (memory\.tasks\.embed_notes|conversations\.tasks\.embed_messages)\[[^]]+\] (succeeded|raised|retry)"
    r"(?: in [\d.e-]+s: (\d+))?"  # a task's result: how many vectors it stored
)
ORDERED_EVERY = 5  # item i with i % 5 == 0 lets its task store first; i % 5 == 1 is deleted first
STORE_WAIT = 20  # seconds a lane waits for a task let go first to store its vector


def _api(tenant: Tenant) -> APIClient:
    client = APIClient()  # one per lane: lanes are threads
    # A server error is a 500 response here, as a caller would see it; raising it instead would
    # also raise it in another lane's client (the test client's signal is process-wide).
    client.raise_request_exception = False
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant.key.plaintext}")
    return client


def _problem(response, expected: int) -> str:
    return "" if response.status_code == expected else f"{response.status_code} {response.content[:300]!r}"


class Lane:
    """Writes items one after another and deletes each one while the worker is embedding it."""

    def __init__(self, name: str, *, tenant: Tenant, prefix: str, items: range) -> None:
        self.name, self.tenant, self.prefix, self.items = name, tenant, prefix, items
        self.api = _api(tenant)
        self.rng = random.Random(name)
        self.gate = gate_client()
        self.failures: list[str] = []
        self.releases: list[threading.Timer] = []
        self.in_flight: dict[str, tuple[int, int]] = {}  # gate token -> (item number, id)

    def write(self, i: int, token: str) -> int:
        raise NotImplementedError

    def delete(self, i: int, token: str, item_id: int) -> str:
        """Delete by one of the real paths; return what went wrong, or ''."""
        raise NotImplementedError

    def stored(self, item_id: int) -> bool:
        """Whether the item's vector has been stored."""
        raise NotImplementedError

    def release(self, token: str) -> None:
        self.gate.rpush(f"{self.prefix}go:{token}", 1)

    def release_and_wait_until_stored(self, token: str, item_id: int) -> None:
        self.release(token)
        waited_until = time.monotonic() + STORE_WAIT
        while not self.stored(item_id):
            if time.monotonic() > waited_until:
                raise AssertionError(f"the task of {token} let go first stored no vector within {STORE_WAIT}s")
            time.sleep(0.005)

    def run(self, deadline: float) -> None:
        try:
            self._run(deadline)
        except Exception as exc:  # reported by the test, with everything else that failed
            self.failures.append(f"lane {self.name} stopped: {exc!r}")
            for token in self.in_flight:  # let the tasks held at the gate finish
                self.release(token)
        finally:
            for timer in self.releases:
                timer.join()
            connection.close()  # this thread's connection to the test database

    def _run(self, deadline: float) -> None:
        pending = deque(self.items)
        while pending or self.in_flight:
            while pending and len(self.in_flight) < IN_FLIGHT:
                i = pending.popleft()
                token = f"gate-{self.name}-{i}"
                self.in_flight[token] = (i, self.write(i, token))
            started = self.gate.blpop([f"{self.prefix}started:{self.name}"], timeout=20)
            if started is None:
                raise AssertionError(f"no embedding task of lane {self.name} started within 20s")
            token = started[1].decode() if isinstance(started[1], bytes) else started[1]
            i, item_id = self.in_flight.pop(token)
            # The task is mid-embedding now.
            order = i % ORDERED_EVERY
            if order == 0:  # its vector is stored, and the delete must take it with the row
                self.release_and_wait_until_stored(token, item_id)
            elif order > 1:
                # Let it go on to store its vector at nearly the moment the delete starts: mostly a
                # little after (the delete needs a few ms to reach the database), sometimes before.
                lag = self.rng.uniform(-0.03, 0.005)
                if lag < 0:
                    timer = threading.Timer(-lag, self.release, args=(token,))
                    timer.start()
                    self.releases.append(timer)
                else:
                    self.release(token)
                    time.sleep(lag)
            try:
                problem = self.delete(i, token, item_id)
            except Exception as exc:  # every failed delete is collected and reported
                problem = repr(exc)
            if order == 1:  # deleted first: the task must find the row gone (or blank) and store nothing
                self.release(token)
            if problem:
                self.failures.append(f"deleting {token} (id {item_id}): {problem}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the race did not finish within {DEADLINE}s")


class NoteLane(Lane):
    actor = Actor(Revision.Actor.AGENT, "race-test")

    def __init__(self, name: str, **kwargs) -> None:
        super().__init__(name, **kwargs)
        self.person = get_or_create_person(team=self.tenant.team, external_id=name)

    def write(self, i: int, token: str) -> int:
        # The write path itself (the API adds only parsing, and CPU this test spends better on races).
        result = remember(
            team=self.tenant.team, person=self.person, actor=self.actor, key=token, description=f"Fact {i}",
            content=f"A fact, {token}: they keep {i} plants on the balcony.",
        )  # fmt: skip
        assert result.action == "created"
        assert result.note is not None
        return result.note.pk

    def stored(self, item_id: int) -> bool:
        return NoteVector.objects.filter(note_id=item_id).exists()

    def delete(self, i: int, token: str, item_id: int) -> str:
        # The REST resource, the agent's forget tool, and the services that the lens (erase),
        # the admin and the curator call.
        if i % 4 == 0:
            return _problem(self.api.delete(f"/api/v1/notes/{item_id}"), 200)
        if i % 4 == 1:
            response = self.api.post("/api/v1/tools/forget_memory", {"person": self.name, "key": token}, format="json")
            return _problem(response, 200)
        service = delete_note if i % 4 == 2 else erase_note
        service(note=Note.objects.select_related("bank").get(pk=item_id), actor=self.actor)
        return ""


class MessageLane(Lane):
    def __init__(self, name: str, **kwargs) -> None:
        super().__init__(name, **kwargs)
        response = self.api.post("/api/v1/conversations", {"person": name}, format="json")
        self.conversation = Conversation.objects.get(pk=response.json()["id"])

    def write(self, i: int, token: str) -> int:
        content = f"Message {token}: I watered {i} plants today."
        return record_message(conversation=self.conversation, role="user", content=content).pk

    def stored(self, item_id: int) -> bool:
        return MessageVector.objects.filter(message_id=item_id).exists()

    def delete(self, i: int, token: str, item_id: int) -> str:
        # The REST resource, and the service the message erasure will build on.
        if i % 2 == 0:
            return _problem(self.api.delete(f"/api/v1/conversations/{self.conversation.pk}/messages/{item_id}"), 204)
        erase_message(message=Message.objects.get(pk=item_id))
        return ""


def _nothing_left_queued() -> None:
    """Drop what earlier tests of this run queued for embedding and no worker ran: this test's
    worker would run it too, and the log's task lines would no longer be the lanes' alone (CI once
    counted 401). The test queue is purged here; the models' pending lists and this process's outbox
    are empty already (every test starts that way: tests/conftest.py)."""
    with app.connection_for_write() as broker:
        channel: Any = broker.default_channel  # kombu's virtual channel (typed as the bare protocol)
        channel.queue_purge(TEST_QUEUE)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_deleting_notes_and_messages_while_they_are_embedded_always_succeeds(
    tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One task per row (no pending lists): each task's log line then tells how its row's race went.
    monkeypatch.setattr("memory.indexing.COALESCE", False)
    prefix = f"gate:{uuid.uuid4().hex[:8]}:"
    share = ITEMS // LANES_PER_KIND
    lanes: list[Lane] = []
    for n in range(LANES_PER_KIND):
        items = range(n * share, (n + 1) * share)
        lanes.append(NoteLane(f"note{chr(97 + n)}", tenant=tenant, prefix=prefix, items=items))
        lanes.append(MessageLane(f"chat{chr(97 + n)}", tenant=tenant, prefix=prefix, items=items))
    _nothing_left_queued()

    with run_celery_worker(
        app="tests.support.gated_worker", concurrency=WORKER_CONCURRENCY, extra_env={"GATE_PREFIX": prefix}
    ) as worker:
        deadline = time.monotonic() + DEADLINE
        threads = [threading.Thread(target=lane.run, args=(deadline,)) for lane in lanes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stopped = [failure for lane in lanes for failure in lane.failures if failure.startswith("lane")]
        assert stopped == [], f"{stopped}\n{worker.log_text()[-4000:]}"
        # Every task has run to its end (succeeded or raised) before the log is judged.
        while len(TASK_LINE.findall(worker.log_text())) < 2 * ITEMS:
            assert worker.process.poll() is None, f"the worker died:\n{worker.log_text()[-4000:]}"
            assert time.monotonic() < deadline, f"tasks still running:\n{worker.log_text()[-4000:]}"
            time.sleep(0.1)
        log = worker.log_text()

    assert [failure for lane in lanes for failure in lane.failures] == []
    assert not Note.objects.filter(team=tenant.team).exists()
    assert not NoteVector.objects.filter(team=tenant.team).exists()
    assert not Message.objects.filter(team=tenant.team).exclude(content="").exists()  # tombstones only
    assert not MessageVector.objects.filter(team=tenant.team).exists()
    tasks = TASK_LINE.findall(log)
    assert [outcome for _, outcome, _ in tasks] == ["succeeded"] * (2 * ITEMS), [
        line for line in log.splitlines() if "raised" in line
    ][:5]
    assert "IntegrityError" not in log
    assert "Traceback" not in log
    # The race went both ways for both kinds: the tasks let go first (and perhaps others) stored
    # their vector before the delete took the row, and the delete removed it; the tasks of the items
    # deleted first (and perhaps others) found the row gone and stored nothing.
    ordered = ITEMS // ORDERED_EVERY
    for task in ("memory.tasks.embed_notes", "conversations.tasks.embed_messages"):
        stored = [int(count) for name, _, count in tasks if name == task]
        assert len(stored) == ITEMS, (task, len(stored))
        assert stored.count(1) >= ordered, (task, stored.count(1))
        assert stored.count(0) >= ordered, (task, stored.count(0))
