"""Writes to the chat of record: conversations, messages and turns."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max, QuerySet, Sum
from django.db.models.functions import Length
from django.utils import timezone

from accounts.models import Agent, Person, Team
from config.text import TextKind, check_text
from conversations.composer import PROFILES, Composition, compose
from conversations.exceptions import ConversationNotFound, InvalidMessage, MessageTooLong, TurnAlreadyAnswered
from conversations.indexing import MESSAGES
from conversations.models import Conversation, Message, Turn
from memory.queries import TurnContext


def start_conversation(*, team: Team, agent: Agent, person: Person, started_at: datetime | None = None) -> Conversation:
    if agent.team_id != team.pk or person.team_id != team.pk:
        raise ConversationNotFound("That agent or person is not known in this team.", field="person")
    return Conversation.objects.create(team=team, agent=agent, person=person, started_at=started_at or timezone.now())


def _check_content(content: str) -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidMessage("A message needs some text.", field="content")
    check_text(content, field="content", kind=TextKind.TEXT, error=InvalidMessage)
    limit = settings.MESSAGE_MAX_CHARS
    if len(content) > limit:
        raise MessageTooLong(
            f"content is {len(content)} characters; the limit for one message is {limit}. Split it; nothing was recorded.",
            field="content",
        )
    return content


@transaction.atomic
def record_message(
    *,
    conversation: Conversation,
    role: str,
    content: str,
    created_at: datetime | None = None,
    external_id: str = "",
) -> Message:
    """Append a message; the conversation row is locked so orders never collide."""
    if role not in Message.Role.values:
        raise InvalidMessage(f"role must be one of {', '.join(Message.Role.values)}.", field="role")
    content = _check_content(content)
    check_text(external_id, field="external_id", kind=TextKind.IDENTIFIER, error=InvalidMessage)
    locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
    last = Message.objects.filter(team_id=locked.team_id, conversation=locked).aggregate(last=Max("order"))["last"] or 0
    message = Message.objects.create(
        team_id=locked.team_id,
        conversation=locked,
        role=role,
        content=content,
        order=last + 1,
        created_at=created_at or timezone.now(),
        external_id=external_id,
    )
    # The curator reads after enough has accrued: count exchanges (a reply closes one) and characters.
    locked.chars_since_curation += len(content)
    if role == Message.Role.ASSISTANT:
        locked.exchanges_since_curation += 1
    locked.save(update_fields=["chars_since_curation", "exchanges_since_curation"])
    conversation.chars_since_curation = locked.chars_since_curation
    conversation.exchanges_since_curation = locked.exchanges_since_curation
    MESSAGES.schedule(message.pk)  # embedded after commit, for the meaning half of search_messages
    return message


def _lock_rows(rows: QuerySet[Any]) -> None:
    # FOR UPDATE of these rows only (not of what the default ordering would join in), in id order.
    list(rows.select_for_update(of=("self",)).order_by("pk").values_list("pk", flat=True))


@transaction.atomic
def delete_message(*, message: Message) -> None:
    """Remove a message from the record (and so from every search); a summary built from it is marked stale."""
    conversation = Conversation.objects.select_for_update().get(pk=message.conversation_id)
    if conversation.summary and message.order <= conversation.curated_through:
        conversation.summary_stale = True
        conversation.save(update_fields=["summary_stale"])
    # Lock the row before Django collects what refers to it (vectors, turns): an index task storing
    # a vector locks it too (indexing.store_if_current), so its vector is either collected here or
    # never stored, and the delete cannot fail on a row that landed in between.
    _lock_rows(Message.objects.filter(team_id=message.team_id, pk=message.pk))
    message.delete()


@transaction.atomic
def delete_conversation(*, conversation: Conversation) -> None:
    # As in delete_message: the conversation and its messages are locked before Django collects
    # their vectors and turns, so nothing can come to refer to them between collection and delete.
    _lock_rows(Conversation.objects.filter(team_id=conversation.team_id, pk=conversation.pk))
    _lock_rows(Message.objects.filter(team_id=conversation.team_id, conversation=conversation))
    conversation.delete()


@transaction.atomic
def end_conversation(*, conversation: Conversation) -> Conversation:
    """Close a conversation; whatever the curator has not read yet is read now, not left behind."""
    Conversation.objects.filter(pk=conversation.pk, ended_at__isnull=True).update(ended_at=timezone.now())
    conversation.refresh_from_db()
    schedule_curation(conversation=conversation, force=True)
    return conversation


CURATION_TASK = "curator.tasks.curate_conversation"


def curation_due(conversation: Conversation) -> bool:
    return (
        conversation.exchanges_since_curation >= settings.CURATOR_EVERY_EXCHANGES
        or conversation.chars_since_curation >= settings.CURATOR_EVERY_CHARS
    )


def schedule_curation(*, conversation: Conversation, force: bool = False) -> bool:
    """Ask for a curator pass once the thresholds are crossed (or now, with force). Deduplicated per
    conversation: while one is pending, further requests coalesce into it."""
    if not force and not curation_due(conversation):
        return False
    if (
        force
        and not Message.objects.filter(
            team_id=conversation.team_id, conversation_id=conversation.pk, order__gt=conversation.curated_through
        ).exists()
    ):
        return False
    claimed = Conversation.objects.filter(pk=conversation.pk, curation_pending=False).update(
        curation_pending=True, curation_requested_at=timezone.now()
    )
    if not claimed:
        return False
    conversation_id = conversation.pk
    # By name: the curator depends on conversations, never the other way round. If the broker is
    # down, the pending flag stays and the curator's catch-up enqueues the pass later.
    transaction.on_commit(lambda: _enqueue_curation(conversation_id), robust=True)
    return True


def _enqueue_curation(conversation_id: int) -> None:
    from config.celery import app  # here: the Celery app loads every app's tasks, which import this module

    app.send_task(CURATION_TASK, args=[conversation_id])


@transaction.atomic
def update_summary(*, conversation: Conversation, summary: str, through_order: int) -> Conversation:
    Conversation.objects.filter(pk=conversation.pk).update(
        summary=summary, summary_updated_at=timezone.now(), summary_stale=False, curated_through=through_order
    )
    conversation.refresh_from_db()
    return conversation


def record_curation(*, conversation: Conversation, through_order: int, outcome: str) -> None:
    """A curator pass read the messages through through_order: move its watermark there, count what
    accrued since (for the next threshold), and say how it went. Runs inside the pass's transaction."""
    remaining = Message.objects.filter(team_id=conversation.team_id, conversation=conversation, order__gt=through_order)
    Conversation.objects.filter(pk=conversation.pk).update(
        curated_through=through_order,
        exchanges_since_curation=remaining.filter(role=Message.Role.ASSISTANT).count(),
        chars_since_curation=remaining.aggregate(total=Sum(Length("content")))["total"] or 0,
        curation_pending=False,
        last_curated_at=timezone.now(),
        last_curation_outcome=outcome[:500],
    )


