"""Review: what agents learn about a person who asked for it waits for their approval.

Review is a state of the person (Person.review_writes), not a writer of its own. While it is on,
the writers that learn on their own (the agent tools and the curator) call `propose` instead of
the write they would have made; the proposal holds that write's arguments and where it was learned
(its source messages), and no read ever looks at it. Keeping it runs that same write through the one
write path (caps, the FULL latch, the revision log, the vector, the sources), as its original writer;
a refusal there leaves it waiting. Not keeping it, or its expiry after PROPOSAL_DAYS, blanks every
text it held. The revision log records each proposal and each decision.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Agent, Person, Team
from config.exceptions import DomainError, NotFound
from config.text import TextKind, check_text
from memory import provenance
from memory.banks import bank_id_for, bank_kind_for
from memory.exceptions import EditMismatch, InvalidNote, NoteNotFound, ProposalDecided, TooLong
from memory.models import CONTENT_MAX, Bank, Note, Proposal, Revision
from memory.services.notes import (
    WriteResult,
    _applicable_note,
    append_daily,
    append_observation,
    edit_note,
    remember,
)
from memory.services.revisions import Actor, _log, _record_refusal
from memory.validation import (
    check_category,
    check_content,
    check_description,
    check_key,
    check_kind,
    check_scope_refs,
    check_semantics,
    validate_scope,
)
from webhooks.models import EventType
from webhooks.services import emit_event

logger = logging.getLogger(__name__)

REVIEWED_WRITERS = frozenset({Revision.Actor.AGENT, Revision.Actor.CURATOR})


def under_review(person: Person | None, actor: Actor) -> bool:
    """Whether this write becomes a proposal: one an agent or the curator makes about a person who
    asked to review what is kept. The person's own edits, admins and imports write as before."""
    return person is not None and person.review_writes and actor.kind in REVIEWED_WRITERS


def _placeholder(proposal_id: int) -> str:
    """What the log calls a proposal instead of its key, which may have been built from its content."""
    return f"proposal-{proposal_id}"


def _approval_marker(proposal_id: int) -> str:
    # The request id of every write an approval attempts: a refusal logged at approval carries the
    # proposal's words, and not keeping the proposal later finds it (and blanks it) by this id.
    return f"proposal-{proposal_id}"


def note_for_key(*, team: Team, person: Person, key: str) -> Note:
    """The note an edit by key (the curator's) would change, as edit_applicable_note finds it."""
    note = _applicable_note(team=team, person=person, key=check_key(key), scope="", refs={})
    if note is None:
        raise NoteNotFound(f"No note with key '{key}' applies here; nothing was proposed.", field="key")
    return note


def proposal_created(proposal_id: int) -> None:
    """Runs once a new proposal has committed (its `proposal.created` webhook event is emitted with it)."""
    logger.info("proposal %s waits for review", proposal_id)


