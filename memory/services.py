"""The single write path for notes.

Every change to a note goes through this module: create, upsert by key, append to a category
note, edit, forget, owner delete and erase, eviction, expiry, consolidation's merges and import.
Each change and each refusal leaves a Revision row; refused writes leave nothing else. Saying
the same thing again changes nothing but the note's repetition count, and is not logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import Person, Team
from config.text import TextKind, check_text, escape_unstorable, storable_json, text_problem
from memory import indexing, policy
from memory.exceptions import (
    BankFull,
    EditMismatch,
    InvalidNote,
    NoteNotFound,
    Refused,
    TooLong,
    UnknownOntologyId,
)
from memory.models import (
    CONTENT_MAX,
    DESCRIPTION_MAX,
    KEY_MAX,
    Bank,
    CategoryMute,
    Note,
    OntologyNode,
    Revision,
)
from memory.text import normalize_key

logger = logging.getLogger(__name__)

CATEGORY_MAX = 64
SCOPE_MAX = 200
REF_ID_MAX = 200
REASON_MAX = 2000
CONSOLIDATION_TASK = "curator.tasks.consolidate_bank"


# --- who writes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Actor:
    """Who performed a write, for the revision log."""

    kind: str  # a Revision.Actor value
    ref: str = ""
    request_id: str = ""

    @classmethod
    def for_agent(cls, agent: Any, request_id: str = "") -> Actor:
        return cls(Revision.Actor.AGENT, agent.slug, request_id)


@dataclass
class WriteResult:
    note: Note | None
    action: str  # created | updated | unchanged | appended | deleted
    bank: Bank
    key: str
    evicted: list[dict[str, Any]] = field(default_factory=list)


# --- banks ------------------------------------------------------------------------------------


def bank_id_for(kind: str, person: Person | None, scope: str) -> str:
    if kind == Bank.Kind.SHARED:
        return f"scope:{scope}"
    assert person is not None
    if kind == Bank.Kind.PRIVATE and scope:
        return f"user:{person.external_id}:{scope}"
    return f"user:{person.external_id}"


def validate_scope(scope: str | None) -> str:
    scope = check_text(scope or "", field="scope", kind=TextKind.IDENTIFIER, error=InvalidNote).strip()
    if len(scope) > SCOPE_MAX:
        raise TooLong(f"scope is {len(scope)} characters; the limit is {SCOPE_MAX}.", field="scope")
    return scope


def bank_kind_for(which: str, scope: str) -> str:
    """Map a tool's bank choice to a bank kind. Without a scope, private means the person everywhere."""
    if which not in Bank.Kind.values:
        raise InvalidNote(f"bank must be one of private, shared, global (got {which!r}).", field="bank")
    if which == Bank.Kind.SHARED and not scope:
        raise InvalidNote("A shared bank needs a scope, such as project:apollo.", field="scope")
    if which == Bank.Kind.PRIVATE and not scope:
        return Bank.Kind.GLOBAL
    return which


def get_or_create_bank(*, team: Team, person: Person | None, scope: str, kind: str) -> Bank:
    """Banks are created on first use with the policy and limits configured at that moment."""
    scope = validate_scope(scope)
    person_for_bank = None if kind == Bank.Kind.SHARED else person
    bank_id = bank_id_for(kind, person_for_bank, scope)
    existing = Bank.objects.filter(team=team, bank_id=bank_id).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            return Bank.objects.create(
                team=team,
                bank_id=bank_id,
                kind=kind,
                person=person_for_bank,
                scope="" if kind == Bank.Kind.GLOBAL else scope,
                soft_limit=settings.MEMORY_SOFT_LIMIT,
                hard_limit=settings.MEMORY_HARD_LIMIT,
                capacity=settings.BOUNDED_CAPACITY,
            )
    except IntegrityError:  # created concurrently
        return Bank.objects.get(team=team, bank_id=bank_id)


def applicable_banks(*, team: Team, person: Person, scope: str) -> list[Bank]:
    """Existing banks a turn for this person in this scope reads, narrowest first."""
    wanted = [bank_id_for(Bank.Kind.GLOBAL, person, "")]
    if scope:
        wanted = [bank_id_for(Bank.Kind.PRIVATE, person, scope), bank_id_for(Bank.Kind.SHARED, None, scope), *wanted]
    by_id = {bank.bank_id: bank for bank in Bank.objects.filter(team=team, bank_id__in=wanted)}
    return [by_id[bank_id] for bank_id in wanted if bank_id in by_id]


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
    if locked.full and _count(locked) < locked.soft_limit:
        _clear_latch(locked, actor, "the count is under the new soft limit")
    return locked


