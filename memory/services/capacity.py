"""What a bank may hold: its limits and the FULL latch, bounded-bank admission and eviction, and
scheduling consolidation when a curated bank grows past its soft limit."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from accounts.models import Person, Team
from config.celery import app
from config.prepared import Prepared
from memory import policy
from memory.banks import bank_id_for
from memory.exceptions import BankFull, InvalidNote, Refused
from memory.models import Bank, Note, Revision
from memory.services.revisions import Actor, _log
from memory.validation import validate_scope

CONSOLIDATION_TASK = "curator.tasks.consolidate_bank"


def get_or_create_bank(*, team: Team, person: Person | None, scope: str, kind: str) -> Bank:
    """Banks are created on first use with the policy and limits configured at that moment."""
    scope = validate_scope(scope)
    person_for_bank = None if kind == Bank.Kind.SHARED else person
    address = bank_id_for(kind, person_for_bank, scope)
    existing = Bank.objects.filter(team=team, address=address).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            return Bank.objects.create(
                team=team,
                address=address,
                kind=kind,
                person=person_for_bank,
                scope="" if kind == Bank.Kind.GLOBAL else scope,
                soft_limit=settings.MEMORY_SOFT_LIMIT,
                hard_limit=settings.MEMORY_HARD_LIMIT,
                capacity=settings.BOUNDED_CAPACITY,
            )
    except IntegrityError:  # created concurrently
        return Bank.objects.get(team=team, address=address)


@transaction.atomic
def update_bank_settings(*, bank: Bank, actor: Actor, changes: dict[str, Any]) -> Bank:
    """Change a bank's policy, limits or capacity (admin keys and the Django admin)."""
    locked = Bank.objects.select_for_update().get(pk=bank.pk)
    before = {name: getattr(locked, name) for name in changes}
    for name, value in changes.items():
        setattr(locked, name, value)
    if locked.hard_limit < locked.soft_limit:
        raise InvalidNote(
            f"hard_limit ({locked.hard_limit}) must be at least soft_limit ({locked.soft_limit}).", field="hard_limit"
        )
    if locked.capacity < 1:
        raise InvalidNote("capacity must be at least 1.", field="capacity")
    locked.save(update_fields=list(changes))
    _log(locked, actor, Revision.Action.LATCH, reason=f"settings changed: {before} -> {changes}")
    if locked.policy == Bank.Policy.BOUNDED:
        _shrink_to_capacity(locked, actor)
    if locked.is_full and _count(locked) < locked.soft_limit:
        _clear_latch(locked, actor, "the count is under the new soft limit")
    return locked


def _count(bank: Bank) -> int:
    return Note.objects.filter(team_id=bank.team_id, bank=bank).count()


def _lock(bank: Bank) -> Bank:
    # One writer per bank at a time: limits, capacity and upserts by key are decided on a
    # consistent count, and concurrent upserts of one key serialise here instead of racing.
    return Bank.objects.select_for_update().get(pk=bank.pk)


# The bank's row only: a lock on the team's would hold every other write of the team (and every
# insert that names the team, whose foreign key check waits for it) until this transaction ends.
_LOCKED_BANK = Prepared(
    lambda team_id, address: Bank.objects.select_for_update(of=("self",)).filter(team_id=team_id, address=address)[:1],
    team_id=int,
    address=str,
)


def _lock_bank(*, team: Team, person: Person | None, scope: str, kind: str) -> Bank:
    """The bank, created on first use, locked until the transaction ends (see _lock): one round
    trip when it exists."""
    address = bank_id_for(kind, None if kind == Bank.Kind.SHARED else person, validate_scope(scope))
    locked = _LOCKED_BANK.first(team_id=team.pk, address=address)
    if locked is not None:
        return locked
    return _lock(get_or_create_bank(team=team, person=person, scope=scope, kind=kind))