def _check_what(team: Team, operation: str, fields: dict[str, Any], note: Note | None) -> dict[str, Any]:
    """The proposal's fields, checked as the write would check them (key, text, caps of each field).
    What depends on the bank at the time (its caps, its latch) is checked when it is kept."""
    details = dict(fields.pop("details", {}) or {})
    if operation == Proposal.Operation.REMEMBER:
        fields["key"] = check_key(fields["key"])
        fields["description"] = check_description(fields["description"])
        fields["content"] = check_content(fields["content"])
        fields["kind"] = check_kind(fields["kind"])
        fields["category"] = check_category(fields.get("category"))
        details["scope_refs"] = check_scope_refs(details.get("scope_refs"))
        details["semantics"] = check_semantics(team, details.get("semantics"))
        expires_at = details.get("expires_at")
        if isinstance(expires_at, datetime):
            if timezone.is_naive(expires_at):
                raise InvalidNote("expires_at needs a timezone, e.g. 2026-12-01T09:00:00Z.", field="expires_at")
            details["expires_at"] = expires_at.isoformat()
    elif operation == Proposal.Operation.APPEND:
        fields["category"] = check_category(fields["category"])
        fields["key"] = check_key(fields.get("key") or fields["category"], "category")
        fields["content"] = check_content(fields["content"], "observation").strip()
        if fields.get("description"):
            fields["description"] = check_description(fields["description"])
    elif operation == Proposal.Operation.DAILY:
        fields["content"] = check_content(fields["content"], "text").strip()
    else:
        assert note is not None  # an edit names its note
        mode = details.get("mode", "find_replace")
        if mode not in ("find_replace", "replace"):
            raise InvalidNote("mode must be find_replace or replace.", field="mode")
        check_text(fields["content"], field="content", kind=TextKind.TEXT, error=InvalidNote)
        if len(fields["content"]) > CONTENT_MAX:
            raise TooLong(
                f"content is {len(fields['content'])} characters; the limit is {CONTENT_MAX}.", field="content"
            )
        if mode == "find_replace":
            find = fields.get("find") or ""
            if not find:
                raise InvalidNote("find_replace needs the text to find.", field="find")
            check_text(find, field="find", kind=TextKind.TEXT, error=InvalidNote)
            if find not in note.content:
                raise EditMismatch("The text to find does not occur in the note; nothing was proposed.", field="find")
        elif not fields["content"].strip():
            raise InvalidNote("content must not be empty.", field="content")
        fields["key"] = note.key
    fields["details"] = details
    return fields


def propose(
    *,
    team: Team,
    person: Person,
    agent: Agent | None,
    actor: Actor,
    operation: str,
    bank: str = Bank.Kind.PRIVATE,
    scope: str = "",
    key: str = "",
    description: str = "",
    content: str,
    find: str = "",
    kind: str = Note.Kind.FACT,
    category: str | None = "",
    details: dict[str, Any] | None = None,
    note: Note | None = None,
    source_messages: Iterable[int] = (),
    turn_id: int | None = None,
) -> Proposal:
    """Keep a write for the person's review instead of making it. A malformed write is refused (and
    logged) as the write path would refuse it; nothing else is checked until it is kept."""
    if person.team_id != team.pk:
        raise NotFound("That person is not known in this team.", field="person")
    fields: dict[str, Any] = {
        "key": key, "description": description, "content": content, "find": find, "kind": kind,
        "category": category or "", "details": details,
    }  # fmt: skip
    bank_ref = f"(unresolved: proposal of {operation})"
    try:
        clean_scope = validate_scope(scope)
        kind_of_bank = note.bank.kind if note is not None else bank_kind_for(bank, clean_scope)
        bank_ref = (
            note.bank.address
            if note is not None
            else bank_id_for(kind_of_bank, None if kind_of_bank == Bank.Kind.SHARED else person, clean_scope)
        )
        checked = _check_what(team, operation, fields, note)
    except DomainError as exc:
        attempted = {name: value for name, value in fields.items() if value and name != "details"}
        _record_refusal(
            team=team, person=person, bank_ref=bank_ref, actor=actor, key=key if isinstance(key, str) else "",
            attempted=attempted, exc=exc,
        )  # fmt: skip
        raise
    with transaction.atomic():
        proposal = Proposal.objects.create(
            team=team, person=person, agent=agent, actor=actor.kind, actor_ref=actor.ref, operation=operation,
            bank=bank if note is None else note.bank.kind, bank_ref=bank_ref,
            scope=clean_scope if note is None else note.bank.scope,
            note_id=note.pk if note is not None else None, source_messages=list(dict.fromkeys(source_messages)),
            turn_id=turn_id, **checked,
        )  # fmt: skip
        # The event only: what it would write stays in the proposal (which no read looks at), so
        # neither the revisions API nor an export shows it, and not keeping it has one row to blank.
        Revision.objects.create(
            team=team, bank=None, bank_ref=bank_ref, person=person, note_key=_placeholder(proposal.pk),
            note_id=proposal.note_id, action=Revision.Action.PROPOSE, actor=actor.kind, actor_ref=actor.ref,
            after={"proposal": proposal.pk, "operation": operation},
            reason=f"proposal {proposal.pk}: waits for the person's review", request_id=actor.request_id,
        )  # fmt: skip
        # What was proposed, not its words: they wait for the person, and a rejection blanks them.
        emit_event(
            team_id=team.pk,
            event_type=EventType.PROPOSAL_CREATED,
            data={
                "proposal": proposal.pk,
                "operation": operation,
                "bank": bank_ref,
                "note": proposal.note_id,
                "actor": actor.kind,
                "agent": agent.slug if agent is not None else None,
                "expires_at": (proposal.created_at + timedelta(days=settings.PROPOSAL_DAYS)).isoformat(),
            },
            subject=f"proposal:{proposal.pk}",
            person_id=person.pk,
        )
        transaction.on_commit(partial(proposal_created, proposal.pk))
    return proposal


