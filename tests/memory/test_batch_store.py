"""An embedding task stores a batch in one statement: every row gets the vector of its own text,
a row someone holds is stored once they let go, and what the batch replaces or skips is right."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import transaction

from conversations.indexing import MESSAGES
from conversations.models import MessageVector
from conversations.services import erase_message
from memory.embedders import HashingEmbedder
from memory.indexing import NOTES
from memory.models import Note, NoteVector
from memory.services import remember
from tests.support.concurrency import OpenTransaction, commit_once_blocked
from tests.support.factories import chat, note_fields, written

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_broker")]

EMBEDDER = HashingEmbedder(dim=64)


def notes(tenant, person, actor, count: int) -> list[Note]:
    return [
        written(remember(
            team=tenant.team, person=person, actor=actor,
            **note_fields(key=f"fact-{n}", description=f"Fact number {n}", content=f"Ada keeps {n} goats in Voss."),
        ))
        for n in range(count)
    ]  # fmt: skip


def vector_of(note: Note) -> np.ndarray:
    return np.array(NoteVector.objects.get(note_id=note.pk, model=EMBEDDER.model).embedding, dtype=np.float32)


def test_every_note_of_a_batch_gets_the_vector_of_its_own_text(tenant, person, actor):
    batch = notes(tenant, person, actor, 6)

    assert NOTES.index([note.pk for note in reversed(batch)], EMBEDDER) == 6

    for note in batch:
        alone = EMBEDDER.embed([NOTES.text(note)])[0]
        np.testing.assert_allclose(vector_of(note), alone, rtol=1e-6, atol=1e-6)
        stored = NoteVector.objects.get(note=note)
        assert (stored.text_hash, stored.namespace, stored.dim, stored.team_id) == (
            NOTES.text_hash(note), f"team:{tenant.team.pk}", 64, tenant.team.pk,
        )  # fmt: skip
    assert NOTES.index([note.pk for note in batch], EMBEDDER) == 0  # all current: nothing to do twice


def test_a_batch_replaces_vectors_of_other_models_and_of_older_text(tenant, person, actor):
    first, second = notes(tenant, person, actor, 2)
    other = HashingEmbedder(dim=32)
    assert NOTES.index([first.pk], other) == 1
    assert NOTES.index([second.pk], EMBEDDER) == 1
    Note.objects.filter(pk=second.pk).update(content="Ada sold the goats.")

    assert NOTES.index([first.pk, second.pk], EMBEDDER) == 2

    assert list(NoteVector.objects.filter(note=first).values_list("model", flat=True)) == [EMBEDDER.model]
    rewritten = Note.objects.get(pk=second.pk)
    np.testing.assert_allclose(vector_of(rewritten), EMBEDDER.embed([NOTES.text(rewritten)])[0], atol=1e-6)
    assert NoteVector.objects.get(note=second).text_hash == NOTES.text_hash(rewritten)


def test_a_note_held_by_a_writer_is_stored_once_the_writer_commits(tenant, person, actor):
    free, held = notes(tenant, person, actor, 2)
    holding = OpenTransaction(lambda: Note.objects.select_for_update().filter(pk=held.pk).exists())
    releasing = commit_once_blocked(holding)  # the batch skips it, then waits for it alone

    assert NOTES.index([free.pk, held.pk], EMBEDDER) == 2

    assert releasing.result() is True
    assert set(NoteVector.objects.values_list("note_id", flat=True)) == {free.pk, held.pk}


def test_a_note_whose_text_changed_while_it_was_embedded_gets_nothing(tenant, person, actor):
    (note,) = notes(tenant, person, actor, 1)
    before = Note.objects.get(pk=note.pk)
    vectors = EMBEDDER.embed([NOTES.text(before)])
    with transaction.atomic():
        Note.objects.filter(pk=note.pk).update(content="Something else entirely.")

    assert NOTES.store_all_if_current([before], vectors=vectors, embedder=EMBEDDER) == 0
    assert not NoteVector.objects.exists()


def test_every_message_of_a_batch_gets_its_own_vector_and_an_erased_one_none(tenant, conversation):
    said = chat(conversation, [("I moved to Bergen.", "Welcome!"), ("It rains a lot.", "Bring a coat.")])
    erase_message(message=said[1])

    assert MESSAGES.index([message.pk for message in said], EMBEDDER) == 3

    assert not MessageVector.objects.filter(message=said[1]).exists()
    for message in (said[0], *said[2:]):
        stored = np.array(MessageVector.objects.get(message=message).embedding, dtype=np.float32)
        np.testing.assert_allclose(stored, EMBEDDER.embed([message.content])[0], atol=1e-6)
