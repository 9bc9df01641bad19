"""The two read-only conversation tools, registered beside the memory tools.

Both reach only the conversations of the agent whose key calls with the person named.
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

from pydantic import BaseModel, Field

from accounts.services import get_or_create_person
from config.text import INT64_MAX, Text
from conversations.exceptions import ConversationNotFound
from conversations.models import Conversation
from conversations.queries import meaningful_terms, recent_messages, search_messages
from memory.text import snippet
from memory.tools import Tool, ToolArgs, ToolContext, register


class RecentMessagesArgs(ToolArgs):
    conversation: int | None = Field(
        default=None, ge=1, le=INT64_MAX, description="One conversation's id; default all of them."
    )
    limit: int = Field(default=20, ge=1, le=200)


class SearchConversationArgs(ToolArgs):
    query: Text = Field(min_length=1, max_length=2000)
    limit: int = Field(default=5, ge=1, le=50)


class MessageOut(BaseModel):
    id: int
    conversation: int
    role: str
    content: str
    created_at: str


class RecentMessagesOut(BaseModel):
    messages: list[MessageOut]


class ConversationHit(BaseModel):
    message_id: int
    conversation: int
    role: str
    snippet: str
    score: float
    created_at: str


class SearchConversationOut(BaseModel):
    results: list[ConversationHit]


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
    messages = recent_messages(agent=ctx.agent, person=person, conversation=conversation, limit=args.limit)
    ctx.record_read(
        person=person, tool="recent_messages", started=started,
        messages=[m.pk for m in messages], conversations=[m.conversation_id for m in messages],
    )  # fmt: skip
    return RecentMessagesOut(
        messages=[
            MessageOut(
                id=m.pk,
                conversation=m.conversation_id,
                role=m.role,
                content=m.content,
                created_at=m.created_at.isoformat(),
            )
            for m in messages
        ]
    ).model_dump()


def run_search_conversation(ctx: ToolContext, args: SearchConversationArgs) -> dict[str, Any]:
    started = perf_counter()
    person = get_or_create_person(team=ctx.team, external_id=args.person)
    hits = search_messages(agent=ctx.agent, person=person, query=args.query, limit=args.limit)
    ctx.record_read(
        person=person, tool="search_conversation", started=started, query=args.query,
        messages=[h.message.pk for h in hits], conversations=[h.message.conversation_id for h in hits],
    )  # fmt: skip
    terms = set(meaningful_terms(args.query))
    return SearchConversationOut(
        results=[
            ConversationHit(
                message_id=h.message.pk,
                conversation=h.message.conversation_id,
                role=h.message.role,
                snippet=snippet(h.message.content, terms),
                score=round(h.score, 6),
                created_at=h.message.created_at.isoformat(),
            )
            for h in hits
        ]
    ).model_dump()


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
        "Search everything said in your conversations with this person; ranked snippets with message ids.",
        SearchConversationArgs,
        SearchConversationOut,
        run_search_conversation,
    )
)
