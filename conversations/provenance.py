"""Provenance: which messages (and turns) each note came from, checked and recorded.

The curator cites the messages of its pass; a tool write may name the calling agent's messages
with the person, and the turn it is written during. memory.provenance reaches the tool side of this
through the resolver registered in ConversationsConfig.ready.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import transaction
from django.db.models import QuerySet
from django.urls import reverse
from django.utils.text import Truncator

from conversations.models import Message, NoteSource, Turn
from conversations.queries import messages_between
from conversations.services import erase_messages
from memory.exceptions import UnknownSource
from memory.models import Note
from memory.provenance import ErasedSources, Origin, Recorder, SourceRequest

logger = logging.getLogger(__name__)

SOURCES_MAX = 50  # messages one write may name


def resolve_tool_sources(request: SourceRequest) -> Recorder:
    """Check the sources a tool call names: only the calling agent's messages with this person (not
    erased), and only a turn of theirs. Refuses with the first id that is not."""
    ids = list(dict.fromkeys(request.message_ids))
    if len(ids) > SOURCES_MAX:
        raise UnknownSource(
            f"source_messages names {len(ids)} messages; at most {SOURCES_MAX} may be named.", field="source_messages"
        )
    known = set(
        messages_between(request.agent, request.person)
        .filter(pk__in=ids, erased_at__isnull=True)
        .values_list("pk", flat=True)
    )
    for index, message_id in enumerate(ids):
        if message_id not in known:
            raise UnknownSource(
                f"source_messages[{index}]: message {message_id} is not one of your messages with this person. "
                "Name ids from recent_messages or search_conversation; nothing was written.",
                field=f"source_messages[{index}]",
            )
    turn = None
    if request.turn_id is not None:
        turn = Turn.objects.filter(
            team_id=request.team.pk,
            conversation__agent=request.agent,
            conversation__person=request.person,
            pk=request.turn_id,
        ).first()
        if turn is None:
            raise UnknownSource(
                f"turn {request.turn_id} is not one of your turns with this person; nothing was written.", field="turn"
            )

    def record(note: Note) -> None:
        record_note_sources(note=note, message_ids=ids, turn=turn)

    return record


@transaction.atomic
def record_note_sources(*, note: Note, message_ids: Iterable[int], turn: Turn | None = None) -> None:
    """Add sources to a note (a correction learned from a later message adds that one). Callers
    check the ids; naming one twice is harmless."""
    rows = [NoteSource(team_id=note.team_id, note=note, message_id=pk) for pk in dict.fromkeys(message_ids)]
    if turn is not None:
        rows.append(NoteSource(team_id=note.team_id, note=note, turn=turn))
    NoteSource.objects.bulk_create(rows, ignore_conflicts=True)


def carry_note_sources(*, keep: Note, absorb: list[Note]) -> None:
    """A merged note keeps where the notes folded into it came from."""
    rows = NoteSource.objects.filter(team_id=keep.team_id, note__in=absorb)
    NoteSource.objects.bulk_create(
        [NoteSource(team_id=keep.team_id, note=keep, message_id=r.message_id, turn_id=r.turn_id) for r in rows],
        ignore_conflicts=True,
    )


def cited_messages(*, cited: list[int], read: list[Message], what: str) -> list[int]:
    """The messages a curator operation rests on: the ids it cites that the pass read (others are
    logged and ignored), or every message the pass read when it cites none of them."""
    readable = {m.pk for m in read}
    valid = [pk for pk in dict.fromkeys(cited) if pk in readable]
    if len(valid) != len(set(cited)):
        logger.info("curator operation %s cited messages outside its pass, ignored: %s", what,
                    sorted(set(cited) - readable))  # fmt: skip
    return valid or [m.pk for m in read]


def source_messages(note: Note) -> list[Message]:
    """The messages a note was learned from, oldest first (tombstones included), with their conversations."""
    return list(
        Message.objects.filter(team_id=note.team_id, derived__note=note)
        .select_related("conversation", "conversation__agent")
        .order_by("created_at", "pk")
        .distinct()
    )


QUOTE_CHARS = 160


class ConversationProvenance:
    """What memory.provenance asks of conversations (registered in ConversationsConfig.ready)."""

    def resolve(self, request: SourceRequest) -> Recorder:
        return resolve_tool_sources(request)

    def origins(self, note: Note) -> list[Origin]:
        rows = (
            NoteSource.objects.filter(team_id=note.team_id, note=note)
            .select_related("message__conversation__agent", "turn__message__conversation__agent")
            .order_by("created_at", "pk")
        )
        found: list[Origin] = []
        for row in rows:
            message = row.message if row.message is not None else row.turn.message if row.turn else None
            if message is None:
                continue
            url = reverse("lens-conversation", args=[message.conversation_id]) + f"#message-{message.pk}"
            found.append(
                Origin(
                    when=message.created_at,
                    role="person" if message.role == Message.Role.USER else "agent",
                    agent=message.conversation.agent.name,
                    quote=Truncator(message.content).chars(QUOTE_CHARS),
                    url=url,
                    erased=message.is_erased,
                    during_turn=row.message is None,
                )
            )
        found.sort(key=lambda origin: origin.when)
        return found

    def source_count(self, note: Note) -> int:
        return _sources_of(note).count()

    def record_kept(self, note: Note, message_ids: list[int], turn_id: int | None) -> None:
        kept = list(
            Message.objects.filter(team_id=note.team_id, pk__in=message_ids, erased_at__isnull=True).values_list(
                "pk", flat=True
            )
        )
        turn = Turn.objects.filter(team_id=note.team_id, pk=turn_id).first() if turn_id is not None else None
        record_note_sources(note=note, message_ids=kept, turn=turn)

    def message_origins(self, team_id: int, message_ids: list[int]) -> dict[int, Origin]:
        rows = Message.objects.filter(team_id=team_id, pk__in=message_ids).select_related("conversation__agent")
        return {
            message.pk: Origin(
                when=message.created_at,
                role="person" if message.role == Message.Role.USER else "agent",
                agent=message.conversation.agent.name,
                quote="" if message.is_erased else Truncator(message.content).chars(QUOTE_CHARS),
                url=reverse("lens-conversation", args=[message.conversation_id]) + f"#message-{message.pk}",
                erased=message.is_erased,
            )
            for message in rows
        }

    def erase_sources(self, note: Note) -> ErasedSources:
        erased = erase_messages(team=note.team, message_ids=list(_sources_of(note).values_list("pk", flat=True)))
        return ErasedSources(messages=erased.messages, summaries=erased.summaries)


def _sources_of(note: Note) -> QuerySet[Message]:
    return Message.objects.filter(team_id=note.team_id, derived__note=note, erased_at__isnull=True).distinct()