# --- validation -------------------------------------------------------------------------------


def _check_key(raw: str, field_name: str = "key") -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidNote(f"{field_name} must be a non-empty string.", field=field_name)
    # Checked before normalising: the slug would silently drop a control or bidi character.
    check_text(raw, field=field_name, kind=TextKind.IDENTIFIER, error=InvalidNote)
    key = normalize_key(raw)
    if not key:
        raise InvalidNote(f"{field_name} {raw!r} has no letters or digits to make a key from.", field=field_name)
    if len(key) > KEY_MAX:
        raise TooLong(f"{field_name} is {len(key)} characters; the limit is {KEY_MAX}.", field=field_name)
    return key


def _check_description(description: str) -> str:
    if not isinstance(description, str) or not description.strip():
        raise InvalidNote("description must be a one-line summary of the note.", field="description")
    check_text(description, field="description", kind=TextKind.LINE, error=InvalidNote)
    if len(description) > DESCRIPTION_MAX:
        raise TooLong(
            f"description is {len(description)} characters; the limit is {DESCRIPTION_MAX}. Shorten it; nothing was written.",
            field="description",
        )
    return description


def _check_content(content: str, field_name: str = "content") -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidNote(f"{field_name} must not be empty.", field=field_name)
    check_text(content, field=field_name, kind=TextKind.TEXT, error=InvalidNote)
    if len(content) > CONTENT_MAX:
        raise TooLong(
            f"{field_name} is {len(content)} characters; the limit is {CONTENT_MAX}. Split or condense it; nothing was written.",
            field=field_name,
        )
    return content


def _check_kind(kind: str) -> str:
    if kind not in Note.Kind.values:
        raise InvalidNote(f"kind must be one of {', '.join(Note.Kind.values)} (got {kind!r}).", field="kind")
    return kind


def _check_category(category: str | None) -> str:
    if not category:
        return ""
    if not isinstance(category, str):
        raise InvalidNote("category must be a string, such as preferences.", field="category")
    check_text(category, field="category", kind=TextKind.IDENTIFIER, error=InvalidNote)
    normalized = normalize_key(category)
    if not normalized:
        raise InvalidNote(f"category {category!r} has no letters or digits.", field="category")
    if len(normalized) > CATEGORY_MAX:
        raise TooLong(f"category is {len(normalized)} characters; the limit is {CATEGORY_MAX}.", field="category")
    return normalized


def check_scope_refs(refs: Any, field_name: str = "scope_refs") -> dict[str, list[str]]:
    if refs in (None, {}):
        return {}
    if not isinstance(refs, dict):
        raise InvalidNote(f'{field_name} must be an object like {{"project": ["P"]}}.', field=field_name)
    cleaned: dict[str, list[str]] = {}
    for ref_type, ids in refs.items():
        if not isinstance(ref_type, str) or not normalize_key(ref_type):
            raise InvalidNote(f"{field_name} has an empty or invalid reference type.", field=field_name)
        check_text(ref_type, field=field_name, kind=TextKind.IDENTIFIER, error=InvalidNote)
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i.strip() for i in ids):
            raise InvalidNote(f"{field_name}.{ref_type} must be a non-empty list of ids.", field=field_name)
        for ref_id in ids:
            check_text(ref_id, field=f"{field_name}.{ref_type}", kind=TextKind.IDENTIFIER, error=InvalidNote)
        if any(len(i) > REF_ID_MAX for i in ids):
            raise TooLong(f"{field_name}.{ref_type} has an id over {REF_ID_MAX} characters.", field=field_name)
        cleaned[ref_type] = sorted(set(ids))
    return cleaned


def check_semantics(team: Team, tags: Any, field_name: str = "semantics") -> list[str]:
    if tags in (None, []):
        return []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InvalidNote(f"{field_name} must be a list of ontology ids.", field=field_name)
    for tag in tags:
        check_text(tag, field=field_name, kind=TextKind.IDENTIFIER, error=InvalidNote)
    wanted = sorted(set(tags))
    known = set(OntologyNode.objects.filter(team=team, node_id__in=wanted).values_list("node_id", flat=True))
    unknown = [t for t in wanted if t not in known]
    if unknown:
        raise UnknownOntologyId(
            f"Unknown ontology id {unknown[0]!r} in {field_name}. Use an exact ontology id.", field=field_name
        )
    return wanted