def _write(proposal: Proposal, writer: Actor, content: str) -> WriteResult:
    """The write the proposal stands for, through the one write path, as its original writer."""
    team, person, details = proposal.team, proposal.person, proposal.details
    if proposal.operation == Proposal.Operation.REMEMBER:
        expires_at = details.get("expires_at")
        return remember(
            team=team, person=person, actor=writer, key=proposal.key, description=proposal.description,
            content=content, scope=proposal.scope, bank=proposal.bank, kind=proposal.kind,
            category=proposal.category, scope_refs=details.get("scope_refs"), semantics=details.get("semantics"),
            source=Note.Source.CURATOR if proposal.actor == Revision.Actor.CURATOR else Note.Source.REMEMBER,
            expires_at=datetime.fromisoformat(expires_at) if expires_at else None,
            reason=f"kept on review (proposal {proposal.pk})",
        )  # fmt: skip
    if proposal.operation == Proposal.Operation.APPEND:
        return append_observation(
            team=team, person=person, actor=writer, category=proposal.category, observation=content,
            summary=proposal.description or None, bank=proposal.bank, scope=proposal.scope, key=proposal.key,
            source=Note.Source.CURATOR if proposal.actor == Revision.Actor.CURATOR else Note.Source.REMEMBER,
        )  # fmt: skip
    if proposal.operation == Proposal.Operation.DAILY:
        return append_daily(team=team, person=person, actor=writer, text=content)
    note = Note.objects.select_related("bank").filter(team=team, pk=proposal.note_id or 0).first()
    if note is None:
        raise NotFound("The note this proposal would change no longer exists; nothing was kept.", field="note")
    return edit_note(
        note=note, actor=writer, mode=details.get("mode", "find_replace"), find=proposal.find or None,
        content=content, reason=f"kept on review (proposal {proposal.pk})",
    )  # fmt: skip


def _pending(proposal: Proposal) -> Proposal:
    """The proposal, locked; ProposalDecided if it was decided meanwhile."""
    locked = (
        Proposal.objects.select_for_update(of=("self",)).select_related("team", "person").filter(pk=proposal.pk).first()
    )
    if locked is None:
        raise NotFound("No such proposal.", field="id")
    if locked.status != Proposal.Status.PENDING:
        raise ProposalDecided(
            f"Proposal {locked.pk} was already decided ({locked.get_status_display().lower()}).", field="id"
        )
    return locked


def _close(proposal: Proposal, status: str, decider: Actor, kept: Note | None = None) -> None:
    """Mark the proposal decided and blank what it held."""
    proposal.status = status
    proposal.decided_at = timezone.now()
    proposal.decided_by = decider.ref or decider.kind
    proposal.key = proposal.description = proposal.content = proposal.find = proposal.category = ""
    proposal.details = {}
    if kept is not None:
        proposal.note_id = kept.pk
    proposal.save()
    if status != Proposal.Status.KEPT:
        # An approval refused earlier logged what it attempted.
        Revision.objects.filter(
            team_id=proposal.team_id, action=Revision.Action.REFUSED, request_id=_approval_marker(proposal.pk)
        ).update(
            after=None, before=None, note_key=_placeholder(proposal.pk), erased=True,
            reason=f"an attempt to keep proposal {proposal.pk} was refused",
        )  # fmt: skip