def _remove_expired(bank: Bank, actor: Actor, now: datetime) -> None:
    for expired in Note.objects.filter(team_id=bank.team_id, bank=bank, expires_at__lte=now):
        assert expired.expires_at is not None  # the filter above
        expired.bank = bank
        _remove(expired, Actor(Revision.Actor.EXPIRY, "write-path", actor.request_id), Revision.Action.DELETE,
                f"expired at {expired.expires_at.isoformat()}")  # fmt: skip


def _make_room(bank: Bank, actor: Actor, fields: dict[str, Any], now: datetime) -> tuple[list[dict[str, Any]], int]:
    """Apply the bank's policy to a net-new note: refuse it, or evict what gives way (before the
    write). Returns what was evicted and how many notes the bank holds before the newcomer."""
    # Expired notes no longer apply; the periodic sweep may not have reached them yet, and they
    # must not hold a place against a note that does.
    if bank.policy == Bank.Policy.CURATED:
        counts = Note.objects.filter(team_id=bank.team_id, bank=bank).aggregate(
            held=models.Count("pk"), expired=models.Count("pk", filter=models.Q(expires_at__lte=now))
        )
        count = counts["held"]
        if counts["expired"]:
            _remove_expired(bank, actor, now)
            count = _count(bank)
        if count >= bank.hard_limit:
            raise BankFull(
                f"Bank {bank.address} holds {count} notes, its hard limit. Offer to drop something old; "
                "updates to existing keys still work.",
            )
        if bank.is_full:
            raise BankFull(
                f"Bank {bank.address} is FULL: new notes are refused until something is removed. "
                "Offer the person to drop something old; corrections to existing keys still work.",
            )
        return [], count

    _remove_expired(bank, actor, now)
    held_notes = list(Note.objects.filter(team_id=bank.team_id, bank=bank))
    held = [policy.Candidate(n.key, n.kind, n.updated_at, n.repetitions) for n in held_notes]
    newcomer = policy.Candidate(fields["key"], fields["kind"], now, 1)
    verdict = policy.judge_newcomer(newcomer, held, bank.capacity, now)
    if not verdict.admit:
        loser = policy.weakest(held, now)
        raise Refused(
            f"Bank {bank.address} is at its capacity of {bank.capacity}. The new note '{fields['key']}' "
            f"({fields['kind']}, worth {verdict.newcomer_worth:.1f}) is worth less than the weakest note it holds, "
            f"'{loser.key}' ({loser.kind}, worth {verdict.weakest_worth:.1f}), so nothing was changed.",
            field="key",
        )
    if verdict.evict is None:
        return [], len(held_notes)
    victim = next(n for n in held_notes if n.key == verdict.evict.key)
    reason = (
        f"capacity {bank.capacity} reached; evicted to make room for '{fields['key']}' ({fields['kind']}, "
        f"worth {verdict.newcomer_worth:.1f}) as the weakest note (worth {verdict.weakest_worth:.1f})"
    )
    info = {"id": victim.pk, "key": victim.key, "kind": victim.kind, "reason": reason}
    _remove(victim, Actor(Revision.Actor.POLICY, "bounded-eviction", actor.request_id), Revision.Action.EVICT, reason)
    return [info], len(held_notes) - 1


def _shrink_to_capacity(bank: Bank, actor: Actor) -> None:
    """A bounded bank over its capacity (lowered, or switched from curated) gives up its weakest notes now."""
    now = timezone.now()
    held = list(Note.objects.filter(team_id=bank.team_id, bank=bank))
    while len(held) > bank.capacity:
        candidates = [policy.Candidate(n.key, n.kind, n.updated_at, n.repetitions) for n in held]
        loser = policy.weakest(candidates, now)
        victim = next(n for n in held if n.key == loser.key)
        held.remove(victim)
        victim.bank = bank
        reason = f"capacity is {bank.capacity}; evicted as the weakest note (worth {policy.worth(loser, now):.1f})"
        _remove(
            victim, Actor(Revision.Actor.POLICY, "bounded-eviction", actor.request_id), Revision.Action.EVICT, reason
        )


