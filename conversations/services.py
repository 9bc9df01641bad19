"""Writes to the chat of record: conversations, messages and turns."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from time import perf_counter
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, QuerySet, Sum
from django.db.models.functions import Length
from django.utils import timezone

from accounts.models import Agent, Person, Team
from config.prepared import Prepared, columns_of, run_together, statement_cursor
from config.text import TextKind, check_text
from conversations import kept_pairs
from conversations.composer import PROFILES, Composition, Profile, compose
from conversations.exceptions import ConversationNotFound, InvalidMessage, MessageTooLong, TurnAlreadyAnswered
from conversations.indexing import MESSAGES, windows_of
from conversations.models import Conversation, Message, MessagePassage, MessageVector, Turn
from memory import vectors
from memory.embedders import Vector, get_embedder
from memory.language import text_search_config
from memory.models import Read
from memory.queries import TurnContext
from memory.services.reads import forget_reads_of, record_read


def start_conversation(*, team: Team, agent: Agent, person: Person, started_at: datetime | None = None) -> Conversation:
    if agent.team_id != team.pk or person.team_id != team.pk:
        raise ConversationNotFound("That agent or person is not known in this team.", field="person")
    return Conversation.objects.create(team=team, agent=agent, person=person, started_at=started_at or timezone.now())


def check_content(content: str) -> str:
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


# One round trip, whatever the conversation's length: both statements are sent together
# (config.prepared.run_together), and Postgres runs them as one transaction when none is open (and
# inside the caller's when one is). The UPDATE locks the conversation (so orders never collide)
# and counts what accrued for the curator;
# the INSERT, a statement of its own and so reading after the lock was taken, appends the message
# after the last one (the index on (team, conversation, order) finds it). Both name the
# conversation by the same condition; when it matches no row, neither writes anything.
_RECORD = (
    """
UPDATE {conversation} c
SET chars_since_curation = c.chars_since_curation + %(chars)s,
    exchanges_since_curation = c.exchanges_since_curation + %(exchanges)s
WHERE {where}
RETURNING {columns}
""",
    """
INSERT INTO {message} (team_id, conversation_id, role, content, language, "order", created_at, external_id)
SELECT c.team_id, c.id, %(role)s, %(content)s, %(language)s,
       coalesce((SELECT max(m."order") FROM {message} m WHERE m.team_id = c.team_id AND m.conversation_id = c.id), 0) + 1,
       %(created_at)s, %(external_id)s