# --- the revision log -------------------------------------------------------------------------


def _log(
    bank: Bank,
    actor: Actor,
    action: str,
    *,
    note: Note | None = None,
    key: str = "",
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    reason: str = "",
) -> Revision:
    return Revision.objects.create(
        team_id=bank.team_id,
        bank=bank if bank.pk else None,
        bank_ref=bank.bank_id,
        person_id=bank.person_id,
        note_key=note.key if note is not None else key,
        note_id=note.pk if note is not None else None,
        action=action,
        actor=actor.kind,
        actor_ref=actor.ref,
        before=before,
        after=after,
        reason=reason,
        request_id=actor.request_id,
    )


def _record_refusal(
    *,
    team: Team,
    person: Person | None,
    bank_ref: str,
    actor: Actor,
    key: str,
    attempted: dict[str, Any],
    exc: Exception,
) -> Revision:
    message = getattr(exc, "message", str(exc))
    bank = Bank.objects.filter(team=team, bank_id=bank_ref).first()
    # Its own transaction: the refused write rolled back, its revision must not. Everything
    # written here is escaped, because what was refused may be text Postgres cannot store
    # (a NUL, a lone surrogate): the refusal must still be logged.
    with transaction.atomic():
        revision = Revision.objects.create(
            team=team,
            bank=bank,
            bank_ref=escape_unstorable(bank_ref)[:500],
            person=bank.person if bank is not None and bank.person_id else person,
            note_key=escape_unstorable(key)[:200],
            action=Revision.Action.REFUSED,
            actor=actor.kind,
            actor_ref=escape_unstorable(actor.ref)[:200],
            after=_clip_attempt(attempted),
            reason=escape_unstorable(message)[:REASON_MAX],
            request_id=actor.request_id,
        )
    logger.info("refused write to %s:%s by %s: %s", bank_ref, key, actor.kind, escape_unstorable(message))
    return revision


def record_refused_call(
    *,
    team: Team,
    actor: Actor,
    operation: str,
    arguments: Any,
    message: str,
    field: str | None = None,
    note: Note | None = None,
) -> Revision:
    """Log a write refused before it reached the write path: its arguments were malformed (a missing
    or mistyped field, text Postgres cannot store, a body that is not JSON). Like every refusal it
    changes nothing but the log. The note's bank and person are attached when the write named a
    note; otherwise the person, when the arguments name one already known."""
    args = arguments if isinstance(arguments, dict) else {"body": arguments}
    person = None
    raw_person = args.get("person")
    if isinstance(raw_person, str) and raw_person.strip() and text_problem(raw_person, TextKind.IDENTIFIER) is None:
        person = Person.objects.filter(team=team, external_id=raw_person.strip()).first()
    raw_key = args.get("key", args.get("category"))
    key = normalize_key(raw_key) if isinstance(raw_key, str) else ""
    bank_ref = f"(unresolved: {operation} refused before its bank was resolved)"
    if note is not None:
        bank_ref, person, key = note.bank.bank_id, note.bank.person, note.key
    reason = f"{field}: {message}" if field and not message.startswith(f"{field}:") else message
    with transaction.atomic():
        revision = Revision.objects.create(
            team=team,
            bank=note.bank if note is not None else None,
            bank_ref=bank_ref,
            person=person,
            note_key=key[:200],
            action=Revision.Action.REFUSED,
            actor=actor.kind,
            actor_ref=escape_unstorable(actor.ref)[:200],
            after=storable_json(args, max_chars=CONTENT_MAX),
            reason=escape_unstorable(reason)[:REASON_MAX],
            request_id=actor.request_id,
        )
    logger.info("refused %s call by %s: %s", operation, actor.kind, escape_unstorable(reason))
    return revision