def _after_growth(bank: Bank, count: int | None = None) -> None:
    """A note was added: past the soft limit, a curated bank asks for consolidation. `count` is
    how many notes the bank now holds, when the caller knows (it holds the bank's lock)."""
    if bank.policy != Bank.Policy.CURATED or bank.is_full or bank.consolidation_pending:
        return
    if (_count(bank) if count is None else count) <= bank.soft_limit:
        return
    request_consolidation(bank)


def request_consolidation(bank: Bank) -> bool:
    """Mark the bank as waiting for consolidation and enqueue it once; repeated crossings coalesce."""
    claimed = Bank.objects.filter(pk=bank.pk, consolidation_pending=False, is_full=False).update(
        consolidation_pending=True, consolidation_requested_at=timezone.now()
    )
    if not claimed:
        return False
    bank.consolidation_pending = True
    transaction.on_commit(lambda: _enqueue_consolidation(bank.pk), robust=True)
    return True


def _enqueue_consolidation(bank_id: int) -> None:
    # By name: the curator depends on memory, never the other way round.
    app.send_task(CONSOLIDATION_TASK, args=[bank_id])


def record_consolidation(*, bank: Bank, outcome: str) -> None:
    """A consolidation run is over (its plan applied or rejected): the bank waits no more, and says how it went."""
    Bank.objects.filter(pk=bank.pk).update(
        consolidation_pending=False, last_consolidation_at=timezone.now(), last_consolidation_outcome=outcome[:500]
    )


def record_consolidation_failure(*, bank: Bank, error: str) -> None:
    """The provider failed: the bank keeps waiting (the task retries), and says why."""
    Bank.objects.filter(pk=bank.pk).update(last_consolidation_outcome=f"failed: {error}"[:500])


def request_consolidations_again(*, bank_ids: list[int], requested_at: datetime) -> None:
    """Consolidations that were requested but never ran are requested anew (the catch-up enqueues them)."""
    Bank.objects.filter(pk__in=bank_ids).update(consolidation_requested_at=requested_at)


def _remove(note: Note, actor: Actor, action: str, reason: str) -> None:
    bank = note.bank
    _log(bank, actor, action, note=note, before=note.snapshot(), reason=reason)
    # Lock the row before Django collects the note's vectors: an index task storing a vector
    # locks it too (indexing.store_if_current), so it either committed first and its vector is
    # collected here, or it waits and then finds the note gone. Without the lock its vector could
    # land between the collection and the delete, and the delete would fail on the foreign key.
    Note.objects.select_for_update(of=("self",)).filter(pk=note.pk).order_by("pk").values_list("pk").first()
    note.delete()
    if bank.is_full and _count(bank) < bank.soft_limit:
        _clear_latch(bank, actor, "a removal took the bank back under its soft limit")


def _clear_latch(bank: Bank, actor: Actor, reason: str) -> None:
    Bank.objects.filter(pk=bank.pk).update(is_full=False, full_since=None)
    bank.is_full = False
    bank.full_since = None
    _log(bank, actor, Revision.Action.LATCH, reason=f"FULL latch cleared: {reason}")


@transaction.atomic
def latch_full(*, bank: Bank, actor: Actor, reason: str) -> Bank:
    locked = _lock(bank)
    if not locked.is_full:
        locked.is_full = True
        locked.full_since = timezone.now()
        locked.save(update_fields=["is_full", "full_since"])
        _log(locked, actor, Revision.Action.LATCH, reason=f"FULL latch set: {reason}")
    return locked


@transaction.atomic
def clear_latch(*, bank: Bank, actor: Actor, reason: str) -> Bank:
    locked = _lock(bank)
    if locked.is_full:
        _clear_latch(locked, actor, reason)
    return locked
