"""The two read-only conversation tools, registered beside the memory tools.

Both reach only the conversations of the agent whose key calls with the person named, without the
messages a mute withholds from that agent (conversations.mutes).
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

from pydantic import BaseModel, Field, model_validator

from accounts.services import get_or_create_person
from config.text import INT64_MAX, Text
from conversations import replica_reads
from conversations.exceptions import ConversationNotFound, MessageNotFound
from conversations.models import Conversation, Message
from conversations.mutes import muted_messages
from conversations.queries import MessageHit, messages_around, recent_messages, search_messages
from conversations.windows import best_window
from memory.tools import Tool, ToolArgs, ToolContext, register

SNIPPET_CHARS = 400  # a hit's snippet: the best-matching sentences of a longer message


class RecentMessagesArgs(ToolArgs):
    conversation: int | None = Field(
        default=None, ge=1, le=INT64_MAX, description="One conversation's id; default all of them."
    )
    limit: int = Field(default=20, ge=1, le=200)


class SearchConversationArgs(ToolArgs):
    query: Text | None = Field(
        default=None, min_length=1, max_length=2000, description="What to search for; may be left out with around."
    )
    limit: int = Field(default=5, ge=1, le=50, description="Hits to return; with around, messages on each side.")
    around: int | None = Field(
        default=None,
        ge=1,
        le=INT64_MAX,
        description="A message id (a hit's message_id): also return that message whole with its neighbours "
        "in its conversation, up to limit on each side, oldest first.",
    )

    @model_validator(mode="after")
    def _query_or_around(self) -> SearchConversationArgs:
        if self.query is None and self.around is None:
            raise ValueError("Give a query, or a message id as around (or both).")
        return self


class MessageOut(BaseModel):
    id: int
    conversation: int
    role: str
    content: str
    created_at: str


class RecentMessagesOut(BaseModel):
    messages: list[MessageOut]


class Window(BaseModel):
    start: int
    end: int
    length: int


class ConversationHit(BaseModel):
    message_id: int
    conversation: int
    role: str
    snippet: str = Field(description="The message whole, or the sentences of it that match best (up to 400 chars).")
    window: Window = Field(description="Where the snippet sits in the message, in characters: [start, end) of length.")
    score: float
    created_at: str


class SearchConversationOut(BaseModel):
    results: list[ConversationHit]
    around: list[MessageOut] | None = None


def run_recent_messages(ctx: ToolContext, args: RecentMessagesArgs) -> dict[str, Any]:
    started = perf_counter()
    person = get_or_create_person(team=ctx.team, external_id=args.person)
    conversation = None
    if args.conversation is not None:
        conversation = Conversation.objects.between(ctx.agent, person).filter(pk=args.conversation).first()
        if conversation is None:
            raise ConversationNotFound(
                f"No conversation {args.conversation} between this agent and person.", field="conversation"
            )
    with replica_reads.reading_for(person):
        muted = muted_messages(agent=ctx.agent, person=person)
        messages = recent_messages(
            agent=ctx.agent, person=person, conversation=conversation, limit=args.limit, exclude_ids=muted.ids
        )
    ctx.record_read(
        person=person, tool="recent_messages", started=started,
        messages=[m.pk for m in messages], conversations=[m.conversation_id for m in messages],
    )  # fmt: skip
    return RecentMessagesOut(messages=[_message_out(m) for m in messages]).model_dump()


def _hit(hit: MessageHit, query: str) -> ConversationHit:
    message = hit.message
    window = best_window(message.content, query, size=SNIPPET_CHARS, language=message.language)
    return ConversationHit(
        message_id=message.pk,
        conversation=message.conversation_id,
        role=message.role,
        snippet=window.text(message.content),
        window=Window(start=window.start, end=window.end, length=window.length),
        score=round(hit.score, 6),
        created_at=message.created_at.isoformat(),
    )


def _message_out(message: Message) -> MessageOut:
    return MessageOut(
        id=message.pk,
        conversation=message.conversation_id,
        role=message.role,
        content=message.content,
        created_at=message.created_at.isoformat(),
    )


def run_search_conversation(ctx: ToolContext, args: SearchConversationArgs) -> dict[str, Any]:
    started = perf_counter()
    person = get_or_create_person(team=ctx.team, external_id=args.person)
    hits: list[MessageHit] = []
    around: list[Message] | None = None
    with replica_reads.reading_for(person):
        muted = muted_messages(agent=ctx.agent, person=person)
        if args.query is not None:
            hits = search_messages(
                agent=ctx.agent, person=person, query=args.query, limit=args.limit, exclude_ids=set(muted.ids)
            )
        if args.around is not None:
            around = messages_around(
                agent=ctx.agent, person=person, message_id=args.around, each_side=args.limit, exclude_ids=muted.ids
            )
            if around is None:
                raise MessageNotFound(f"No message {args.around} between this agent and person.", field="around")
    read = [h.message for h in hits] + (around or [])
    ctx.record_read(
        person=person, tool="search_conversation", started=started, query=args.query or "",
        messages=[m.pk for m in read], conversations=[m.conversation_id for m in read],
    )  # fmt: skip
    return SearchConversationOut(
        results=[_hit(h, args.query) for h in hits if args.query is not None],
        around=None if around is None else [_message_out(m) for m in around],
    ).model_dump(exclude_none=True)


register(
    Tool(
        "recent_messages",
        "The latest messages of your conversations with this person (or of one conversation), oldest first.",
        RecentMessagesArgs,
        RecentMessagesOut,
        run_recent_messages,
        (404, 422),
    )
)
register(
    Tool(
        "search_conversation",
        "Search everything said in your conversations with this person: ranked hits, each the part of its "
        "message that matches with the message id; around=<message id> reads a hit's neighbours whole.",
        SearchConversationArgs,
        SearchConversationOut,
        run_search_conversation,
        (404, 422),
    )
)
