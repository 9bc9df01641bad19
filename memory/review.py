"""What the lens shows of review: the person's toggle and what waits for them, in words."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings

from accounts.models import Person
from memory.models import Proposal
from memory.provenance import Origin, proposal_origins


@dataclass
class Waiting:
    """One proposal as the person reads it."""

    proposal: Proposal
    who: str  # the agent's name
    sentence: str  # what it wants to keep, in words
    text: str  # the words it would keep (what "Edit and keep" starts from)
    expires_at: datetime
    origins: list[Origin]
    error: str = ""  # why keeping it was refused just now


@dataclass
class ReviewPanel:
    person: Person
    yours: bool  # the signed-in login's own person: the panel says "you"
    waiting: list[Waiting] = field(default_factory=list)
    error: str = ""  # a refusal about a proposal no longer waiting (decided in another tab)

    @property
    def days(self) -> int:
        return int(settings.PROPOSAL_DAYS)

    @property
    def heading(self) -> str:
        """Its heading's level, as the lens nests it: under the person, among their banks."""
        return "3" if self.yours else "4"


def _sentence(proposal: Proposal, who: str) -> str:
    if proposal.operation == Proposal.Operation.EDIT:
        if proposal.find:
            return f"{who} wants to change “{proposal.key}”: replace “{proposal.find}” with"
        return f"{who} wants to rewrite “{proposal.key}” as"
    if proposal.operation == Proposal.Operation.APPEND:
        return f"{who} wants to add to what it knows about {proposal.category.replace('-', ' ')}:"
    if proposal.operation == Proposal.Operation.DAILY:
        return f"{who} wants to add to the note of the day:"
    return f"{who} wants to remember “{proposal.description}”:"


def review_panel(person: Person, *, yours: bool, problem: tuple[int, str] | None = None) -> ReviewPanel:
    """The person's review toggle and what waits for them, oldest first; `problem` is why keeping
    or declining one of them (its id) was refused just now."""
    panel = ReviewPanel(person=person, yours=yours)
    pending = list(
        Proposal.objects.filter(team_id=person.team_id, person=person)
        .pending()
        .select_related("agent")
        .order_by("created_at", "id")
    )
    origins = proposal_origins(person.team_id, [pk for proposal in pending for pk in proposal.source_messages])
    for proposal in pending:
        who = proposal.agent.name if proposal.agent is not None else "An agent"
        panel.waiting.append(
            Waiting(
                proposal=proposal,
                who=who,
                sentence=_sentence(proposal, who),
                text=proposal.content,
                expires_at=proposal.created_at + timedelta(days=settings.PROPOSAL_DAYS),
                origins=sorted(
                    (origins[pk] for pk in proposal.source_messages if pk in origins), key=lambda origin: origin.when
                ),
                error=problem[1] if problem is not None and problem[0] == proposal.pk else "",
            )
        )
    if problem is not None and not any(item.error for item in panel.waiting):
        panel.error = problem[1]
    return panel