def keep_proposal(*, proposal: Proposal, decider: Actor, content: str | None = None) -> WriteResult:
    """Keep a proposal: its write runs through the write path as its original writer (caps, latch,
    log, vector), with `content` instead of the proposed text when the person edited it, and the
    sources it named are recorded. A refusal there (the bank is full, say) is raised and leaves the
    proposal waiting; the refusal is logged like any other."""
    refused: DomainError | None = None
    with transaction.atomic():
        locked = _pending(proposal)
        if content is not None:
            check_text(content, field="content", kind=TextKind.TEXT, error=InvalidNote)
        writer = Actor(locked.actor, locked.actor_ref, _approval_marker(locked.pk))
        try:
            result = _write(locked, writer, locked.content if content is None else content)
        except DomainError as exc:  # the write path logged the refusal: that row must commit
            refused = exc
        else:
            if result.note is not None:
                provenance.record_kept_sources(result.note, list(locked.source_messages), locked.turn_id)
            edited = content is not None and content != locked.content
            _close(locked, Proposal.Status.KEPT, decider, kept=result.note)
            _log(
                result.bank, decider, Revision.Action.KEEP, note=result.note, key=result.key,
                reason=f"proposal {locked.pk} kept" + (" with the person's changes" if edited else ""),
                subject=locked.person,
            )  # fmt: skip
    if refused is not None:
        raise refused
    return result


def _decline(proposal: Proposal, status: str, decider: Actor, reason: str) -> Proposal:
    locked = _pending(proposal)
    _close(locked, status, decider)
    Revision.objects.create(
        team_id=locked.team_id, bank=None, bank_ref=f"(proposal {locked.pk})", person_id=locked.person_id,
        note_key=_placeholder(locked.pk), note_id=locked.note_id, action=Revision.Action.REJECT, actor=decider.kind,
        actor_ref=decider.ref, after={"proposal": locked.pk, "status": status}, reason=reason,
        request_id=decider.request_id,
    )  # fmt: skip
    return locked


@transaction.atomic
def reject_proposal(*, proposal: Proposal, decider: Actor) -> Proposal:
    """Don't keep a proposal: its words are blanked everywhere they were kept (the proposal, refused
    attempts to keep it); the row stays as the decision."""
    return _decline(proposal, Proposal.Status.REJECTED, decider, f"proposal {proposal.pk} not kept")


def expire_proposals(*, now: datetime | None = None) -> int:
    """Proposals waiting longer than PROPOSAL_DAYS expire unkept (declined as by the person). Safe to
    run twice: each is claimed under its lock, and one decided meanwhile is skipped."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.PROPOSAL_DAYS)
    actor = Actor(Revision.Actor.EXPIRY, "expire_proposals")
    expired = 0
    due = Proposal.objects.pending().filter(created_at__lt=cutoff).order_by("created_at", "pk")
    for proposal_id in list(due.values_list("pk", flat=True)[:1000]):
        with transaction.atomic():
            proposal = Proposal.objects.select_for_update(skip_locked=True).filter(pk=proposal_id).first()
            if proposal is None or proposal.status != Proposal.Status.PENDING:
                continue  # being decided, or decided since
            reason = f"proposal {proposal.pk} expired unkept after {settings.PROPOSAL_DAYS} days"
            _decline(proposal, Proposal.Status.EXPIRED, actor, reason)
            expired += 1
    return expired


@transaction.atomic
def set_review_writes(*, person: Person, review: bool) -> Person:
    """Turn review on or off for a person. Turning it off keeps what waits: each proposal is still the
    person's to keep or not (or expires)."""
    Person.objects.filter(pk=person.pk).update(review_writes=review)
    person.review_writes = review
    return person
