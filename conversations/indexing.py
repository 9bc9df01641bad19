"""The message index: which messages need vectors, embedding them, and the reconciler.

Mirrors memory.indexing. `record_message` calls `schedule`; the embedding runs after commit in a
Celery task, and the reconciler (beat and `manage.py reindex`) repairs whatever a failed or
skipped task left: messages with no vector, or only a vector of another model or width. A
message's text never changes, so a vector is current as long as its model and width are.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import numpy as np
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet

from conversations.models import Message, MessageVector
from memory.embedders import Embedder, EmbeddingUnavailable, get_embedder
from memory.indexing import ReconcileReport, namespace_for

logger = logging.getLogger(__name__)


def stale_messages(embedder: Embedder | None = None, messages: QuerySet[Message] | None = None) -> QuerySet[Message]:
    """Messages without a vector of the current model and width."""
    embedder = embedder or get_embedder()
    messages = Message.objects.all() if messages is None else messages
    if embedder is None:
        return messages.none()
    current = MessageVector.objects.filter(
        message=OuterRef("pk"), team=OuterRef("team"), model=embedder.model, dim=embedder.dim
    )
    return messages.filter(~Exists(current))


def schedule(message_id: int) -> None:
    """Index this message after the surrounding transaction commits (a no-op without an embedder)."""
    if get_embedder() is None:
        return
    transaction.on_commit(lambda: dispatch([message_id]), robust=True)


def dispatch(message_ids: list[int]) -> None:
    from conversations.tasks import embed_messages

    embed_messages.delay(message_ids)


def index_messages(message_ids: Iterable[int], embedder: Embedder | None = None) -> int:
    """Embed the given messages that need it, in one batch; safe to run twice. Returns how many
    vectors were stored.

    A message deleted (or its text changed) while it was being embedded gets nothing (see
    store_if_current). Raises EmbeddingUnavailable when the embedder fails; nothing is written then.
    """
    embedder = embedder or get_embedder()
    if embedder is None:
        return 0
    messages = list(
        stale_messages(embedder, Message.objects.filter(pk__in=list(message_ids)))
        .only("pk", "team_id", "content")
        .order_by("pk")
    )
    if not messages:
        return 0
    vectors = embedder.embed([message.content for message in messages])
    return sum(
        store_if_current(message, vector=vector, embedder=embedder)
        for message, vector in zip(messages, vectors, strict=True)
    )


def store_if_current(message: Message, *, vector: np.ndarray, embedder: Embedder) -> bool:
    """Store a message's vector if the message still exists with the text that was embedded.

    As memory.indexing.store_if_current: the row is locked and re-read first, so a delete either
    committed before (nothing is stored) or waits and removes the vector with the message; one
    message per transaction, so the task never waits while holding another row. A message's text
    does not change today; comparing it keeps an erased or rewritten message from getting the
    vector of what it used to say.
    """
    with transaction.atomic():
        current = (
            Message.objects.select_for_update(no_key=True, of=("self",))
            .filter(pk=message.pk)
            .only("pk", "team_id", "content")
            .order_by("pk")
            .first()
        )
        if current is None or current.content != message.content:
            return False
        row = MessageVector(
            team_id=current.team_id,
            message_id=current.pk,
            namespace=namespace_for(current.team_id),
            model=embedder.model,
            dim=embedder.dim,
            embedding=vector,
        )
        MessageVector.objects.bulk_create(
            [row],
            update_conflicts=True,
            unique_fields=["team", "message", "model"],
            update_fields=["namespace", "dim", "embedding", "created_at"],
        )
        # Vectors of other models are invisible to queries; drop them once a current one exists.
        MessageVector.objects.filter(message_id=current.pk).exclude(model=embedder.model).delete()
    return True


def reconcile(
    *, batch_size: int = 64, limit: int | None = None, progress: Callable[[int], None] | None = None
) -> ReconcileReport:
    """Find and embed every stale message, in batches. Stops at the first embedder failure and says so."""
    embedder = get_embedder()
    if embedder is None:
        return ReconcileReport(0, 0, 0, "no embedder is configured (EMBEDDER=none)")
    pending = list(stale_messages(embedder).order_by("pk").values_list("pk", flat=True)[:limit])
    indexed = 0
    for start in range(0, len(pending), batch_size):
        batch = pending[start : start + batch_size]
        try:
            indexed += index_messages(batch, embedder)
        except EmbeddingUnavailable as exc:
            logger.warning("message reindex stopped after %s messages: %s", indexed, exc)
            return ReconcileReport(len(pending), indexed, len(pending) - start, str(exc))
        if progress is not None:
            progress(len(batch))
    return ReconcileReport(len(pending), indexed, 0)
