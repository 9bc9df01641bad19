"""The demo (seed 001): a coach whose memory of you is a bounded bank of eight facts.

Each message costs two model calls: the curator decides what is worth keeping out of what was
just said, then the reply is written from the surviving memories and nothing else (the
`memory_only` composition). With no LLM configured, the page shows what the model would have
been given instead of a reply.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from accounts.demo import DEMO_AGENT, DEMO_TEAM, ensure_demo
from accounts.models import Agent, Person
from accounts.services import get_or_create_person
from conversations.composer import Composition, compose
from conversations.models import Conversation, Message
from conversations.services import conversation_for, end_conversation, record_message
from curator.providers import OpenAIProvider, ProviderError, get_provider
from curator.services import curate_conversation
from memory.banks import bank_id_for
from memory.models import Bank, Note, Revision
from memory.services import Actor, get_or_create_bank, update_bank_settings

CAPACITY = 8


@dataclass
class DemoState:
    # None until the visitor first says something: looking at the page stores nothing.
    person: Person | None
    agent: Agent | None
    bank: Bank | None
    conversation: Conversation | None
    notes: list[Note]
    messages: list[Message]
    events: list[Revision] = field(default_factory=list)
    composition: Composition | None = None
    llm_configured: bool = False
    error: str = ""

    @property
    def capacity(self) -> int:
        return self.bank.capacity if self.bank is not None else CAPACITY


def _demo_agent() -> Agent:
    agent = Agent.objects.select_related("team").filter(team__slug=DEMO_TEAM, slug=DEMO_AGENT).first()
    return agent or ensure_demo().agent


def _bank(person: Person) -> Bank:
    bank = get_or_create_bank(team=person.team, person=person, scope="", kind=Bank.Kind.GLOBAL)
    if bank.policy != Bank.Policy.BOUNDED or bank.capacity != CAPACITY:
        bank = update_bank_settings(
            bank=bank, actor=Actor(Revision.Actor.ADMIN, "demo"), changes={"policy": "bounded", "capacity": CAPACITY}
        )
    return bank


def _parties(visitor: str, conversation: Conversation | None = None) -> tuple[Agent, Person, Bank, Conversation]:
    """What the visitor's demo needs, created if missing (person, bounded bank, conversation): for writes only."""
    agent = _demo_agent()
    person = get_or_create_person(team=agent.team, external_id=_external_id(visitor))
    bank = _bank(person)
    conversation = conversation or conversation_for(team=agent.team, agent=agent, person=person, conversation_id=None)
    return agent, person, bank, conversation


def state(visitor: str, conversation: Conversation | None = None) -> DemoState:
    """The visitor's demo, creating what it needs: for writes only."""
    agent, person, bank, conversation = _parties(visitor, conversation)
    return _read(agent=agent, person=person, bank=bank, conversation=conversation)


def peek(visitor: str | None) -> DemoState:
    """What the visitor's demo holds, without writing anything: a visitor who has said nothing has nothing."""
    agent = Agent.objects.select_related("team").filter(team__slug=DEMO_TEAM, slug=DEMO_AGENT).first()
    person = None
    if agent is not None and visitor is not None:
        person = Person.objects.for_team(agent.team).filter(external_id=_external_id(visitor)).first()
    if agent is None or person is None:
        return DemoState(
            person=None, agent=agent, bank=None, conversation=None, notes=[], messages=[],
            llm_configured=settings.LLM_PROVIDER != "rules",
        )  # fmt: skip
    bank = Bank.objects.filter(team=agent.team, address=bank_id_for(Bank.Kind.GLOBAL, person, "")).first()
    conversation = (
        Conversation.objects.between(agent, person).filter(ended_at__isnull=True).order_by("-started_at", "-pk").first()
    )
    return _read(agent=agent, person=person, bank=bank, conversation=conversation)


def _external_id(visitor: str) -> str:
    return f"demo-{visitor}"


def _read(*, agent: Agent, person: Person, bank: Bank | None, conversation: Conversation | None) -> DemoState:
    return DemoState(
        person=person,
        agent=agent,
        bank=bank,
        conversation=conversation,
        notes=list(Note.objects.filter(team=agent.team, bank=bank).order_by("created_at")) if bank else [],
        messages=list(conversation.messages.order_by("order")) if conversation else [],
        llm_configured=settings.LLM_PROVIDER != "rules",
    )


def say(visitor: str, text: str) -> DemoState:
    """Record what was said, let the curator keep what matters, then reply from memory alone."""
    agent, person, _, conversation = _parties(visitor)
    last_revision = Revision.objects.filter(team=agent.team).order_by("-id").values_list("id", flat=True).first() or 0
    with transaction.atomic():
        message = record_message(conversation=conversation, role=Message.Role.USER, content=text)
    error = ""
    try:
        curate_conversation(conversation_id=conversation.pk)
    except ProviderError as exc:
        error = f"The memory step failed this time: {exc}"
    composition = compose(
        team=agent.team, agent=agent, person=person, conversation=conversation, message=message, profile="memory_only"
    )
    if settings.LLM_PROVIDER != "rules" and not error:  # an LLM is configured
        provider = get_provider()
        assert isinstance(provider, OpenAIProvider)  # LLM_PROVIDER is "openai": only it writes replies
        system = "\n\n".join(block.text for block in composition.blocks if block.layer != "last_exchange")
        try:
            reply = provider.reply(system, composition.messages)
        except ProviderError as exc:
            error = f"The reply failed this time: {exc}"
        else:
            with transaction.atomic():
                record_message(conversation=conversation, role=Message.Role.ASSISTANT, content=reply or "…")
    after = state(visitor, conversation)
    after.events = list(
        Revision.objects.filter(
            team=agent.team, bank=after.bank, id__gt=last_revision, action__in=["evict", "refused", "update"]
        ).order_by("id")
    )
    after.composition = composition
    after.error = error
    return after


def new_conversation(visitor: str | None) -> None:
    """End the visitor's open conversation, if there is one; the next message starts a fresh one."""
    current = peek(visitor)
    if current.conversation is not None:
        end_conversation(conversation=current.conversation)
