"""The demo (seed 001): a coach whose memory of you is a bounded bank of eight facts.

Each message costs two model calls: the curator decides what is worth keeping out of what was
just said, then the reply is written from the surviving memories and nothing else (the
`memory_only` composition). With no LLM configured, the page shows what the model would have
been given instead of a reply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from time import perf_counter

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from accounts.demo import DEMO_AGENT, DEMO_TEAM, ensure_demo
from accounts.models import Agent, Person
from accounts.services import get_or_create_person, link_person_to_user
from config.exceptions import DomainError
from conversations.composer import Composition, Profile, compose
from conversations.models import Conversation, Message
from conversations.services import conversation_for, end_conversation, record_message, record_turn
from curator.providers import OpenAIProvider, ProviderError, get_provider
from curator.services import curate_conversation
from memory import plain
from memory.banks import bank_id_for
from memory.models import Bank, Note, Revision
from memory.services import Actor, edit_note, erase_note, get_or_create_bank, update_bank_settings

CAPACITY = 8

# What the panel says changed: the writes of one message, one correction or one delete.
EVENT_ACTIONS = [
    Revision.Action.CREATE, Revision.Action.UPDATE, Revision.Action.APPEND, Revision.Action.EVICT,
    Revision.Action.REFUSED, Revision.Action.DELETE,
]  # fmt: skip
Change = tuple[int, int]  # the revision ids (after, up to and including) of the last change


@dataclass(frozen=True)
class Identity:
    """Whose demo this is: a signed-in login's own person, or an anonymous visitor's."""

    external_id: str
    actor_ref: str
    user: AbstractBaseUser | None = None


def identity_for_user(user: AbstractBaseUser) -> Identity:
    """A signed-in login talks to the demo as its own person in the demo team, so it shows in its lens."""
    person = Person.objects.filter(team__slug=DEMO_TEAM, user_id=user.pk).order_by("pk").first()
    external_id = person.external_id if person is not None else f"login-{user.get_username()}"
    return Identity(external_id=external_id, actor_ref=f"user:{user.get_username()}", user=user)


def identity_for_visitor(visitor: str) -> Identity:
    return Identity(external_id=f"demo-{visitor}", actor_ref="demo visitor")


@dataclass
class DemoEvent:
    action: str
    key: str
    text: str


@dataclass
class DemoState:
    # None until the visitor first says something: looking at the page stores nothing.
    person: Person | None
    agent: Agent | None
    bank: Bank | None
    conversation: Conversation | None
    notes: list[Note]
    messages: list[Message]
    events: list[DemoEvent] = field(default_factory=list)
    events_are_new: bool = False  # the events came with this answer, not an earlier one
    nothing_kept: bool = False  # the message just said changed nothing in memory
    change: Change | None = None  # the revisions of the last change, for the next page view
    composition: Composition | None = None
    llm_configured: bool = False
    error: str = ""
    signed_in: bool = False

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


def _parties(who: Identity, conversation: Conversation | None = None) -> tuple[Agent, Person, Bank, Conversation]:
    """What the visitor's demo needs, created if missing (person, bounded bank, conversation): for writes only."""
    agent = _demo_agent()
    person = get_or_create_person(team=agent.team, external_id=who.external_id)
    if who.user is not None and person.user_id is None:
        person = link_person_to_user(person=person, user=who.user)  # type: ignore[arg-type]
    bank = _bank(person)
    conversation = conversation or conversation_for(team=agent.team, agent=agent, person=person, conversation_id=None)
    return agent, person, bank, conversation


def state(who: Identity, conversation: Conversation | None = None) -> DemoState:
    """The visitor's demo, creating what it needs: for writes only."""
    agent, person, bank, conversation = _parties(who, conversation)
    return _read(agent=agent, person=person, bank=bank, conversation=conversation, who=who)


def peek(who: Identity | None, change: Change | None = None) -> DemoState:
    """What the visitor's demo holds, without writing anything: a visitor who has said nothing has nothing.
    The last change's notices stay until the next change (the caller keeps `change` between requests)."""
    agent = Agent.objects.select_related("team").filter(team__slug=DEMO_TEAM, slug=DEMO_AGENT).first()
    person = None
    if agent is not None and who is not None:
        person = Person.objects.for_team(agent.team).filter(external_id=who.external_id).first()
    if agent is None or person is None:
        return DemoState(
            person=None, agent=agent, bank=None, conversation=None, notes=[], messages=[],
            llm_configured=settings.LLM_PROVIDER != "rules", signed_in=who is not None and who.user is not None,
        )  # fmt: skip
    bank = Bank.objects.filter(team=agent.team, address=bank_id_for(Bank.Kind.GLOBAL, person, "")).first()
    conversation = (
        Conversation.objects.between(agent, person).filter(ended_at__isnull=True).order_by("-started_at", "-pk").first()
    )
    current = _read(agent=agent, person=person, bank=bank, conversation=conversation, who=who)
    if change is not None and bank is not None:
        current.events = _events(bank, change)
        current.change = change
    return current


def _read(
    *, agent: Agent, person: Person, bank: Bank | None, conversation: Conversation | None, who: Identity | None
) -> DemoState:
    return DemoState(
        person=person,
        agent=agent,
        bank=bank,
        conversation=conversation,
        notes=list(Note.objects.filter(team=agent.team, bank=bank).order_by("created_at")) if bank else [],
        messages=list(conversation.messages.order_by("order")) if conversation else [],
        llm_configured=settings.LLM_PROVIDER != "rules",
        signed_in=who is not None and who.user is not None,
    )