def _write_to_bank(
    *,
    team: Team,
    person: Person | None,
    actor: Actor,
    scope: str | None,
    which: str,
    key_hint: str,
    attempted: dict[str, Any],
    body: Callable[[Bank], WriteResult],
) -> WriteResult:
    """Resolve the bank and run body on it atomically. A domain refusal anywhere (scope, bank,
    caps, policy) rolls everything back, the bank's creation included, and leaves one refused
    revision."""
    from config.exceptions import DomainError

    if person is not None and person.team_id != team.pk:
        raise NoteNotFound("That person is not known in this team.", field="person")
    bank_ref = f"(unresolved: bank={which!r}, scope={scope!r})"
    try:
        with transaction.atomic():
            clean_scope = validate_scope(scope)
            kind = bank_kind_for(which, clean_scope)
            if person is None and kind != Bank.Kind.SHARED:
                raise InvalidNote("A private or global bank needs a person.", field="person")
            bank_ref = bank_id_for(kind, None if kind == Bank.Kind.SHARED else person, clean_scope)
            bank = get_or_create_bank(team=team, person=person, scope=clean_scope, kind=kind)
            return body(_lock(bank))
    except DomainError as exc:
        _record_refusal(
            team=team, person=person, bank_ref=bank_ref, actor=actor, key=key_hint, attempted=attempted, exc=exc
        )
        raise


def _attempt(
    bank: Bank, actor: Actor, key: str, attempted: dict[str, Any], write: Callable[[], WriteResult]
) -> WriteResult:
    """Run write atomically on an existing bank; a domain refusal leaves only a refused revision."""
    from config.exceptions import DomainError

    try:
        with transaction.atomic():
            return write()
    except DomainError as exc:
        _record_refusal(
            team=bank.team,
            person=bank.person,
            bank_ref=bank.bank_id,
            actor=actor,
            key=key,
            attempted=attempted,
            exc=exc,
        )
        raise


def _clip_attempt(attempted: dict[str, Any]) -> dict[str, Any]:
    # A refused write is logged with what was attempted, so the person sees it; an over-cap
    # value is logged at its cap and marked, so the log itself cannot be used to store it.
    # Refused characters are escaped (\u0000), so the log can hold what Postgres cannot.
    clipped: dict[str, Any] = {}
    for name, value in attempted.items():
        if isinstance(value, str) and len(value) > CONTENT_MAX:
            clipped[name] = escape_unstorable(value[:CONTENT_MAX])
            clipped[f"{name}_length"] = len(value)
        else:
            clipped[name] = storable_json(value, max_chars=CONTENT_MAX)
    return clipped


# --- writes -----------------------------------------------------------------------------------


def _count(bank: Bank) -> int:
    return Note.objects.filter(team_id=bank.team_id, bank=bank).count()


def _lock(bank: Bank) -> Bank:
    # One writer per bank at a time: limits, capacity and upserts by key are decided on a
    # consistent count, and concurrent upserts of one key serialise here instead of racing.
    return Bank.objects.select_for_update().get(pk=bank.pk)


def remember(
    *,
    team: Team,
    person: Person | None,
    actor: Actor,
    key: str,
    description: str,
    content: str,
    scope: str = "",
    bank: str = Bank.Kind.PRIVATE,
    kind: str = Note.Kind.FACT,
    category: str | None = "",
    scope_refs: dict[str, list[str]] | None = None,
    semantics: list[str] | None = None,
    source: str = Note.Source.REMEMBER,
    expires_at: datetime | None = None,
) -> WriteResult:
    """Create a note or, when its key exists in the bank, replace it (an upsert: never a second row)."""
    attempted = {"key": key, "description": description, "content": content, "kind": kind}

    def write(target: Bank) -> WriteResult:
        fields = {
            "key": _check_key(key),
            "description": _check_description(description),
            "content": _check_content(content),
            "kind": _check_kind(kind),
            "category": _check_category(category),
            "scope_refs": check_scope_refs(scope_refs),
            "semantics": check_semantics(team, semantics),
            "expires_at": expires_at,
        }
        if expires_at is not None and timezone.is_naive(expires_at):
            raise InvalidNote("expires_at needs a timezone, e.g. 2026-12-01T09:00:00Z.", field="expires_at")
        if expires_at is not None and expires_at <= timezone.now():
            raise InvalidNote("expires_at is in the past; a note must apply for some time.", field="expires_at")
        return _upsert(target, actor, fields, source)

    return _write_to_bank(
        team=team, person=person, actor=actor, scope=scope, which=bank,
        key_hint=normalize_key(key) if isinstance(key, str) else "", attempted=attempted, body=write,
    )  # fmt: skip


