"""Deletes race the index on a real worker: each note and message is deleted while its embedding
task is in the middle of its work, and every delete must succeed and leave nothing behind.

The worker runs the real tasks with the hashing embedder held at a gate (tests/gated_worker.py):
the test writes an item through the API, waits until the worker announces that it is embedding
that item, then lets the task finish and deletes the item at nearly the same moment, with a
seeded jitter on either side so the delete's and the task's transactions interleave every way.
"""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
from collections import deque

import pytest

from conversations.models import Message, MessageVector
from conversations.services import delete_message
from memory.models import Note, NoteVector, Revision
from memory.services import Actor, delete_note, erase_note
from tests.fixtures import Tenant, run_celery_worker
from tests.gated_worker import gate_client

ITEMS = 200  # notes, and as many messages
IN_FLIGHT = 6  # items written ahead of the one being deleted
WORKER_CONCURRENCY = 4
TASK_LINE = re.compile(
    r"Task (memory\.tasks\.embed_notes|conversations\.tasks\.embed_messages)\[[^]]+\] (succeeded|raised|retry)"
)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_deleting_notes_and_messages_while_they_are_embedded_always_succeeds(tenant: Tenant) -> None:
    prefix = f"gate:{uuid.uuid4().hex[:8]}:"
    gate = gate_client()
    rng = random.Random(20261130)
    actor = Actor(Revision.Actor.OWNER, "race-test")
    failures: list[str] = []
    releases: list[threading.Thread] = []

    with run_celery_worker(
        app="tests.gated_worker", concurrency=WORKER_CONCURRENCY, extra_env={"GATE_PREFIX": prefix}
    ) as worker:
        conversation = tenant.client.post("/api/v1/conversations", {"person": "ada"}, format="json").json()["id"]

        def write(kind: str, i: int) -> int:
            if kind == "n":
                response = tenant.client.post(
                    "/api/v1/tools/remember",
                    {"person": "ada", "key": f"gate-n-{i}", "description": f"Fact {i}",
                     "content": f"Ada's fact gate-n-{i}: she keeps {i} plants on the balcony."},
                    format="json",
                )  # fmt: skip
                assert response.status_code == 200, response.content
            else:
                response = tenant.client.post(
                    f"/api/v1/conversations/{conversation}/messages",
                    {"role": "user", "content": f"Message gate-m-{i}: I watered {i} plants today."},
                    format="json",
                )
                assert response.status_code == 201, response.content
            return response.json()["id"]

        def delete(kind: str, i: int, item_id: int) -> None:
            # Every real delete path: the REST resource, the forget tool, the services the lens,
            # the admin and the curator call.
            try:
                if kind == "n" and i % 4 == 0:
                    response = tenant.client.delete(f"/api/v1/notes/{item_id}")
                    if response.status_code != 200:
                        failures.append(f"DELETE note {item_id}: {response.status_code} {response.content[:300]!r}")
                elif kind == "n" and i % 4 == 1:
                    response = tenant.client.post(
                        "/api/v1/tools/forget_memory", {"person": "ada", "key": f"gate-n-{i}"}, format="json"
                    )
                    if response.status_code != 200:
                        failures.append(f"forget {item_id}: {response.status_code} {response.content[:300]!r}")
                elif kind == "n" and i % 4 == 2:
                    delete_note(note=Note.objects.select_related("bank").get(pk=item_id), actor=actor)
                elif kind == "n":
                    erase_note(note=Note.objects.select_related("bank").get(pk=item_id), actor=actor)
                elif i % 2 == 0:
                    response = tenant.client.delete(f"/api/v1/conversations/{conversation}/messages/{item_id}")
                    if response.status_code != 204:
                        failures.append(f"DELETE message {item_id}: {response.status_code} {response.content[:300]!r}")
                else:
                    delete_message(message=Message.objects.get(pk=item_id))
            except Exception as exc:  # every failure is collected and reported below
                failures.append(f"deleting {kind} {item_id}: {exc!r}")

        def release(token: str) -> None:
            gate.rpush(f"{prefix}go:{token}", 1)

        # Notes and messages alternate, so both kinds of task are in flight together.
        pending = deque((kind, i) for i in range(ITEMS) for kind in ("n", "m"))
        in_flight: dict[str, tuple[str, int, int]] = {}
        deadline = time.monotonic() + 120
        while pending or in_flight:
            while pending and len(in_flight) < IN_FLIGHT:
                kind, i = pending.popleft()
                in_flight[f"gate-{kind}-{i}"] = (kind, i, write(kind, i))
            started = gate.blpop([f"{prefix}started"], timeout=20)
            assert started is not None, f"no embedding task started within 20s:\n{worker.log_text()[-4000:]}"
            kind, i, item_id = in_flight.pop(started[1].decode())
            # The task is mid-embedding now. Let it go on to store its vector at nearly the moment
            # the delete starts: mostly a little after (the delete needs a few ms to reach the
            # database), sometimes before.
            lag = rng.uniform(-0.03, 0.005)
            if lag < 0:
                timer = threading.Timer(-lag, release, args=(f"gate-{kind}-{i}",))
                timer.start()
                releases.append(timer)
            else:
                release(f"gate-{kind}-{i}")
                time.sleep(lag)
            delete(kind, i, item_id)
            assert time.monotonic() < deadline, "the race did not finish within 120s"
        for timer in releases:
            timer.join()

        # Every task has run to its end (succeeded or raised) before the log is judged.
        while len(TASK_LINE.findall(worker.log_text())) < 2 * ITEMS:
            assert worker.process.poll() is None, f"the worker died:\n{worker.log_text()[-4000:]}"
            assert time.monotonic() < deadline, f"tasks still running:\n{worker.log_text()[-4000:]}"
            time.sleep(0.1)
        log = worker.log_text()

    assert failures == []
    assert not Note.objects.filter(team=tenant.team).exists()
    assert not NoteVector.objects.filter(team=tenant.team).exists()
    assert not Message.objects.filter(team=tenant.team).exists()
    assert not MessageVector.objects.filter(team=tenant.team).exists()
    outcomes = [outcome for _, outcome in TASK_LINE.findall(log)]
    assert outcomes == ["succeeded"] * (2 * ITEMS), [line for line in log.splitlines() if "raised" in line][:5]
    assert "IntegrityError" not in log
    assert "Traceback" not in log