FROM {conversation} c
WHERE {where}
RETURNING id, "order"
""",
)
# How _record names the conversation: fixed SQL, the values always parameters.
_BY_ID = "c.id = %(id)s"
_BY_AGENT = _BY_ID + " AND c.team_id = %(team)s AND c.agent_id = %(agent)s"
_BY_PARTICIPANTS = _BY_AGENT + " AND c.person_id = %(person)s"


def record_message(
    *,
    conversation: Conversation,
    role: str,
    content: str,
    created_at: datetime | None = None,
    external_id: str = "",
    embed: bool = True,
) -> Message:
    """Append a message; the conversation row is locked so orders never collide. embed=False: the
    caller gives it its vector (take_turn), or queues it for embedding, itself."""
    _, message = _record(
        _BY_ID, {"id": conversation.pk}, role=role, content=content, created_at=created_at,
        external_id=external_id, embed=embed,
    )  # fmt: skip
    if message is None:
        raise Conversation.DoesNotExist(f"Conversation {conversation.pk} does not exist.")
    conversation.chars_since_curation = message.conversation.chars_since_curation
    conversation.exchanges_since_curation = message.conversation.exchanges_since_curation
    message.conversation = conversation
    return message


def record_agent_message(
    *, team: Team, agent: Agent, conversation_id: int, role: str, content: str, external_id: str = ""
) -> Message | None:
    """Append a message to one of this agent's conversations, named by id, as record_message does
    (without a lookup of its own first). None when the agent has no such conversation: nothing was
    written then."""
    where = {"id": conversation_id, "team": team.pk, "agent": agent.pk}
    return _record(_BY_AGENT, where, role=role, content=content, external_id=external_id)[1]


def _record(
    where: str,
    params: dict[str, int],
    *,
    role: str,
    content: str,
    created_at: datetime | None = None,
    external_id: str = "",
    embed: bool = True,
) -> tuple[Conversation | None, Message | None]:
    """Record a message in the conversation `where` names: (the conversation as it is now, with its
    counts updated; the message), or (None, None) when it names none."""
    if role not in Message.Role.values:
        raise InvalidMessage(f"role must be one of {', '.join(Message.Role.values)}.", field="role")
    content = check_content(content)
    check_text(external_id, field="external_id", kind=TextKind.IDENTIFIER, error=InvalidMessage)
    language = text_search_config(content)
    created_at = created_at or timezone.now()
    conversations = columns_of(Conversation, "c")
    tables = {"conversation": Conversation._meta.db_table, "message": Message._meta.db_table, "where": where}
    update, insert = (sql.format(**tables, columns=conversations.select) for sql in _RECORD)
    chars, exchanges = len(content), int(role == Message.Role.ASSISTANT)  # a reply closes an exchange
    counts = {**params, "chars": chars, "exchanges": exchanges}
    values: dict[str, Any] = {
        **params, "role": role, "content": content, "language": language, "created_at": created_at,
        "external_id": external_id,
    }  # fmt: skip
    counted_rows, appended_rows = run_together([(update, counts), (insert, values)])  # one round trip
    counted = counted_rows[0] if counted_rows else None
    appended = appended_rows[0] if appended_rows else None
    if counted is None or appended is None:
        return None, None
    conversation = conversations.instance(counted)
    message = Message(
        pk=appended[0],
        team_id=conversation.team_id,
        conversation=conversation,
        role=role,
        content=content,
        language=language,
        order=appended[1],
        created_at=created_at,
        external_id=external_id,
    )
    message._state.adding = False
    message._state.db = connection.alias
    if embed:
        MESSAGES.schedule(message.pk)  # embedded after commit, for the meaning half of search_messages
    return conversation, message


def _lock_rows(rows: QuerySet[Any], *, no_key: bool = False) -> None:
    # FOR UPDATE of these rows only (not of what the default ordering would join in), in id order.
    list(rows.select_for_update(of=("self",), no_key=no_key).order_by("pk").values_list("pk", flat=True))


SUMMARY_REBUILD_TASK = "curator.tasks.rebuild_summary"


@dataclass(frozen=True)
class MessageErasure:
    messages: int = 0  # erased now (already erased ones are skipped)
    summaries: int = 0  # summaries cleared because they were built from one of them


@transaction.atomic
def erase_messages(*, team: Team, message_ids: Iterable[int]) -> MessageErasure:
    """Erase messages: each becomes a tombstone (order and role kept, content blanked, vector
    dropped), so it leaves passages, both searches, recent messages, the window and the curator's
    input. Every conversation that lost a message the summary was built from has its summary
    cleared in this transaction and marked stale: no later turn can read it, whether or not the
    rebuild asked for on commit ever runs (the curator's catch-up asks again)."""
    rows = Message.objects.filter(team_id=team.pk, pk__in=list(message_ids), erased_at__isnull=True)
    conversation_ids = sorted(set(rows.values_list("conversation_id", flat=True)))
    # Conversations before messages, in id order, as record_message and the curator lock them.
    _lock_rows(Conversation.objects.filter(team_id=team.pk, pk__in=conversation_ids))
    # The index task locks a message before storing its vector (indexing.store_if_current), and
    # compares its text: it either stored first and its vector is deleted below, or finds the
    # content blank and stores nothing. No key update: a note written meanwhile may still name one
    # as its source (a foreign key's share lock) without waiting on this erasure, which waits on
    # that note's bank when it erases a note (memory.services.erase_note): no deadlock.
    _lock_rows(rows, no_key=True)
    erased = list(rows.values_list("pk", "conversation_id", "order"))
    if not erased:
        return MessageErasure()
    said_by_person: dict[int, list[str]] = {}
    for person_id, content in rows.values_list("conversation__person_id", "content"):
        said_by_person.setdefault(person_id, []).append(content)
    now = timezone.now()
    Message.objects.filter(team_id=team.pk, pk__in=[pk for pk, _, _ in erased]).update(content="", erased_at=now)
    MessageVector.objects.filter(team_id=team.pk, message_id__in=[pk for pk, _, _ in erased]).delete()
    MessagePassage.objects.filter(team_id=team.pk, message_id__in=[pk for pk, _, _ in erased]).delete()
    forget_reads_of(team=team, messages=[pk for pk, _, _ in erased])  # a query that found one may quote it
    for person_id, said in said_by_person.items():  # and so may one that found nothing
        forget_reads_of(team=team, texts=said, person_id=person_id)
    erased_texts = [text for said in said_by_person.values() for text in said]
    transaction.on_commit(partial(vectors.forget_query_texts, erased_texts))  # a turn's query was its text
    Conversation.objects.filter(team_id=team.pk, pk__in=conversation_ids).update(erasures=F("erasures") + 1)
    transaction.on_commit(partial(kept_pairs.forget_conversations, conversation_ids))  # this process's at once
    lowest: dict[int, int] = {}
    for _, conversation_id, order in erased:
        lowest[conversation_id] = min(order, lowest.get(conversation_id, order))
    summaries = 0
    for conversation in Conversation.objects.filter(team_id=team.pk, pk__in=conversation_ids):
        if lowest[conversation.pk] <= conversation.curated_through:
            summaries += _clear_summary(conversation, now=now)
    return MessageErasure(messages=len(erased), summaries=summaries)


def _clear_summary(conversation: Conversation, *, now: datetime) -> int:
    """Clear the summary and ask for its rebuild; 1 if there was a summary to clear, else 0."""
    # The outcome line may name keys the curator built from what was said: it goes too.
    Conversation.objects.filter(pk=conversation.pk).update(
        summary="", summary_stale=True, summary_updated_at=now, last_curation_outcome=""
    )
    request_summary_rebuild(conversation=conversation)
    return 1 if conversation.summary else 0


@transaction.atomic
def erase_message(*, message: Message) -> None:
    """Erase one message (see erase_messages)."""
    erase_messages(team=message.conversation.team, message_ids=[message.pk])


@transaction.atomic
def erase_conversation(*, conversation: Conversation) -> int:
    """Erase every message of a conversation and its summary, and end it: a later turn starts a new
    one. Returns how many messages were erased."""
    ids = list(
        Message.objects.filter(team_id=conversation.team_id, conversation=conversation).values_list("pk", flat=True)
    )
    count = erase_messages(team=conversation.team, message_ids=ids).messages
    locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
    locked.summary = ""
    locked.summary_stale = False  # nothing is left to summarise
    locked.summary_updated_at = timezone.now()
    locked.last_curation_outcome = ""
    locked.ended_at = locked.ended_at or timezone.now()
    locked.save(update_fields=["summary", "summary_stale", "summary_updated_at", "last_curation_outcome", "ended_at"])
    return count


@transaction.atomic
def delete_conversation(*, conversation: Conversation) -> None:
    # The conversation and its messages are locked before Django collects their vectors and turns,
    # so nothing can come to refer to them between collection and delete.
    _lock_rows(Conversation.objects.filter(team_id=conversation.team_id, pk=conversation.pk))
    _lock_rows(Message.objects.filter(team_id=conversation.team_id, conversation=conversation))
    forget_reads_of(team=conversation.team, messages=list(conversation.messages.values_list("pk", flat=True)))
    transaction.on_commit(partial(kept_pairs.forget_conversations, [conversation.pk]))
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
    _send(CURATION_TASK, conversation_id)


def _send(task: str, conversation_id: int) -> None:
    from config.celery import app  # here: the Celery app loads every app's tasks, which import this module

    app.send_task(task, args=[conversation_id])


@transaction.atomic
def update_summary(*, conversation: Conversation, summary: str, through_order: int) -> Conversation:
    Conversation.objects.filter(pk=conversation.pk).update(
        summary=summary, summary_updated_at=timezone.now(), summary_stale=False, curated_through=through_order
    )
    conversation.refresh_from_db()
    return conversation


def request_summary_rebuild(*, conversation: Conversation) -> None:
    """Ask the curator, after commit, to rebuild a cleared summary. By name, like the curator pass; a
    broker that is down costs only the wait for the curator's catch-up, which asks again."""
    conversation_id = conversation.pk
    transaction.on_commit(lambda: _send(SUMMARY_REBUILD_TASK, conversation_id), robust=True)


def mark_summary_rebuilds_asked(*, conversation_ids: list[int], asked_at: datetime) -> None:
    """The catch-up asked again for these rebuilds: their clock restarts."""
    Conversation.objects.filter(pk__in=conversation_ids, summary_stale=True).update(summary_updated_at=asked_at)


@transaction.atomic
def record_rebuilt_summary(
    *, conversation: Conversation, summary: str, read_ids: list[int], through_order: int
) -> bool:
    """Store a summary rebuilt from the messages read_ids (all of it through through_order). Nothing
    is stored when it is no longer wanted or already out of date: the summary is not stale any more,
    the curator read further meanwhile, or one of the messages read was erased since (a rebuild is
    asked for again then). Returns whether it was stored."""
    locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
    if not locked.summary_stale:
        return False
    erased_since = Message.objects.filter(team_id=locked.team_id, pk__in=read_ids, erased_at__isnull=False).exists()
    if erased_since or locked.curated_through != through_order:
        request_summary_rebuild(conversation=locked)
        return False
    Conversation.objects.filter(pk=locked.pk).update(
        summary=summary, summary_stale=False, summary_updated_at=timezone.now()
    )
    return True


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


_NAMED_CONVERSATION = Prepared(
    lambda team_id, agent_id, person_id, pk: Conversation.objects.filter(
        team_id=team_id, agent_id=agent_id, person_id=person_id, pk=pk
    )[:1],
    team_id=int,
    agent_id=int,
    person_id=int,
    pk=int,
)
_LATEST_OPEN_CONVERSATION = Prepared(
    lambda team_id, agent_id, person_id: Conversation.objects.filter(
        team_id=team_id, agent_id=agent_id, person_id=person_id, ended_at__isnull=True
    ).order_by("-started_at", "-pk")[:1],
    team_id=int,
    agent_id=int,
    person_id=int,
)


def conversation_for(*, team: Team, agent: Agent, person: Person, conversation_id: int | None) -> Conversation:
    """The named conversation (this agent's with this person only), else their latest open one, else a new one."""
    pair = {"team_id": agent.team_id, "agent_id": agent.pk, "person_id": person.pk}
    if conversation_id is not None:
        found = _NAMED_CONVERSATION.first(**pair, pk=conversation_id)
        if found is None:
            raise ConversationNotFound(
                f"No conversation {conversation_id} between this agent and person.", field="conversation"
            )
        return found
    latest = _LATEST_OPEN_CONVERSATION.first(**pair)
    return latest or start_conversation(team=team, agent=agent, person=person)


def record_turn_message(
    *, team: Team, agent: Agent, person: Person, conversation_id: int | None, content: str
) -> tuple[Conversation, Message]:
    """The person's message of a turn, recorded in the conversation conversation_for would choose.
    A conversation named by id is found and written in one round trip (no lookup first). Not
    queued for embedding: take_turn gives it a vector (_embed_turn_message)."""
    if conversation_id is None:
        with transaction.atomic():
            conversation = conversation_for(team=team, agent=agent, person=person, conversation_id=None)
            return conversation, record_message(
                conversation=conversation, role=Message.Role.USER, content=content, embed=False
            )
    participants = {"id": conversation_id, "team": agent.team_id, "agent": agent.pk, "person": person.pk}
    found, recorded = _record(_BY_PARTICIPANTS, participants, role=Message.Role.USER, content=content, embed=False)
    if found is None or recorded is None:
        raise ConversationNotFound(
            f"No conversation {conversation_id} between this agent and person.", field="conversation"
        )
    return found, recorded


def take_turn(
    *,
    team: Team,
    agent: Agent,
    person: Person,
    message: str,
    conversation_id: int | None = None,
    scope: str = "",
    context: TurnContext | None = None,
    profile: Profile | str = Profile.FULL,
    persona: str | None = None,
) -> TurnResult:
    """Record the person's message, then compose what the agent is given for its reply.

    The message is committed before composing: composing may call an embedder, and no network
    call runs inside a transaction.
    """
    if profile not in PROFILES:
        raise InvalidMessage(f"profile must be one of {', '.join(PROFILES)}.", field="profile")
    profile = Profile(profile)
    conversation, recorded = record_turn_message(
        team=team, agent=agent, person=person, conversation_id=conversation_id, content=message
    )
    started = perf_counter()
    try:
        composition = compose(
            team=team, agent=agent, person=person, conversation=conversation, message=recorded,
            scope=scope, context=context, profile=profile, persona=persona,
        )  # fmt: skip
    except BaseException:
        MESSAGES.schedule(recorded.pk)  # no turn, but the message stays: embedded like any other
        raise
    _embed_turn_message(recorded, composition.message_vector)
    turn = record_turn(
        team=team, agent=agent, person=person, conversation=conversation, message=recorded, profile=profile,
        composition=composition, started=started,
    )  # fmt: skip
    return TurnResult(turn=turn, composition=composition)


def record_turn(
    *,
    team: Team,
    agent: Agent,
    person: Person,
    conversation: Conversation,
    message: Message,
    profile: Profile,
    composition: Composition,
    started: float,
) -> Turn:
    """The turn composed for `message`, and its row in the retrieval audit. Every path that gives an
    agent memories for a reply records both: the API's turns (take_turn) and the demo's."""
    turn = Turn.objects.create(
        team=team,
        conversation=conversation,
        message=message,
        profile=profile,
        costs=composition.costs,
        degraded=composition.degraded,
        notes_used=composition.notes_used,
    )
    record_turn_read(turn=turn, agent=agent, person=person, composition=composition, started=started)
    return turn


def _embed_turn_message(message: Message, vector: Vector | None) -> None:
    """The turn's message keeps the vector its composer computed for it when the embedder embeds a
    search text as it embeds a stored one (Embedder.symmetric): stored after the response, and the
    worker is spared embedding the same text again. Otherwise it is queued like any message, as is
    a long one: its windows are embedded with its head (conversations.indexing)."""
    embedder = get_embedder()
    if vector is not None and embedder is not None and embedder.symmetric and not windows_of(message.content):
        MESSAGES.store_computed(message, vector)
    else:
        MESSAGES.schedule(message.pk)


def record_turn_read(*, turn: Turn, agent: Agent, person: Person, composition: Composition, started: float) -> None:
    """The retrieval audit's row for a composed turn: the notes whose content it was given, the
    passages, what was degraded. Its query is the person's message, kept by the turn's id, not copied."""
    passages = list(composition.passages_used)

    def conversations_of_passages() -> dict[int, int]:  # run when the audit is written, after the response
        return dict(Message.objects.filter(team_id=turn.team_id, pk__in=passages).values_list("pk", "conversation_id"))

    record_read(
        team=turn.team, agent=agent, person=person, tool=Read.TURN, started=started, turn_id=turn.pk,
        notes=composition.notes_used, messages=passages, conversations=conversations_of_passages,
        degraded=composition.degraded,
    )  # fmt: skip


@transaction.atomic
def record_reply(*, turn: Turn, content: str) -> Message:
    """Record the agent's reply to a turn (once)."""
    locked = _locked_turn(turn)
    if locked.reply_id is not None:
        raise TurnAlreadyAnswered("This turn already has a reply; start a new turn for the next message.", field="turn")
    conversation = locked.conversation
    reply = record_message(conversation=conversation, role=Message.Role.ASSISTANT, content=content)
    locked.reply = reply
    locked.save(update_fields=["reply"])
    schedule_curation(conversation=conversation)  # a curator pass never blocks the turn: it runs after commit
    return reply


def _locked_turn(turn: Turn) -> Turn:
    """The turn (of its team), its row locked until the transaction ends, read with its
    conversation (whose row is not locked) in one statement written by hand: the queryset
    (select_for_update, select_related) cost more CPU to build than the round trip. Raises
    Turn.DoesNotExist."""
    turns, conversations = columns_of(Turn, "t"), columns_of(Conversation, "c")
    with statement_cursor() as cursor:
        cursor.execute(
            f"SELECT {turns.select}, {conversations.select} FROM {turns.table} t "
            f"JOIN {conversations.table} c ON c.id = t.conversation_id "
            "WHERE t.id = %s AND t.team_id = %s FOR UPDATE OF t",
            [turn.pk, turn.team_id],
        )
        row = cursor.fetchone()
    if row is None:
        raise Turn.DoesNotExist(f"Turn {turn.pk} does not exist.")
    locked = turns.instance(row[: turns.width])
    locked.conversation = conversations.instance(row[turns.width :])
    return locked