def _last_revision_id(bank_team_id: int) -> int:
    return Revision.objects.filter(team_id=bank_team_id).order_by("-id").values_list("id", flat=True).first() or 0


def _events(bank: Bank, change: Change) -> list[DemoEvent]:
    after, upto = change
    revisions = Revision.objects.filter(
        team_id=bank.team_id, bank=bank, id__gt=after, id__lte=upto, action__in=EVENT_ACTIONS
    ).order_by("id")
    return [_event(revision) for revision in revisions]


def _content(snapshot: dict[str, object] | None) -> str:
    value = (snapshot or {}).get("content")
    return value if isinstance(value, str) else ""


def _event(revision: Revision) -> DemoEvent:
    key = revision.note_key
    if revision.action == Revision.Action.EVICT:
        return DemoEvent("evict", key, plain.removal_sentence(revision, viewer="", agent_names={}))
    if revision.action == Revision.Action.REFUSED:
        return DemoEvent("refused", key, plain.refusal_sentence(revision, viewer="", agent_names={}))
    if revision.action == Revision.Action.DELETE:
        # An erased note's key is gone from the log too (it can be built from what the note said).
        if revision.erased:
            return DemoEvent("delete", "a fact", "what it said is erased, and so are the messages it was learned from.")
        return DemoEvent("delete", key, "what it said is erased.")
    if revision.action == Revision.Action.CREATE:
        return DemoEvent("create", key, f"“{_content(revision.after)}”")
    return DemoEvent("update", key, f"“{_content(revision.before)}” → “{_content(revision.after)}”")


def _changed(state: DemoState, team_id: int, since: int, previous: Change | None) -> DemoState:
    """Notices for what just changed, if anything did; otherwise the last change's stay, with a word that nothing did."""
    upto = _last_revision_id(team_id)
    fresh = _events(state.bank, (since, upto)) if state.bank is not None else []
    if fresh:
        state.events, state.events_are_new, state.change = fresh, True, (since, upto)
    else:
        state.nothing_kept = True
        if previous is not None and state.bank is not None:
            state.events, state.change = _events(state.bank, previous), previous
    return state


def say(who: Identity, text: str, previous: Change | None = None) -> DemoState:
    """Record what was said, let the curator keep what matters, then reply from memory alone."""
    agent, person, _, conversation = _parties(who)
    last_revision = _last_revision_id(agent.team_id)
    with transaction.atomic():
        message = record_message(conversation=conversation, role=Message.Role.USER, content=text)
    error = ""
    try:
        curate_conversation(conversation_id=conversation.pk)
    except ProviderError as exc:
        error = f"The memory step failed this time: {exc}"
    started = perf_counter()
    composition = compose(
        team=agent.team,
        agent=agent,
        person=person,
        conversation=conversation,
        message=message,
        profile=Profile.MEMORY_ONLY,
    )
    # The coach is given the person's memories: a turn, in "What agents looked up about you" like any other.
    record_turn(
        team=agent.team, agent=agent, person=person, conversation=conversation, message=message, profile=Profile.MEMORY_ONLY,
        composition=composition, started=started,
    )  # fmt: skip
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
    after = _changed(state(who, conversation), agent.team_id, last_revision, previous)
    after.composition = composition
    after.error = error
    return after


def _own_note(current: DemoState, note_id: int) -> Note | None:
    if current.bank is None:
        return None
    return (
        Note.objects.filter(team_id=current.bank.team_id, bank=current.bank, pk=note_id).select_related("bank").first()
    )


def correct(who: Identity, note_id: int, content: str, previous: Change | None = None) -> DemoState:
    """The visitor corrects one of the facts it keeps about them, through the write path (actor owner)."""
    current = peek(who, previous)
    note = _own_note(current, note_id)
    if note is None:
        current.error = "That fact is gone already: it was forgotten or deleted meanwhile."
        return current
    since = _last_revision_id(note.team_id)
    try:
        edit_note(note=note, actor=Actor(Revision.Actor.OWNER, who.actor_ref), mode="replace", content=content)
    except DomainError as exc:
        current.error = f"Not corrected: {exc.message}"
        return current
    return _changed(peek(who), note.team_id, since, previous)


def delete(who: Identity, note_id: int, previous: Change | None = None) -> DemoState:
    """The visitor deletes one fact: erased as from the lens (erase_note), with what its history said,
    the messages it was learned from and the summaries they fed."""
    current = peek(who, previous)
    note = _own_note(current, note_id)
    if note is None:
        current.error = "That fact is gone already: it was forgotten or deleted meanwhile."
        return current
    since = _last_revision_id(note.team_id)
    try:
        erase_note(note=note, actor=Actor(Revision.Actor.OWNER, who.actor_ref))
    except DomainError:  # deleted between the read above and the write: the same outcome
        current.error = "That fact is gone already: it was forgotten or deleted meanwhile."
        return current
    return _changed(peek(who), note.team_id, since, previous)


def new_conversation(who: Identity | None) -> None:
    """End the visitor's open conversation, if there is one; the next message starts a fresh one."""
    current = peek(who)
    if current.conversation is not None:
        end_conversation(conversation=current.conversation)
