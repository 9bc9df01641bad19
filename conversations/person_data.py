"""A person's conversations in whole-person requests: the `conversations` member of a memory
package (export and import) and their erasure. Registered in memory.person_data by ConversationsConfig.

Each conversation is exported with its agent, its summary and its messages in order; turns are
informational (they hold costs and note ids, no text). An ordinary key exports and imports its own
agent's conversations only; an admin-capable key any agent's of its team. Import goes through the
history import (`history_import.import_conversations`, idempotent by external ids), then restores the
summary of a conversation that has none. A conversation or message without an external id is
exported with `mnemo-<id>`, so importing the same package again adds nothing. An erased message
(a tombstone, with no content) is exported marked `erased` and is not imported.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Max, Prefetch

from accounts.models import Agent, Person, Team
from conversations import history_import, services
from conversations.exceptions import InvalidMessage, MessageTooLong, OtherAgentsConversation
from conversations.models import Conversation, Message, Turn
from conversations.mutes import MutedMessages, muted_messages
from memory.exceptions import InvalidNote
from memory.person_data import PersonSection

INFORMATIONAL = ("agent", "ended_at", "summary", "turns")


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _message_out(message: Message) -> dict[str, Any]:
    out = {
        "role": message.role,
        "content": message.content,
        "created_at": _iso(message.created_at),
        "external_id": message.external_id or f"mnemo-{message.pk}",
    }
    # Only an erased message (a tombstone) has no content: it keeps its place and role, and says so.
    return out | {"erased": True} if not message.content else out


def _turn_out(turn: Turn) -> dict[str, Any]:
    return {
        "created_at": _iso(turn.created_at),
        "profile": turn.profile,
        "costs": turn.costs,
        "degraded": turn.degraded,
    }


def export_conversations(team: Team, person: Person, agent: Agent | None) -> list[dict[str, Any]]:
    conversations = (
        Conversation.objects.filter(team=team, person=person)
        .select_related("agent")
        .prefetch_related(
            Prefetch("messages", queryset=Message.objects.filter(team=team).order_by("order")),
            Prefetch("turns", queryset=Turn.objects.filter(team=team).order_by("created_at", "id")),
        )
        .order_by("started_at", "id")
    )
    muted = MutedMessages()
    if agent is not None:
        conversations = conversations.filter(agent=agent)
        muted = muted_messages(agent=agent, person=person)  # an agent's export holds what it may read
    return [
        {
            "agent": conversation.agent.slug,
            "person": person.external_id,
            "external_id": conversation.external_id or f"mnemo-{conversation.pk}",
            "started_at": _iso(conversation.started_at),
            "ended_at": _iso(conversation.ended_at),
            "summary": "" if muted.withholds_summary(conversation) else conversation.summary,
            "messages": [
                _message_out(message) for message in conversation.messages.all() if message.pk not in muted.ids
            ],
            "turns": [_turn_out(turn) for turn in conversation.turns.all()],
        }
        for conversation in conversations
    ]


def _history_item(item: dict[str, Any]) -> dict[str, Any]:
    """A conversation as the history import takes it: tombstones (erased messages) are not imported."""
    history = {name: value for name, value in item.items() if name not in INFORMATIONAL}
    if isinstance(history.get("messages"), list):
        history["messages"] = [
            message for message in history["messages"] if not (isinstance(message, dict) and message.get("erased"))
        ]
    return history


def check_conversations(member: Any, agent: Agent | None) -> None:
    """With an agent (an ordinary key's import), every conversation must be that agent's: naming
    another is refused before anything is read, so the answer is the same whether that agent exists
    or talked with the person."""
    if member is None:
        return
    if not isinstance(member, list):
        raise InvalidNote("conversations must be a list of conversations.", field="conversations")
    for index, item in enumerate(member):
        where = f"conversations[{index}]"
        if not isinstance(item, dict):
            raise InvalidNote(f"{where} is not a JSON object.", field=where)
        if not isinstance(item.get("agent"), str) or not item["agent"].strip():
            raise InvalidNote(f"{where}.agent must be the slug of one of the team's agents.", field=f"{where}.agent")
        if agent is not None and item["agent"].strip() != agent.slug:
            raise OtherAgentsConversation(
                f"{where}.agent names another agent than this key's ({agent.slug!r}): an ordinary key imports its "
                "own agent's conversations only; an admin-capable key may import any agent's. Nothing was imported.",
                field=f"{where}.agent",
            )
        if not isinstance(item.get("summary", ""), str | None):
            raise InvalidNote(f"{where}.summary must be a string.", field=f"{where}.summary")
        history = _history_item(item)
        if history.get("messages") == []:
            continue  # a conversation that never got a message (or only erased ones): nothing to import
        try:
            history_import.check_import([history])
        except (InvalidMessage, MessageTooLong) as exc:
            message = exc.message.removeprefix("line 1: ").removesuffix(" Nothing was imported.")
            raise InvalidNote(f"{where}: {message}", field=f"{where}.{exc.field}" if exc.field else where) from exc


def load_conversations(team: Team, member: Any) -> dict[str, Any]:
    """Import a checked `conversations` member, agent by agent; an agent the team does not have is reported."""
    report: dict[str, Any] = {"conversations": 0, "messages": 0, "summaries": 0, "refusals": []}
    by_agent: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in member or []:
        if _history_item(item).get("messages"):
            by_agent[item["agent"].strip()].append(item)
    for slug, items in by_agent.items():
        agent = Agent.objects.for_team(team).filter(slug=slug).first()
        if agent is None:
            report["refusals"].append({
                "agent": slug, "code": "not_found",
                "message": f"No agent {slug!r} in this team; its {len(items)} conversation(s) were not imported. "
                "Create the agent, then import again.",
            })  # fmt: skip
            continue
        imported = history_import.import_conversations(team=team, agent=agent, items=[_history_item(i) for i in items])
        report["conversations"] += imported.conversations_created
        report["messages"] += imported.messages_created
        for item in items:
            if not item.get("summary"):
                continue
            conversation = Conversation.objects.filter(
                team=team, agent=agent, person__external_id=item["person"].strip(), external_id=item["external_id"]
            ).first()
            if conversation is None or conversation.summary:
                continue
            last = Message.objects.filter(team=team, conversation=conversation).aggregate(last=Max("order"))["last"]
            services.update_summary(conversation=conversation, summary=item["summary"], through_order=last or 0)
            report["summaries"] += 1
    return report


def erase_conversations(team: Team, person: Person) -> dict[str, int]:
    """Delete the person's conversations outright, with their messages, message vectors, summaries and turns."""
    conversations = list(Conversation.objects.filter(team=team, person=person))
    counts = {
        "conversations": len(conversations),
        "messages": Message.objects.filter(team=team, conversation__in=conversations).count(),
        "turns": Turn.objects.filter(team=team, conversation__in=conversations).count(),
    }
    for conversation in conversations:
        services.delete_conversation(conversation=conversation)
    return counts


CONVERSATIONS = PersonSection(
    name="conversations",
    export=export_conversations,
    check=check_conversations,
    load=load_conversations,
    erase=erase_conversations,
)
