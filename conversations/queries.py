"""Reads over the chat of record: recent messages and ranked full-text search."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db.models import F, QuerySet

from accounts.models import Agent, Person
from conversations.models import Conversation, Message
from memory.text import STOP_WORDS, real_word_count, words

_LEXEME = re.compile(r"^[a-z0-9]+$")


def meaningful_terms(text: str) -> list[str]:
    """Distinct words that carry meaning (stop words removed), safe to put in a tsquery."""
    seen: dict[str, None] = {}
    for word in words(text):
        if word not in STOP_WORDS and _LEXEME.match(word):
            seen.setdefault(word, None)
    return list(seen)


def or_query(text: str) -> SearchQuery | None:
    """Any meaningful word may match. websearch/plainto_tsquery AND every word together, which
    finds nothing for most natural questions; ts_rank_cd then rewards messages that match more
    of the words, closer together."""
    terms = meaningful_terms(text)
    if not terms:
        return None
    return SearchQuery(" | ".join(terms), search_type="raw", config="english")


def messages_between(agent: Agent, person: Person) -> QuerySet[Message]:
    return Message.objects.filter(team_id=agent.team_id, conversation__agent=agent, conversation__person=person)


@dataclass
class MessageHit:
    message: Message
    score: float


def search_messages(
    *,
    agent: Agent,
    person: Person,
    query: str,
    limit: int = 5,
    exclude_ids: set[int] | None = None,
) -> list[MessageHit]:
    """Ranked full-text search over this agent's conversations with this person, and no others."""
    tsquery = or_query(query)
    if tsquery is None:
        return []
    rows = (
        messages_between(agent, person)
        .filter(search=tsquery)
        .exclude(pk__in=exclude_ids or ())
        .annotate(score=SearchRank(F("search"), tsquery, cover_density=True))
        .select_related("conversation")
        .order_by("-score", "-created_at", "-pk")[:limit]
    )
    return [MessageHit(message=row, score=float(row.score)) for row in rows]


def worth_searching(message: str) -> bool:
    """A message with fewer than two real words ("thanks", "ok cool") is not searched at all."""
    return real_word_count(message) >= 2


def recent_messages(
    *, agent: Agent, person: Person, conversation: Conversation | None = None, limit: int = 20
) -> list[Message]:
    """The latest messages, oldest first, of one conversation or of all this agent's with this person."""
    messages = messages_between(agent, person)
    if conversation is not None:
        messages = messages.filter(conversation=conversation)
    latest = list(messages.select_related("conversation").order_by("-created_at", "-order", "-pk")[:limit])
    return list(reversed(latest))