def _upsert(bank: Bank, actor: Actor, fields: dict[str, Any], source: str) -> WriteResult:
    now = timezone.now()
    existing = Note.objects.filter(team_id=bank.team_id, bank=bank, key=fields["key"]).first()
    if existing is not None:
        before = existing.snapshot()
        changed = {name: value for name, value in fields.items() if getattr(existing, name) != value}
        if not changed:
            # Saying the same thing again is repetition, not a rewrite: updated_at stays. A
            # re-import is neither: importing a package twice must not make its notes weigh more.
            if source != Note.Source.IMPORT:
                existing.repetitions += 1
                existing.save(update_fields=["repetitions"])
            return WriteResult(existing, "unchanged", bank, existing.key)
        existing.repetitions += 1
        for name, value in changed.items():
            setattr(existing, name, value)
        existing.updated_at = now
        existing.save()
        indexing.schedule(existing.pk)
        _log(bank, actor, Revision.Action.UPDATE, note=existing, before=before, after=existing.snapshot())
        return WriteResult(existing, "updated", bank, existing.key)

    evicted = _make_room(bank, actor, fields, now)
    note = Note.objects.create(
        team_id=bank.team_id, bank=bank, source=source, created_at=now, updated_at=now, repetitions=1, **fields
    )
    indexing.schedule(note.pk)
    _log(bank, actor, Revision.Action.CREATE, note=note, after=note.snapshot())
    _after_growth(bank)
    return WriteResult(note, "created", bank, note.key, evicted)


def _make_room(bank: Bank, actor: Actor, fields: dict[str, Any], now: datetime) -> list[dict[str, Any]]:
    """Apply the bank's policy to a net-new note: refuse it, or evict what gives way (before the write)."""
    # Expired notes no longer apply; the periodic sweep may not have reached them yet, and they
    # must not hold a place against a note that does.
    for expired in Note.objects.filter(team_id=bank.team_id, bank=bank, expires_at__lte=now):
        expired.bank = bank
        _remove(expired, Actor(Revision.Actor.EXPIRY, "write-path", actor.request_id), Revision.Action.DELETE,
                f"expired at {expired.expires_at.isoformat()}")  # fmt: skip
    if bank.policy == Bank.Policy.CURATED:
        count = _count(bank)
        if count >= bank.hard_limit:
            raise BankFull(
                f"Bank {bank.bank_id} holds {count} notes, its hard limit. Offer to drop something old; "
                "updates to existing keys still work.",
            )
        if bank.full:
            raise BankFull(
                f"Bank {bank.bank_id} is FULL: new notes are refused until something is removed. "
                "Offer the person to drop something old; corrections to existing keys still work.",
            )
        return []

    held_notes = list(Note.objects.filter(team_id=bank.team_id, bank=bank))
    held = [policy.Candidate(n.key, n.kind, n.updated_at, n.repetitions) for n in held_notes]
    newcomer = policy.Candidate(fields["key"], fields["kind"], now, 1)
    verdict = policy.judge_newcomer(newcomer, held, bank.capacity, now)
    if not verdict.admit:
        loser = policy.weakest(held, now)
        raise Refused(
            f"Bank {bank.bank_id} is at its capacity of {bank.capacity}. The new note '{fields['key']}' "
            f"({fields['kind']}, worth {verdict.newcomer_worth:.1f}) is worth less than the weakest note it holds, "
            f"'{loser.key}' ({loser.kind}, worth {verdict.weakest_worth:.1f}), so nothing was changed.",
            field="key",
        )
    if verdict.evict is None:
        return []
    victim = next(n for n in held_notes if n.key == verdict.evict.key)
    reason = (
        f"capacity {bank.capacity} reached; evicted to make room for '{fields['key']}' ({fields['kind']}, "
        f"worth {verdict.newcomer_worth:.1f}) as the weakest note (worth {verdict.weakest_worth:.1f})"
    )
    info = {"id": victim.pk, "key": victim.key, "kind": victim.kind, "reason": reason}
    _remove(victim, Actor(Revision.Actor.POLICY, "bounded-eviction", actor.request_id), Revision.Action.EVICT, reason)
    return [info]


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


def _after_growth(bank: Bank) -> None:
    if bank.policy != Bank.Policy.CURATED or bank.full or bank.consolidation_pending:
        return
    if _count(bank) <= bank.soft_limit:
        return
    request_consolidation(bank)


def request_consolidation(bank: Bank) -> bool:
    """Mark the bank as waiting for consolidation and enqueue it once; repeated crossings coalesce."""
    claimed = Bank.objects.filter(pk=bank.pk, consolidation_pending=False, full=False).update(
        consolidation_pending=True, consolidation_requested_at=timezone.now()
    )
    if not claimed:
        return False
    bank.consolidation_pending = True
    bank_pk = bank.pk
    transaction.on_commit(lambda: _enqueue_consolidation(bank_pk), robust=True)
    return True


