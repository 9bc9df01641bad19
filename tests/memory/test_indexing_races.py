"""The note index never races deletes and edits: a note deleted or rewritten while its text is
being embedded gets no vector (and the task raises nothing), an older task cannot overwrite the
vector of newer text, a delete that meets an index write waits for it and takes the vector with
it, and a vector of other text is never used.

Each race is made deterministic: the concurrent change runs on a second connection at a chosen
point (inside the embedder, or while the other side holds its row lock), see tests/support/concurrency.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from memory.embedders import HashingEmbedder
from memory.indexing import NOTES
from memory.models import Note, NoteVector
from memory.services import delete_note, edit_note, erase_note, forget, remember
from memory.vectors import similarities
from tests.support.concurrency import (
    Background,
    MidEmbed,
    OpenTransaction,
    commit_once_blocked,
    on_other_connection,
    wait_until_blocked_on_a_lock,
)
from tests.support.factories import note_fields, written

# Writes here commit for real; their after-commit indexing goes nowhere, the tests index themselves.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_broker")]


def write(tenant, person, actor, **fields) -> Note:
    return written(remember(team=tenant.team, person=person, actor=actor, **note_fields(**fields)))


def fresh(note: Note) -> Note:
    return Note.objects.select_related("bank").get(pk=note.pk)


def stored_vector(note: Note) -> np.ndarray:
    return np.array(NoteVector.objects.get(note_id=note.pk).embedding, dtype=np.float32)


def test_a_note_deleted_while_it_is_embedded_gets_no_vector_and_nothing_raises(tenant, person, actor):
    note = write(tenant, person, actor)
    embedder = MidEmbed(lambda: on_other_connection(lambda: delete_note(note=fresh(note), actor=actor)))

    assert NOTES.index([note.pk], embedder) == 0

    assert embedder.during is None  # the delete did happen mid-embedding
    assert not Note.objects.filter(pk=note.pk).exists()
    assert not NoteVector.objects.exists()


def test_a_delete_still_in_progress_when_the_vector_is_stored_wins_and_nothing_raises(tenant, person, actor):
    """The task reaches its write while a delete holds the note: it waits for the delete to commit,
    then finds the note gone. (Before the fix this was the worker's IntegrityError.)"""
    note = write(tenant, person, actor)
    committed = []

    def delete_and_hold_until_the_task_waits() -> None:
        deleting = OpenTransaction(lambda: delete_note(note=fresh(note), actor=actor))
        committed.append(commit_once_blocked(deleting))

    assert NOTES.index([note.pk], MidEmbed(delete_and_hold_until_the_task_waits)) == 0

    committed[0].result()  # the delete committed, after the task had waited for it
    assert not Note.objects.filter(pk=note.pk).exists()
    assert not NoteVector.objects.exists()


@pytest.mark.parametrize("path", ["delete_note", "forget", "erase_note"])
def test_a_delete_that_meets_an_index_write_in_progress_waits_and_takes_the_vector_with_it(tenant, person, actor, path):
    """The task is storing the vector (row locked, not committed) when the delete starts: the delete
    waits, then removes the vector with the note. (Before the fix the delete failed: a 500.)"""
    note = write(tenant, person, actor)
    embedder = HashingEmbedder()
    vector = embedder.embed([NOTES.text(note)])[0]
    storing = OpenTransaction(lambda: NOTES.store_if_current(note, vector=vector, embedder=embedder))

    deleting = {
        "delete_note": lambda: on_other_connection(lambda: delete_note(note=fresh(note), actor=actor)),
        "forget": lambda: on_other_connection(
            lambda: forget(team=tenant.team, person=person, actor=actor, key=note.key)
        ),
        "erase_note": lambda: on_other_connection(lambda: erase_note(note=fresh(note), actor=actor)),
    }[path]
    delete = Background(deleting)
    wait_until_blocked_on_a_lock()  # the delete waits for the task's lock on the note
    assert storing.commit() is True  # the task stored its vector and committed
    delete.result()  # and the delete then succeeded

    assert not Note.objects.filter(pk=note.pk).exists()
    assert not NoteVector.objects.exists()


def test_a_vector_of_the_text_before_an_edit_is_not_stored(tenant, person, actor):
    note = write(tenant, person, actor, content="Ada lives in Oslo.")

    def rewrite() -> None:
        edit_note(note=fresh(note), actor=actor, mode="replace", content="Ada moved to Bergen.")

    assert NOTES.index([note.pk], MidEmbed(lambda: on_other_connection(rewrite))) == 0
    assert not NoteVector.objects.exists()
    # The edit's own indexing (scheduled on its commit) stores the vector of the new text.
    assert list(NOTES.stale()) == [fresh(note)]
    assert NOTES.index([note.pk]) == 1
    assert NoteVector.objects.get().text_hash == NOTES.text_hash(fresh(note))
    assert "Bergen" in NOTES.text(fresh(note))


def test_an_older_task_cannot_overwrite_the_vector_of_newer_text(tenant, person, actor):
    note = write(tenant, person, actor, content="Ada lives in Oslo.")

    def newer_edit_indexed_first() -> None:
        edit_note(note=fresh(note), actor=actor, mode="replace", content="Ada moved to Bergen.")
        assert NOTES.index([note.pk]) == 1  # the newer task runs to its end first

    embedder = MidEmbed(lambda: on_other_connection(newer_edit_indexed_first))

    assert NOTES.index([note.pk], embedder) == 0  # the older task finishes last, and stores nothing

    current = fresh(note)
    vector = NoteVector.objects.get(note=current)
    assert vector.text_hash == NOTES.text_hash(current)
    assert np.allclose(stored_vector(current), HashingEmbedder().embed([NOTES.text(current)])[0])
    assert not NOTES.stale().exists()


def test_an_edit_waits_for_an_index_write_in_progress_and_its_text_is_indexed_next(tenant, person, actor):
    """The task is storing the vector of the old text when the edit starts: the edit waits for it,
    and the vector of the old text is then stale (invisible), until the edit's own task runs."""
    note = write(tenant, person, actor, content="Ada lives in Oslo.")
    embedder = HashingEmbedder()
    old_vector = embedder.embed([NOTES.text(note)])[0]
    storing = OpenTransaction(lambda: NOTES.store_if_current(note, vector=old_vector, embedder=embedder))
    editing = Background(
        lambda: edit_note(note=fresh(note), actor=actor, mode="replace", content="Ada moved to Bergen.")
    )
    wait_until_blocked_on_a_lock()
    assert storing.commit() is True
    editing.result()

    current = fresh(note)
    assert similarities(team=tenant.team, notes=[current], query="Oslo Bergen").scores == {}
    assert list(NOTES.stale()) == [current]
    assert NOTES.index([note.pk]) == 1
    assert set(similarities(team=tenant.team, notes=[current], query="Bergen").scores) == {note.pk}


def test_a_vector_of_other_text_is_never_used_by_queries(tenant, person, actor):
    note = write(tenant, person, actor, content="Ada lives in Oslo.")
    assert NOTES.index([note.pk]) == 1
    assert set(similarities(team=tenant.team, notes=[fresh(note)], query="Oslo").scores) == {note.pk}

    # The text changed and its vector has not been recomputed yet (the edit's task is pending).
    Note.objects.filter(pk=note.pk).update(content="Ada moved to Bergen.")
    assert similarities(team=tenant.team, notes=[fresh(note)], query="Oslo").scores == {}
    assert similarities(team=tenant.team, notes=[fresh(note)], query="Bergen").scores == {}


@pytest.mark.parametrize(
    "content",
    ["Plain text.", "Zoë naïve café — 東京 🚀", "two\nlines\r\nand a tab\t", "quote ' and backslash \\ and %s"],
)
def test_the_stored_hash_and_the_reconcilers_hash_agree(tenant, person, actor, content):
    """Queries compare a vector's hash with the note's in Python, the reconciler in SQL: they
    must agree, or a current vector would look stale (or a stale one current)."""
    note = write(tenant, person, actor, description="A note with awkward text", content=content)
    assert NOTES.index([note.pk]) == 1
    assert NoteVector.objects.get().text_hash == NOTES.text_hash(fresh(note))
    assert not NOTES.stale().exists()
