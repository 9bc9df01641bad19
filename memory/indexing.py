"""The note index: which notes need vectors, embedding them, and the reconciler.

Every writer of a note calls `schedule` (through the write path); the embedding runs after
commit in a Celery task, and the reconciler (beat and `manage.py reindex`) repairs whatever a
failed or skipped task left: notes with no vector, a stale vector (content changed) or a vector
of another model. A task stores a vector only for the text it was computed from, under a lock
on the note that deletes take too (store_if_current), so deletes and edits never race it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
from django.db import transaction
from django.db.models import Exists, Func, OuterRef, QuerySet, TextField, Value
from django.db.models.functions import Concat

from memory.embedders import Embedder, EmbeddingUnavailable, get_embedder
from memory.models import Note, NoteVector

logger = logging.getLogger(__name__)


def namespace_for(team_id: int) -> str:
    return f"team:{team_id}"


def index_text(note: Note) -> str:
    return f"{note.key}\n{note.description}\n{note.content}"


def text_hash(note: Note) -> str:
    return hashlib.sha256(index_text(note).encode()).hexdigest()


class _Sha256Hex(Func):
    # Postgres' built-in sha256() (Django's SHA256 needs the pgcrypto extension instead).
    template = "encode(sha256(convert_to(%(expressions)s, 'UTF8')), 'hex')"
    output_field = TextField()


def _sql_text_hash() -> Func:
    # Must produce exactly text_hash(): sha256 of key, description and content joined by newlines.
    return _Sha256Hex(Concat("key", Value("\n"), "description", Value("\n"), "content", output_field=TextField()))


def stale_notes(embedder: Embedder | None = None, notes: QuerySet[Note] | None = None) -> QuerySet[Note]:
    """Notes without a current vector: none at all, one of another model or width, or one of old text."""
    embedder = embedder or get_embedder()
    notes = Note.objects.all() if notes is None else notes
    if embedder is None:
        return notes.none()
    current = NoteVector.objects.filter(
        note=OuterRef("pk"),
        team=OuterRef("team"),
        model=embedder.model,
        dim=embedder.dim,
        text_hash=OuterRef("indexed_hash"),
    )
    return notes.annotate(indexed_hash=_sql_text_hash()).filter(~Exists(current))


def schedule(note_id: int) -> None:
    """Index this note after the surrounding transaction commits (a no-op without an embedder)."""
    if get_embedder() is None:
        return
    transaction.on_commit(lambda: dispatch([note_id]), robust=True)


def dispatch(note_ids: list[int]) -> None:
    from memory.tasks import embed_notes

    embed_notes.delay(note_ids)


def index_notes(note_ids: Iterable[int], embedder: Embedder | None = None) -> int:
    """Embed the given notes that need it; safe to run twice. Returns how many vectors were stored.

    A note deleted or rewritten while its text was being embedded gets nothing: the vector is
    stored only if the note still holds exactly the text it was computed from (see
    store_if_current). Raises EmbeddingUnavailable when the embedder fails; nothing is written then.
    """
    embedder = embedder or get_embedder()
    if embedder is None:
        return 0
    notes = list(stale_notes(embedder, Note.objects.filter(pk__in=list(note_ids))).order_by("pk"))
    if not notes:
        return 0
    vectors = embedder.embed([index_text(note) for note in notes])
    return sum(
        store_if_current(note, embedded_hash=text_hash(note), vector=vector, embedder=embedder)
        for note, vector in zip(notes, vectors, strict=True)
    )


def store_if_current(note: Note, *, embedded_hash: str, vector: np.ndarray, embedder: Embedder) -> bool:
    """Store a note's vector if the note still exists and still hashes to `embedded_hash`.

    The note's row is locked before it is re-read, and held until the vector is committed. A
    delete (the write path locks the row before Django collects the note's vectors) or an edit
    then either committed first, and we find the row gone or its text changed and store nothing,
    or waits for us, and the delete removes our vector with the note. An older task finishing
    after a newer one finds the newer text and cannot overwrite its vector. One note per
    transaction: the task never holds one note while waiting for another, so it cannot deadlock
    with a writer that removes several notes in one transaction.
    """
    with transaction.atomic():
        current = (
            Note.objects.select_for_update(no_key=True, of=("self",))
            .filter(pk=note.pk)
            .only("pk", "team_id", "key", "description", "content")
            .order_by("pk")
            .first()
        )
        if current is None or text_hash(current) != embedded_hash:
            return False
        row = NoteVector(
            team_id=current.team_id,
            note_id=current.pk,
            namespace=namespace_for(current.team_id),
            model=embedder.model,
            dim=embedder.dim,
            text_hash=embedded_hash,
            embedding=vector,
        )
        NoteVector.objects.bulk_create(
            [row],
            update_conflicts=True,
            unique_fields=["team", "note", "model"],
            update_fields=["namespace", "dim", "text_hash", "embedding", "created_at"],
        )
        # Vectors of other models are invisible to queries; drop them once a current one exists.
        NoteVector.objects.filter(note_id=current.pk).exclude(model=embedder.model).delete()
    return True


@dataclass
class ReconcileReport:
    checked: int
    indexed: int
    failed: int
    error: str = ""


def reconcile(
    *,
    batch_size: int = 64,
    limit: int | None = None,
    progress: Callable[[int], None] | None = None,
    notes: QuerySet[Note] | None = None,
) -> ReconcileReport:
    """Find and fix every stale note (of `notes`, default all), in batches. Stops at the first
    embedder failure and says so."""
    embedder = get_embedder()
    if embedder is None:
        return ReconcileReport(0, 0, 0, "no embedder is configured (EMBEDDER=none)")
    pending = list(stale_notes(embedder, notes).order_by("pk").values_list("pk", flat=True)[:limit])
    indexed = 0
    for start in range(0, len(pending), batch_size):
        batch = pending[start : start + batch_size]
        try:
            indexed += index_notes(batch, embedder)
        except EmbeddingUnavailable as exc:
            logger.warning("reindex stopped after %s notes: %s", indexed, exc)
            return ReconcileReport(len(pending), indexed, len(pending) - start, str(exc))
        if progress is not None:
            progress(len(batch))
    return ReconcileReport(len(pending), indexed, 0)