def _enqueue_consolidation(bank_pk: int) -> None:
    from config.celery import app

    # By name: the curator depends on memory, never the other way round.
    app.send_task(CONSOLIDATION_TASK, args=[bank_pk])


def _remove(note: Note, actor: Actor, action: str, reason: str) -> None:
    bank = note.bank
    _log(bank, actor, action, note=note, before=note.snapshot(), reason=reason)
    # Lock the row before Django collects the note's vectors: an index task storing a vector
    # locks it too (indexing.store_if_current), so it either committed first and its vector is
    # collected here, or it waits and then finds the note gone. Without the lock its vector could
    # land between the collection and the delete, and the delete would fail on the foreign key.
    Note.objects.select_for_update(of=("self",)).filter(pk=note.pk).order_by("pk").values_list("pk").first()
    note.delete()
    if bank.full and _count(bank) < bank.soft_limit:
        _clear_latch(bank, actor, "a removal took the bank back under its soft limit")


def _clear_latch(bank: Bank, actor: Actor, reason: str) -> None:
    Bank.objects.filter(pk=bank.pk).update(full=False, full_since=None)
    bank.full = False
    bank.full_since = None
    _log(bank, actor, Revision.Action.LATCH, reason=f"FULL latch cleared: {reason}")


@transaction.atomic
def latch_full(*, bank: Bank, actor: Actor, reason: str) -> Bank:
    locked = _lock(bank)
    if not locked.full:
        locked.full = True
        locked.full_since = timezone.now()
        locked.save(update_fields=["full", "full_since"])
        _log(locked, actor, Revision.Action.LATCH, reason=f"FULL latch set: {reason}")
    return locked


@transaction.atomic
def clear_latch(*, bank: Bank, actor: Actor, reason: str) -> Bank:
    locked = _lock(bank)
    if locked.full:
        _clear_latch(locked, actor, reason)
    return locked


def append_observation(
    *,
    team: Team,
    person: Person | None,
    actor: Actor,
    category: str,
    observation: str,
    summary: str | None = None,
    bank: str = Bank.Kind.GLOBAL,
    scope: str = "",
    source: str = Note.Source.REMEMBER,
    key: str | None = None,
    kind: str = Note.Kind.FACT,
) -> WriteResult:
    """Append an observation to the note keyed by its category (or `key`), creating it if new.

    An append that would take the note past its cap is refused, never trimmed.
    """
    attempted = {"category": category, "observation": observation, "summary": summary}
    note_key = key if key is not None else category

    def write(locked: Bank) -> WriteResult:
        normalized_key = _check_key(note_key, "key" if key is not None else "category")
        normalized_category = _check_category(category)
        text = _check_content(observation, "observation").strip()
        if summary is not None:
            _check_description(summary)
        existing = Note.objects.filter(team_id=team.pk, bank=locked, key=normalized_key).first()
        if existing is None:
            description = summary or f"What is known about {normalized_category.replace('-', ' ')}"
            result = _upsert(
                locked,
                actor,
                {
                    "key": normalized_key,
                    "description": _check_description(description),
                    "content": text,
                    "kind": kind,
                    "category": normalized_category,
                    "scope_refs": {},
                    "semantics": [],
                    "expires_at": None,
                },
                source,
            )
            return result
        if text in existing.content.splitlines():
            existing.repetitions += 1
            existing.save(update_fields=["repetitions"])
            return WriteResult(existing, "unchanged", locked, existing.key)
        new_content = f"{existing.content}\n{text}"
        if len(new_content) > CONTENT_MAX:
            raise TooLong(
                f"Appending would take note {locked.bank_id}:{existing.key} to {len(new_content)} characters; "
                f"the limit is {CONTENT_MAX}. Condense it with an edit first; nothing was written.",
                field="observation",
            )
        before = existing.snapshot()
        existing.content = new_content
        if summary:
            existing.description = summary
        existing.repetitions += 1
        existing.updated_at = timezone.now()
        existing.save()
        indexing.schedule(existing.pk)
        _log(locked, actor, Revision.Action.APPEND, note=existing, before=before, after=existing.snapshot())
        return WriteResult(existing, "appended", locked, existing.key)

    return _write_to_bank(
        team=team, person=person, actor=actor, scope=scope, which=bank,
        key_hint=normalize_key(note_key or ""), attempted=attempted, body=write,
    )  # fmt: skip


