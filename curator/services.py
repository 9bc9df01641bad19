"""The curator's passes and bank consolidation, applied through the memory write path.

A provider call never runs inside a transaction. Each pass then applies its plan in one
transaction (each write atomic on its own, so a refused operation costs only itself), together with
the watermark: a worker killed mid-pass leaves nothing half-written, and the pass runs again.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from config import metrics
from config.exceptions import DomainError
from conversations.models import Conversation, Message
from conversations.provenance import carry_note_sources, cited_messages, record_note_sources
from conversations.services import (
    mark_summary_rebuilds_asked,
    record_curation,
    record_curation_failure,
    record_nothing_to_curate,
    record_rebuilt_summary,
    request_curations_again,
    schedule_curation,
    update_summary,
)
from curator.exceptions import PlanRejected
from curator.models import ProviderCall
from curator.providers import (
    ChatLine,
    ConsolidationRequest,
    CurationRequest,
    KnownNote,
    LLMProvider,
    ProviderError,
    Usage,
    get_provider,
)
from curator.schemas import AppendDailyOp, ConsolidationPlan, CuratorPlan, EditOp, ForgetOp, RememberOp
from memory.models import Bank, Note, Proposal, Revision
from memory.queries import turn_notes, visible_notes
from memory.services import (
    Actor,
    append_daily,
    delete_note,
    edit_applicable_note,
    forget,
    latch_full,
    merge_notes,
    propose,
    record_consolidation,
    record_consolidation_failure,
    remember,
    request_consolidations_again,
    under_review,
)
from memory.services.proposals import note_for_key

logger = logging.getLogger(__name__)

STALE_AFTER = timedelta(minutes=10)  # a pending job older than this is enqueued again by the catch-up


def _record_call(
    *, team_id: int, purpose: str, usage: Usage | None, provider: LLMProvider, outcome: str, error: str = "",
    task_id: str = "", conversation_id: int | None = None, bank_id: int | None = None,
) -> None:  # fmt: skip
    ProviderCall.objects.create(
        team_id=team_id,
        purpose=purpose,
        provider=provider.name,
        model=getattr(provider, "model", ""),
        conversation_id=conversation_id,
        bank_id=bank_id,
        chars_in=usage.chars_in if usage else 0,
        chars_out=usage.chars_out if usage else 0,
        tokens_in=usage.tokens_in if usage else None,
        tokens_out=usage.tokens_out if usage else None,
        duration_ms=usage.duration_ms if usage else 0,
        outcome=outcome,
        error=error[:500],
        task_id=task_id,
    )
    metrics.count_provider_call(
        provider=provider.name,
        outcome=outcome,
        tokens_in=usage.tokens_in if usage else None,
        tokens_out=usage.tokens_out if usage else None,
    )


# --- curation ---------------------------------------------------------------------------------


def curate_conversation(*, conversation_id: int, task_id: str = "", provider: LLMProvider | None = None) -> str:
    """One curator pass over the messages after the watermark. Safe to run twice.

    Raises ProviderError when the provider failed (the task retries with backoff); nothing is
    applied then and the conversation stays pending.
    """
    conversation = Conversation.objects.select_related("team", "agent", "person").filter(pk=conversation_id).first()
    if conversation is None:
        return "skipped: the conversation is gone"
    start = conversation.curated_through
    unread = list(
        Message.objects.filter(team_id=conversation.team_id, conversation=conversation, order__gt=start).order_by(
            "order"
        )
    )
    if not unread:
        record_nothing_to_curate(conversation=conversation)
        return "skipped: nothing new since the last pass"
    through = unread[-1].order
    new = [m for m in unread if not m.is_erased]  # a tombstone says nothing to learn from
    if not new:
        with transaction.atomic():
            record_curation(conversation=conversation, through_order=through, outcome="read nothing: erased")
        return "read nothing: the new messages were erased"
    provider = provider or get_provider()
    # The digest the agent's turns show (memory.queries.build_digest's text), read as the composer
    # reads it: one hand-written query, kept by this process per version of the person's banks.
    digest = turn_notes(
        team=conversation.team,
        person=conversation.person,
        agent=conversation.agent,
        scope="",
        context=None,
        vector=None,
    ).digest
    request = CurationRequest(
        messages=[_chat_line(m) for m in new],
        digest=digest,
        summary=conversation.summary,
        today=timezone.localdate().isoformat(),
        notes=_known_notes(conversation),
    )
    try:
        plan = _ask(provider, request, conversation, task_id)
    except ProviderError as exc:
        record_curation_failure(conversation=conversation, error=str(exc))
        logger.warning("curation of conversation %s failed: %s", conversation.pk, exc)
        raise
    actor = Actor(Revision.Actor.CURATOR, f"{provider.name}:{getattr(provider, 'model', '')}", task_id)
    applied, refused = 0, []
    with transaction.atomic():
        locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
        if locked.curated_through != start:
            return "skipped: another pass already curated these messages"
        erased_meanwhile = Message.objects.filter(pk__in=[m.pk for m in new], erased_at__isnull=False).exists()
        if erased_meanwhile or locked.summary_updated_at != conversation.summary_updated_at:
            # What the provider read (a message, or the summary an erasure has cleared since) is
            # erased: nothing it proposed may be kept. Read again.
            record_nothing_to_curate(conversation=locked)
            schedule_curation(conversation=locked, force=True)
            return "discarded: a message was erased during the pass; curating again"
        for op in plan.operations:
            # Each write is atomic on its own and a refused one leaves only its refused revision,
            # which must survive: so no savepoint of ours around it.
            try:
                _apply(op, conversation, actor, read=new)
                applied += 1
            except DomainError as exc:
                refused.append(f"{op.op} {getattr(op, 'key', '')}: {exc.message}".strip())
                logger.info("curator operation refused in conversation %s: %s", conversation.pk, exc.message)
        # A stale summary was cleared by an erasure: only a rebuild from every message may replace it.
        if plan.summary is not None and not locked.summary_stale:
            update_summary(conversation=locked, summary=plan.summary, through_order=through)
        outcome = f"read {len(new)} messages; applied {applied} operation(s)" + (
            f"; refused {len(refused)}: " + " | ".join(refused) if refused else ""
        )
        record_curation(conversation=locked, through_order=through, outcome=outcome)
    return outcome


def rebuild_summary(*, conversation_id: int, task_id: str = "", provider: LLMProvider | None = None) -> str:
    """Rebuild a summary an erasure cleared, from the messages still there that the curator has read.
    Only the summary of the provider's answer is used: notes are learned in curator passes alone, so
    rereading old messages never brings back a note the person deleted. Safe to run twice."""
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None or not conversation.summary_stale:
        return "skipped: no summary to rebuild"
    through = conversation.curated_through
    kept = list(
        Message.objects.not_erased()
        .filter(team_id=conversation.team_id, conversation=conversation, order__lte=through)
        .order_by("order")
    )
    summary = ""
    if kept:
        provider = provider or get_provider()
        request = CurationRequest(
            messages=[_chat_line(m) for m in kept], digest="", summary="", today=timezone.localdate().isoformat()
        )
        summary = _ask(provider, request, conversation, task_id).summary or ""
    stored = record_rebuilt_summary(
        conversation=conversation, summary=summary, read_ids=[m.pk for m in kept], through_order=through
    )
    return f"rebuilt the summary from {len(kept)} messages" if stored else "skipped: out of date; asked again"


def _ask(provider: LLMProvider, request: CurationRequest, conversation: Conversation, task_id: str) -> CuratorPlan:
    """Ask the provider for a plan, recording the call either way (a failure is recorded, then raised)."""
    try:
        plan, usage = provider.curate(request)
    except ProviderError as exc:
        _record_call(
            team_id=conversation.team_id, purpose="curate", usage=None, provider=provider, outcome="failed",
            error=str(exc), task_id=task_id, conversation_id=conversation.pk,
        )  # fmt: skip
        raise
    _record_call(
        team_id=conversation.team_id, purpose="curate", usage=usage, provider=provider, outcome="ok",
        task_id=task_id, conversation_id=conversation.pk,
    )  # fmt: skip
    return plan


def _known_notes(conversation: Conversation) -> list[KnownNote]:
    """The notes the digest stands for (what the agent's turns may see), with their content."""
    visible = visible_notes(team=conversation.team, person=conversation.person, agent=conversation.agent)
    return [KnownNote(note.key, note.content, note.kind) for note in visible.notes]


def _chat_line(message: Message) -> ChatLine:
    role = "person" if message.role == Message.Role.USER else "agent"
    return ChatLine(role, message.content, message.created_at, message.pk)


def _apply(
    op: RememberOp | AppendDailyOp | EditOp | ForgetOp, conversation: Conversation, actor: Actor, *, read: list[Message]
) -> None:
    team, person = conversation.team, conversation.person
    if isinstance(op, ForgetOp):
        forget(
            team=team, person=person, actor=actor, key=op.key, reason=op.reason or "the curator found it no longer true"
        )
        return
    if under_review(person, actor):
        _propose(op, conversation, actor, read=read)
        return
    if isinstance(op, RememberOp):
        result = remember(
            team=team, person=person, actor=actor, key=op.key, description=op.description, content=op.content,
            kind=op.kind, bank=op.bank, category=op.category, source=Note.Source.CURATOR,
            expires_at=timezone.now() + timedelta(hours=op.expires_in_hours) if op.expires_in_hours else None,
            reason=op.reason,
        )  # fmt: skip
    elif isinstance(op, EditOp):
        result = edit_applicable_note(
            team=team, person=person, actor=actor, key=op.key, find=op.find, content=op.content,
            reason=op.reason or "the curator found part of it no longer true",
        )  # fmt: skip
    else:
        result = append_daily(team=team, person=person, actor=actor, text=op.text)
    if result.note is not None:
        what = f"{op.op} in conversation {conversation.pk}"
        record_note_sources(note=result.note, message_ids=cited_messages(cited=op.sources, read=read, what=what))


def _propose(op: RememberOp | AppendDailyOp | EditOp, conversation: Conversation, actor: Actor, *,
             read: list[Message]) -> None:  # fmt: skip
    """The operation kept for the person's review (memory.services.proposals) instead of applied."""
    team, person = conversation.team, conversation.person
    sources = cited_messages(cited=op.sources, read=read, what=f"{op.op} in conversation {conversation.pk}")
    proposing = partial(
        propose, team=team, person=person, agent=conversation.agent, actor=actor, source_messages=sources
    )
    if isinstance(op, RememberOp):
        expires_at = timezone.now() + timedelta(hours=op.expires_in_hours) if op.expires_in_hours else None
        proposing(
            operation=Proposal.Operation.REMEMBER, key=op.key, description=op.description,
            content=op.content, kind=op.kind, bank=op.bank, category=op.category, details={"expires_at": expires_at},
        )  # fmt: skip
    elif isinstance(op, EditOp):
        note = note_for_key(team=team, person=person, key=op.key)
        proposing(operation=Proposal.Operation.EDIT, note=note, find=op.find, content=op.content)
    else:
        proposing(operation=Proposal.Operation.DAILY, bank=Bank.Kind.GLOBAL, content=op.text)


# --- consolidation ----------------------------------------------------------------------------


def _note_view(note: Note) -> dict[str, object]:
    return {
        "key": note.key,
        "description": note.description,
        "content": note.content,
        "kind": note.kind,
        "scope_refs": note.scope_refs,
        "semantics": note.semantics,
        "updated_at": note.updated_at.isoformat(),
    }


def _validate_plan(plan: ConsolidationPlan, notes: dict[str, Note]) -> None:
    """Reject the whole plan on any violation: unknown keys, a key used twice, or a merge across scope."""
    touched: set[str] = set()
    for merge in plan.merges:
        keys = [merge.keep, *merge.absorb]
        for key in keys:
            if key not in notes:
                raise PlanRejected(f"the plan names '{key}', which is not in the bank")
            if key in touched:
                raise PlanRejected(f"the plan uses '{key}' twice")
            touched.add(key)
        keep = notes[merge.keep]
        for key in merge.absorb:
            other = notes[key]
            if other.scope_refs != keep.scope_refs or sorted(other.semantics) != sorted(keep.semantics):
                raise PlanRejected(f"'{key}' and '{merge.keep}' differ in scope or semantics and must not merge")
    for drop in plan.forgets:
        if drop.key not in notes:
            raise PlanRejected(f"the plan forgets '{drop.key}', which is not in the bank")
        if drop.key in touched:
            raise PlanRejected(f"the plan uses '{drop.key}' twice")
        touched.add(drop.key)


def consolidate_bank(*, bank_id: int, task_id: str = "", provider: LLMProvider | None = None) -> str:
    """Run one consolidation of a bank. Safe to run twice; concurrent runs apply at most one plan."""
    bank = Bank.objects.filter(pk=bank_id).first()
    if bank is None or not bank.consolidation_pending:
        return "skipped: no consolidation pending"
    provider = provider or get_provider()
    notes = list(Note.objects.filter(team_id=bank.team_id, bank=bank).order_by("key"))
    target = int(bank.soft_limit * settings.CONSOLIDATION_TARGET)
    request = ConsolidationRequest(
        bank=bank.address, notes=[_note_view(n) for n in notes], soft_limit=bank.soft_limit, target=target
    )
    try:
        plan, usage = provider.consolidate(request)
    except ProviderError as exc:
        _record_call(
            team_id=bank.team_id, purpose="consolidate", usage=None, provider=provider, outcome="failed",
            error=str(exc), task_id=task_id, bank_id=bank.pk,
        )  # fmt: skip
        record_consolidation_failure(bank=bank, error=str(exc))
        raise
    _record_call(
        team_id=bank.team_id, purpose="consolidate", usage=usage, provider=provider, outcome="ok",
        task_id=task_id, bank_id=bank.pk,
    )  # fmt: skip
    actor = Actor(Revision.Actor.CONSOLIDATION, f"{provider.name}:{getattr(provider, 'model', '')}", task_id)
    with transaction.atomic():
        locked = Bank.objects.select_for_update().get(pk=bank.pk)
        if not locked.consolidation_pending:
            return "skipped: another run already consolidated this bank"
        current = {n.key: n for n in Note.objects.filter(team_id=locked.team_id, bank=locked).select_related("bank")}
        merged = forgotten = 0
        try:
            _validate_plan(plan, current)
        except PlanRejected as exc:
            verdict = f"plan rejected whole ({exc.message})"
        else:
            for merge in plan.merges:
                carry_note_sources(keep=current[merge.keep], absorb=[current[k] for k in merge.absorb])
                merge_notes(
                    keep=current[merge.keep], absorb=[current[k] for k in merge.absorb], actor=actor,
                    content=merge.content, description=merge.description, reason="consolidation",
                )  # fmt: skip
                merged += len(merge.absorb)
            for drop in plan.forgets:
                delete_note(note=current[drop.key], actor=actor, reason=f"consolidation: {drop.reason}")
                forgotten += 1
            verdict = f"merged {merged}, forgot {forgotten}"
        count = Note.objects.filter(team_id=locked.team_id, bank=locked).count()
        if count > locked.soft_limit:
            latch_full(
                bank=locked, actor=actor,
                reason=f"{count} notes remain after consolidation ({verdict}); the soft limit is {locked.soft_limit}",
            )  # fmt: skip
            outcome = f"{verdict}; still {count} notes over the soft limit {locked.soft_limit}: latched FULL"
        else:
            outcome = f"{verdict}; {count} notes (target {target}, soft limit {locked.soft_limit})"
        record_consolidation(bank=locked, outcome=outcome)
    logger.info("consolidated %s: %s", bank.address, outcome)
    return outcome


# --- catching up ------------------------------------------------------------------------------


def stale_summaries() -> list[int]:
    """Conversations whose summary an erasure cleared and no rebuild has replaced since."""
    cutoff = timezone.now() - STALE_AFTER
    return list(
        Conversation.objects.filter(summary_stale=True, summary_updated_at__lt=cutoff).values_list("pk", flat=True)[
            :500
        ]
    )


@transaction.atomic
def claim_stale_summaries() -> list[int]:
    """Ask again for the rebuilds of stale summaries, marking them asked now (the clock restarts)."""
    conversation_ids = stale_summaries()
    mark_summary_rebuilds_asked(conversation_ids=conversation_ids, asked_at=timezone.now())
    return conversation_ids


def stale_jobs() -> tuple[list[int], list[int]]:
    """Conversations due for curation and banks waiting for consolidation whose job never ran
    (the broker was down, or a worker died): the catch-up enqueues them again."""
    cutoff = timezone.now() - STALE_AFTER
    due = Q(exchanges_since_curation__gte=settings.CURATOR_EVERY_EXCHANGES) | Q(
        chars_since_curation__gte=settings.CURATOR_EVERY_CHARS
    )
    not_waiting = (
        Q(curation_pending=False) | Q(curation_requested_at__lt=cutoff) | Q(curation_requested_at__isnull=True)
    )
    conversations = Conversation.objects.filter(due & not_waiting).values_list("pk", flat=True)[:500]
    banks = Bank.objects.filter(
        consolidation_pending=True, is_full=False, consolidation_requested_at__lt=cutoff
    ).values_list("pk", flat=True)[:500]
    return list(conversations), list(banks)


@transaction.atomic
def claim_stale_jobs() -> tuple[list[int], list[int]]:
    """Mark stale jobs as requested now (so the next catch-up waits again) and return them to enqueue."""
    conversations, banks = stale_jobs()
    now = timezone.now()
    request_curations_again(conversation_ids=conversations, requested_at=now)
    request_consolidations_again(bank_ids=banks, requested_at=now)
    return conversations, banks
