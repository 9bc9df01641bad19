"""Messages in the vector index (memory.indexing): the meaning half of the conversation search.

Registered from ConversationsConfig.ready. `record_message` calls `MESSAGES.schedule`; the
embedding runs after commit in conversations.tasks.embed_messages. With SEARCH_PASSAGES on, a long
message is embedded as its head (its MessageVector) and as its windows (conversations.passages:
MessagePassage rows), in the same batch; the windows are stored first, so a message with a current
vector has them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Length

from config.prepared import statement_cursor
from conversations.models import Message, MessagePassage, MessageVector
from conversations.passages import PASSAGE_FROM, passage_windows
from memory.embedders import Embedder, get_embedder
from memory.indexing import IndexedModel, vector_text


def windows_of(content: str) -> list[tuple[int, int]]:
    """The windows a message is embedded as (conversations.passages), none while SEARCH_PASSAGES is off."""
    return passage_windows(content) if settings.SEARCH_PASSAGES else []


@dataclass(frozen=True)
class MessageIndex(IndexedModel):
    """IndexedModel for messages: a long message's windows are embedded with its head."""

    def stale(self, embedder: Embedder | None = None, rows: QuerySet[Any] | None = None) -> QuerySet[Any]:
        """IndexedModel.stale, and the long messages with a vector but no windows of its model
        (embedded before messages had windows): the reconciler gives them theirs."""
        embedder = embedder or get_embedder()
        stale = super().stale(embedder, rows)
        if embedder is None or not settings.SEARCH_PASSAGES:
            return stale
        rows = (self.model._default_manager.all() if rows is None else rows).exclude(erased_at__isnull=False)
        windows = MessagePassage.objects.filter(message=OuterRef("pk"), model=embedder.model, dim=embedder.dim)
        unwindowed = rows.annotate(chars=Length("content")).filter(chars__gt=PASSAGE_FROM).filter(~Exists(windows))
        return rows.filter(Q(pk__in=stale.values("pk")) | Q(pk__in=unwindowed.values("pk")))

    def _stale_rows(self, ids: list[int], embedder: Embedder) -> list[models.Model]:
        """IndexedModel._stale_rows, and the long messages of `ids` with a vector but no windows."""
        stale = super()._stale_rows(ids, embedder)
        found = {row.pk for row in stale}
        rest = [pk for pk in ids if pk not in found]
        if not rest or not settings.SEARCH_PASSAGES:
            return stale
        windows = MessagePassage.objects.filter(message=OuterRef("pk"), model=embedder.model, dim=embedder.dim)
        unwindowed = list(
            Message.objects.filter(pk__in=rest, erased_at__isnull=True)
            .annotate(chars=Length("content"))
            .filter(chars__gt=PASSAGE_FROM)
            .filter(~Exists(windows))
            .only("id", "team_id", "content")
        )
        return sorted([*stale, *unwindowed], key=lambda row: row.pk)

    def index(self, ids: Iterable[int], embedder: Embedder | None = None) -> int:
        """IndexedModel.index, each long message's windows embedded in the same batch and stored
        before its head; a long message whose windows could not be stored (someone holds it: an
        erasure under way) gets no head either, and stays stale for the next task or the
        reconciler."""
        ids = list(ids)
        if not ids:
            return 0
        embedder = embedder or get_embedder()
        if embedder is None:
            return 0
        rows = self._stale_rows(ids, embedder)
        if not rows:
            return 0
        windows = [windows_of(self.text(row)) for row in rows]
        texts = [self.text(row) for row in rows]
        texts += [self.text(row)[start:end] for row, found in zip(rows, windows, strict=True) for start, end in found]
        vectors = embedder.embed(texts)
        stored = self._store_passages(rows, windows, vectors[len(rows) :], embedder)
        heads = [
            (row, vector)
            for row, found, vector in zip(rows, windows, vectors, strict=False)
            if not found or row.pk in stored
        ]
        if not heads:
            return 0
        return self.store_all_if_current(
            [row for row, _ in heads], vectors=np.stack([vector for _, vector in heads]), embedder=embedder
        )

    def _store_passages(
        self, rows: list[models.Model], windows: list[list[tuple[int, int]]], vectors: np.ndarray, embedder: Embedder
    ) -> set[int]:
        """Replace the windows' vectors of the long messages among `rows` that still hold the text
        embedded and no one else holds (SKIP LOCKED: never waits, so never deadlocks with a writer
        of several messages); returns their ids. Under the rows' lock until commit, so an erasure
        either came first (the text differs: nothing stored) or waits and then drops them."""
        long = [(row, found) for row, found in zip(rows, windows, strict=True) if found]
        if not long:
            return set()
        quote = connection.ops.quote_name
        table = quote(Message._meta.db_table)
        passages = quote(MessagePassage._meta.db_table)
        with transaction.atomic(), statement_cursor() as cursor:
            cursor.execute(
                f"SELECT r.id FROM {table} r JOIN unnest(%s::bigint[], %s::text[]) AS g(id, hash) ON g.id = r.id "
                f"WHERE {self.text_hash_sql('r')} = g.hash FOR NO KEY UPDATE OF r SKIP LOCKED",
                [[row.pk for row, _ in long], [self.text_hash(row) for row, _ in long]],
            )
            held = {int(pk) for (pk,) in cursor.fetchall()}
            if not held:
                return held
            # Every model's: the windows of another model are invisible to the search, as its vectors are.
            cursor.execute(f"DELETE FROM {passages} WHERE message_id = ANY(%s::bigint[])", [sorted(held)])
            given: list[tuple[int, int, int, int, str]] = []
            at = 0
            for row, found in long:
                for start, end in found:
                    if row.pk in held:
                        given.append((row.pk, cast(Message, row).team_id, start, end, vector_text(vectors[at])))
                    at += 1
            message_ids, team_ids, starts, ends, embedded = (list(column) for column in zip(*given, strict=True))
            cursor.execute(
                f'INSERT INTO {passages} (team_id, message_id, start, "end", namespace, model, dim, embedding, embedded_at) '
                "SELECT g.team, g.id, g.start, g.stop, 'team:' || g.team, %s, %s, g.embedding, now() "
                "FROM unnest(%s::bigint[], %s::bigint[], %s::int[], %s::int[], %s::vector[]) AS g(id, team, start, stop, embedding)",
                [embedder.model, embedder.dim, message_ids, team_ids, starts, ends, embedded],
            )
        return held


MESSAGES = MessageIndex(
    label="message",
    model=Message,
    vector_model=MessageVector,
    row_field="message",
    text_fields=("content",),
    task="conversations.tasks.embed_messages",
    # Messages are not edited, so a vector is current as long as its model and width are.
    # store_if_current still compares the text: an erased or rewritten message never gets the
    # vector of what it used to say.
    hashes_text=False,
    skip=Q(erased_at__isnull=False),  # a tombstone has no text to embed
)