def edit_note(
    *, note: Note, actor: Actor, mode: str, content: str, find: str | None = None, description: str | None = None
) -> WriteResult:
    """Edit a note's content by find_replace (every occurrence; empty content removes the snippet) or replace."""
    attempted = {"mode": mode, "find": find, "content": content}
    if description is not None:
        attempted["description"] = description

    def write() -> WriteResult:
        locked_bank = _lock(note.bank)
        current = Note.objects.filter(pk=note.pk, bank=locked_bank).first()
        if current is None:
            raise NoteNotFound("The note no longer exists.", field="id")
        if mode == "find_replace":
            if not find:
                raise InvalidNote("find_replace needs the text to find.", field="find")
            check_text(find, field="find", kind=TextKind.TEXT, error=InvalidNote)
            if find not in current.content:
                raise EditMismatch("The text to find does not occur in the note; nothing was changed.", field="find")
            new_content = current.content.replace(find, content)
            if not new_content.strip():
                raise InvalidNote("The edit would leave the note empty; forget the note instead.", field="content")
        elif mode == "replace":
            new_content = content
        else:
            raise InvalidNote("mode must be find_replace or replace.", field="mode")
        _check_content(new_content)
        new_description = _check_description(description) if description is not None else current.description
        if new_content == current.content and new_description == current.description:
            return WriteResult(current, "unchanged", locked_bank, current.key)
        before = current.snapshot()
        current.content = new_content
        current.description = new_description
        current.updated_at = timezone.now()
        if actor.kind == Revision.Actor.OWNER:
            current.source = Note.Source.OWNER  # the person's own words now
        current.save()
        indexing.schedule(current.pk)
        _log(locked_bank, actor, Revision.Action.UPDATE, note=current, before=before, after=current.snapshot())
        return WriteResult(current, "updated", locked_bank, current.key)

    return _attempt(note.bank, actor, note.key, attempted, write)


@transaction.atomic
def delete_note(*, note: Note, actor: Actor, reason: str = "") -> WriteResult:
    bank = _lock(note.bank)
    current = Note.objects.filter(pk=note.pk, bank=bank).first()
    if current is None:
        raise NoteNotFound("The note no longer exists.", field="id")
    current.bank = bank
    key = current.key
    _remove(current, actor, Revision.Action.DELETE, reason or f"deleted by {actor.kind}")
    return WriteResult(None, "deleted", bank, key)


def forget(
    *,
    team: Team,
    person: Person,
    actor: Actor,
    key: str,
    scope: str = "",
    context_refs: dict[str, list[str]] | None = None,
    reason: str = "",
) -> tuple[WriteResult, int]:
    """Delete the note with this key from the narrowest applicable bank that holds an applicable one."""
    from memory.queries import scope_refs_match

    normalized = _check_key(key)
    scope = validate_scope(scope)
    refs = check_scope_refs(context_refs, "context.refs")
    check_text(reason, field="reason", kind=TextKind.LINE, error=InvalidNote)
    for bank in applicable_banks(team=team, person=person, scope=scope):
        note = Note.objects.filter(team=team, bank=bank, key=normalized).first()
        if note is not None and scope_refs_match(note.scope_refs, refs):
            note_id = note.pk
            return delete_note(note=note, actor=actor, reason=reason or "forgotten on request"), note_id
    raise NoteNotFound(f"No note with key '{normalized}' applies here; nothing was forgotten.", field="key")


@transaction.atomic
def erase_note(*, note: Note, actor: Actor) -> None:
    """Erasure beats the log: the note and the content in its revisions go; the events stay."""
    note_id = note.pk
    delete_note(note=note, actor=actor, reason="erased on the person's request")
    Revision.objects.filter(team_id=note.team_id, note_id=note_id).update(before=None, after=None, erased=True)


@transaction.atomic
def erase_person(*, team: Team, person: Person, actor: Actor) -> int:
    """Erase every note in the person's own banks (private and global). Returns how many."""
    notes = list(Note.objects.filter(team=team, bank__person=person).select_related("bank"))
    for note in notes:
        erase_note(note=note, actor=actor)
    Revision.objects.filter(team=team, person=person).update(before=None, after=None, erased=True)
    return len(notes)


