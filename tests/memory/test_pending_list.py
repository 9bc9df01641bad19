"""What is queued together is embedded together: rows dispatched while a task is queued wait in
the model's pending list, and the task takes them all; none is left without a task to take it."""

from __future__ import annotations

import pytest

from config.redis import cache_redis
from memory import tasks
from memory.embedders import EmbeddingUnavailable
from memory.indexing import NOTES, IndexedModel, dispatch, drain, pending_keys
from memory.models import Note, NoteVector
from memory.services import remember
from tests.support.factories import note_fields, written

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(mocker):
    """The tasks dispatch queues (none runs: the test runs the task body itself)."""
    return mocker.patch.object(tasks.embed_notes, "delay")


def notes(tenant, person, actor, count: int) -> list[Note]:
    return [
        written(remember(team=tenant.team, person=person, actor=actor,
                         **note_fields(key=f"fact-{n}", content=f"Ada keeps {n} goats.")))
        for n in range(count)
    ]  # fmt: skip


def test_rows_dispatched_while_a_task_is_queued_wait_for_it_and_are_embedded_in_one_take(
    tenant, person, actor, queued, no_broker
):
    written_notes = notes(tenant, person, actor, 4)  # (their own after-commit dispatch goes nowhere)
    for note in written_notes:
        dispatch(NOTES, [note.pk])  # as four requests would, one after another

    queued.assert_called_once_with([])  # one task, for all four
    assert tasks.embed_notes.run([]) == 4
    assert set(NoteVector.objects.values_list("note_id", flat=True)) == {note.pk for note in written_notes}
    assert cache_redis().llen(pending_keys(NOTES)[0]) == 0

    # The task cleared the marker: the next row written queues a task of its own.
    dispatch(NOTES, [written_notes[0].pk])
    assert queued.call_count == 2


def test_a_task_queued_for_its_pending_list_alone_reads_the_rows_once_and_stores_them_once(
    tenant, person, actor, queued, no_broker, django_assert_num_queries
):
    written_notes = notes(tenant, person, actor, 3)
    dispatch(NOTES, [note.pk for note in written_notes])
    # Given no rows of its own, the task asks the database nothing for them: one query reads the
    # list's rows with their vectors' hashes, one statement stores the vectors.
    with django_assert_num_queries(2):
        assert tasks.embed_notes.run([]) == 3


def test_a_task_that_cannot_be_queued_leaves_its_rows_for_the_next_one(tenant, person, actor, queued, no_broker):
    first, second = notes(tenant, person, actor, 2)
    queued.side_effect = ConnectionError("the broker is down")
    with pytest.raises(ConnectionError):
        dispatch(NOTES, [first.pk])
    queued.side_effect = None

    dispatch(NOTES, [second.pk])  # not blocked by the failed one's marker

    queued.assert_called_with([])
    assert drain(NOTES) == 2  # the first row was still waiting, and is taken too


def test_rows_the_embedder_could_not_embed_go_back_for_the_retry(tenant, person, actor, queued, mocker, no_broker):
    (note,) = notes(tenant, person, actor, 1)
    dispatch(NOTES, [note.pk])
    mocker.patch.object(IndexedModel, "index", side_effect=EmbeddingUnavailable("the embedder is down"))

    with pytest.raises(EmbeddingUnavailable):
        drain(NOTES)

    assert cache_redis().lrange(pending_keys(NOTES)[0], 0, -1) == [str(note.pk).encode()]