def record_nothing_to_curate(*, conversation: Conversation) -> None:
    """A curator pass found no message after the watermark: nothing is pending any more."""
    Conversation.objects.filter(pk=conversation.pk).update(curation_pending=False)


def record_curation_failure(*, conversation: Conversation, error: str) -> None:
    """The provider failed: the conversation stays pending (the task retries), and says why."""
    Conversation.objects.filter(pk=conversation.pk).update(last_curation_outcome=f"failed: {error}"[:500])


def request_curations_again(*, conversation_ids: list[int], requested_at: datetime) -> None:
    """Passes that were due but never ran are requested anew (the catch-up enqueues them)."""
    Conversation.objects.filter(pk__in=conversation_ids).update(
        curation_pending=True, curation_requested_at=requested_at
    )


@dataclass
class TurnResult:
    turn: Turn
    composition: Composition


def conversation_for(*, team: Team, agent: Agent, person: Person, conversation_id: int | None) -> Conversation:
    """The named conversation (this agent's with this person only), else their latest open one, else a new one."""
    conversations = Conversation.objects.between(agent, person)
    if conversation_id is not None:
        found = conversations.filter(pk=conversation_id).first()
        if found is None:
            raise ConversationNotFound(
                f"No conversation {conversation_id} between this agent and person.", field="conversation"
            )
        return found
    latest = conversations.filter(ended_at__isnull=True).order_by("-started_at", "-pk").first()
    return latest or start_conversation(team=team, agent=agent, person=person)


def take_turn(
    *,
    team: Team,
    agent: Agent,
    person: Person,
    message: str,
    conversation_id: int | None = None,
    scope: str = "",
    context: TurnContext | None = None,
    profile: str = "full",
    persona: str | None = None,
) -> TurnResult:
    """Record the person's message, then compose what the agent is given for its reply.

    The message is committed before composing: composing may call an embedder, and no network
    call runs inside a transaction.
    """
    if profile not in PROFILES:
        raise InvalidMessage(f"profile must be one of {', '.join(PROFILES)}.", field="profile")
    with transaction.atomic():
        conversation = conversation_for(team=team, agent=agent, person=person, conversation_id=conversation_id)
        recorded = record_message(conversation=conversation, role=Message.Role.USER, content=message)
    composition = compose(
        team=team, agent=agent, person=person, conversation=conversation, message=recorded,
        scope=scope, context=context, profile=profile, persona=persona,
    )  # fmt: skip
    turn = Turn.objects.create(
        team=team,
        conversation=conversation,
        message=recorded,
        profile=profile,
        costs=composition.costs,
        degraded=composition.degraded,
        notes_used=composition.notes_used,
    )
    return TurnResult(turn=turn, composition=composition)


@transaction.atomic
def record_reply(*, turn: Turn, content: str) -> Message:
    """Record the agent's reply to a turn (once)."""
    locked = Turn.objects.select_for_update().get(pk=turn.pk)
    if locked.reply_id is not None:
        raise TurnAlreadyAnswered("This turn already has a reply; start a new turn for the next message.", field="turn")
    conversation = locked.conversation
    reply = record_message(conversation=conversation, role=Message.Role.ASSISTANT, content=content)
    locked.reply = reply
    locked.save(update_fields=["reply"])
    schedule_curation(conversation=conversation)  # a curator pass never blocks the turn: it runs after commit
    return reply