@transaction.atomic
def expire_notes(*, now: datetime | None = None) -> int:
    """Remove notes whose writer-set expiry has passed (actor expiry). Safe to run twice."""
    now = now or timezone.now()
    # Lock the notes and their banks (as every writer does), not the team the ordering joins in.
    expired = list(
        Note.objects.filter(expires_at__lte=now)
        .select_related("bank")
        .select_for_update(skip_locked=True, of=("self", "bank"))
    )
    for note in expired:
        _remove(
            note,
            Actor(Revision.Actor.EXPIRY, "expire_notes"),
            Revision.Action.DELETE,
            f"expired at {note.expires_at.isoformat()}",
        )
    return len(expired)


@transaction.atomic
def merge_notes(
    *,
    keep: Note,
    absorb: Iterable[Note],
    actor: Actor,
    content: str | None = None,
    description: str | None = None,
    reason: str,
) -> Note:
    """Consolidation's write: fold notes into one. Only notes with identical scope and semantics may merge."""
    bank = _lock(keep.bank)
    absorbed = list(absorb)
    for other in absorbed:
        if other.bank_id != keep.bank_id:
            raise InvalidNote("Only notes of one bank can be merged.", field="merge")
        if other.scope_refs != keep.scope_refs or sorted(other.semantics) != sorted(keep.semantics):
            raise InvalidNote(
                f"'{other.key}' and '{keep.key}' differ in scope or semantics and must not be merged.", field="merge"
            )
    before = keep.snapshot()
    if content is not None:
        keep.content = _check_content(content)
    if description is not None:
        keep.description = _check_description(description)
    keep.repetitions += sum(o.repetitions for o in absorbed)
    keep.updated_at = timezone.now()
    keep.save()
    indexing.schedule(keep.pk)
    for other in absorbed:
        _remove(other, actor, Revision.Action.MERGE, f"merged into '{keep.key}': {reason}")
    _log(bank, actor, Revision.Action.MERGE, note=keep, before=before, after=keep.snapshot(), reason=reason)
    return keep


# --- mutes ------------------------------------------------------------------------------------


@transaction.atomic
def mute_category(*, person: Person, agent: Any, category: str) -> CategoryMute:
    if agent.team_id != person.team_id:
        raise NoteNotFound("That agent is not in this person's team.", field="agent")
    normalized = _check_category(category)
    if not normalized:
        raise InvalidNote("category must not be empty.", field="category")
    mute, _ = CategoryMute.objects.get_or_create(
        team_id=person.team_id, person=person, agent=agent, category=normalized
    )
    return mute


@transaction.atomic
def unmute_category(*, person: Person, agent: Any, category: str) -> None:
    CategoryMute.objects.filter(
        team_id=person.team_id, person=person, agent=agent, category=_check_category(category)
    ).delete()


def muted_categories(*, person: Person, agent: Any) -> set[str]:
    return set(
        CategoryMute.objects.filter(team_id=person.team_id, person=person, agent=agent).values_list(
            "category", flat=True
        )
    )


DAILY_PREFIX = "daily-"


def daily_key(day: date, part: int = 1) -> str:
    return f"{DAILY_PREFIX}{day.isoformat()}" + (f"-{part}" if part > 1 else "")


def append_daily(
    *, team: Team, person: Person, actor: Actor, text: str, day: date | None = None, source: str = Note.Source.CURATOR
) -> WriteResult:
    """Append to the person's note for the day (one `daily` note per day, in their global bank).

    When the day's note is full, the append is refused like any over-cap write (and logged), and
    the day continues in a numbered sibling: daily-2026-11-30, daily-2026-11-30-2, ...
    """
    day = day or timezone.localdate()
    existing = set(
        Note.objects.filter(
            team=team, bank__person=person, bank__kind=Bank.Kind.GLOBAL, key__startswith=daily_key(day)
        ).values_list("key", flat=True)
    )
    part = 1
    while daily_key(day, part + 1) in existing:
        part += 1
    while True:
        try:
            return append_observation(
                team=team, person=person, actor=actor, category="daily", observation=text, key=daily_key(day, part),
                summary=f"What happened on {day.isoformat()}" + (f" (part {part})" if part > 1 else ""),
                bank=Bank.Kind.GLOBAL, source=source, kind=Note.Kind.DAILY,
            )  # fmt: skip
        except TooLong:
            if len(text) > CONTENT_MAX or part >= 99:
                raise
            part += 1
