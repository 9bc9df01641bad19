"""Writes to notes: remember, append, edit, delete, forget, erase, expire, merge and the daily note.

Each write resolves its bank, locks it and runs atomically; a domain refusal anywhere rolls it
back and leaves one refused revision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import Person, Team
from config.exceptions import DomainError
from config.prepared import Prepared
from config.text import TextKind, check_text
from memory import indexing, provenance
from memory.banks import applicable_banks, bank_id_for, bank_kind_for
from memory.exceptions import EditMismatch, InvalidNote, NoteNotFound, TooLong
from memory.models import CONTENT_MAX, Bank, Note, Proposal, Revision
from memory.queries import scope_refs_match
from memory.services import reads
from memory.services.capacity import _after_growth, _lock, _lock_bank, _make_room, _remove
from memory.services.revisions import ERASED_REASON, Actor, _erase_note_from_log, _log, _record_refusal
from memory.text import normalize_key
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
from webhooks.services import erase_event_content


@dataclass
class WriteResult:
    note: Note | None
    action: str  # created | updated | unchanged | appended | deleted
    bank: Bank
    key: str
    evicted: list[dict[str, Any]] = field(default_factory=list)


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
            return body(_lock_bank(team=team, person=person, scope=clean_scope, kind=kind))
    except DomainError as exc:
        _record_refusal(
            team=team, person=person, bank_ref=bank_ref, actor=actor, key=key_hint, attempted=attempted, exc=exc
        )
        raise


def _attempt(
    bank: Bank, actor: Actor, key: str, attempted: dict[str, Any], write: Callable[[], WriteResult]
) -> WriteResult:
    """Run write atomically on an existing bank; a domain refusal leaves only a refused revision."""
    try:
        with transaction.atomic():
            return write()
    except DomainError as exc:
        _record_refusal(
            team=bank.team,
            person=bank.person,
            bank_ref=bank.address,
            actor=actor,
            key=key,
            attempted=attempted,
            exc=exc,
        )
        raise


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
    reason: str = "",
) -> WriteResult:
    """Create a note or, when its key exists in the bank, replace it (an upsert: never a second row).
    `reason` says why, in the revision log (a correction names what it corrects)."""
    attempted = {"key": key, "description": description, "content": content, "kind": kind}

    def write(target: Bank) -> WriteResult:
        check_text(reason, field="reason", kind=TextKind.LINE, error=InvalidNote)
        fields = {
            "key": check_key(key),
            "description": check_description(description),
            "content": check_content(content),
            "kind": check_kind(kind),
            "category": check_category(category),
            "scope_refs": check_scope_refs(scope_refs),
            "semantics": check_semantics(team, semantics),
            "expires_at": expires_at,
        }
        if expires_at is not None and timezone.is_naive(expires_at):
            raise InvalidNote("expires_at needs a timezone, e.g. 2026-12-01T09:00:00Z.", field="expires_at")
        if expires_at is not None and expires_at <= timezone.now():
            raise InvalidNote("expires_at is in the past; a note must apply for some time.", field="expires_at")
        return _upsert(target, actor, fields, source, subject=person, reason=reason)

    return _write_to_bank(
        team=team, person=person, actor=actor, scope=scope, which=bank,
        key_hint=normalize_key(key) if isinstance(key, str) else "", attempted=attempted, body=write,
    )  # fmt: skip


_NOTE_BY_KEY = Prepared(
    lambda team_id, bank_id, key: Note.objects.filter(team_id=team_id, bank_id=bank_id, key=key).order_by("pk")[:1],
    team_id=int,
    bank_id=int,
    key=str,
)


def _upsert(
    bank: Bank, actor: Actor, fields: dict[str, Any], source: str, *, subject: Person | None = None, reason: str = ""
) -> WriteResult:
    now = timezone.now()
    existing = _NOTE_BY_KEY.first(team_id=bank.team_id, bank_id=bank.pk, key=fields["key"])
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
        existing.save(update_fields=[*changed, "repetitions", "updated_at"])
        indexing.schedule(existing.pk)
        _log(
            bank,
            actor,
            Revision.Action.UPDATE,
            note=existing,
            before=before,
            after=existing.snapshot(),
            reason=reason,
            subject=subject,
        )
        return WriteResult(existing, "updated", bank, existing.key)

    evicted, held = _make_room(bank, actor, fields, now)
    note = Note.objects.create(
        team_id=bank.team_id, bank=bank, source=source, created_at=now, updated_at=now, repetitions=1, **fields
    )
    indexing.schedule(note.pk)
    _log(bank, actor, Revision.Action.CREATE, note=note, after=note.snapshot(), reason=reason, subject=subject)
    _after_growth(bank, held + 1)
    return WriteResult(note, "created", bank, note.key, evicted)


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
        normalized_key = check_key(note_key, "key" if key is not None else "category")
        normalized_category = check_category(category)
        text = check_content(observation, "observation").strip()
        if summary is not None:
            check_description(summary)
        existing = Note.objects.filter(team_id=team.pk, bank=locked, key=normalized_key).order_by("pk").first()
        if existing is None:
            description = summary or f"What is known about {normalized_category.replace('-', ' ')}"
            result = _upsert(
                locked,
                actor,
                {
                    "key": normalized_key,
                    "description": check_description(description),
                    "content": text,
                    "kind": kind,
                    "category": normalized_category,
                    "scope_refs": {},
                    "semantics": [],
                    "expires_at": None,
                },
                source,
                subject=person,
            )
            return result
        if text in existing.content.splitlines():
            existing.repetitions += 1
            existing.save(update_fields=["repetitions"])
            return WriteResult(existing, "unchanged", locked, existing.key)
        new_content = f"{existing.content}\n{text}"
        if len(new_content) > CONTENT_MAX:
            raise TooLong(
                f"Appending would take note {locked.address}:{existing.key} to {len(new_content)} characters; "
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
        _log(
            locked, actor, Revision.Action.APPEND, note=existing, before=before, after=existing.snapshot(),
            subject=person,
        )  # fmt: skip
        return WriteResult(existing, "appended", locked, existing.key)

    return _write_to_bank(
        team=team, person=person, actor=actor, scope=scope, which=bank,
        key_hint=normalize_key(note_key or ""), attempted=attempted, body=write,
    )  # fmt: skip


def edit_note(
    *,
    note: Note,
    actor: Actor,
    mode: str,
    content: str,
    find: str | None = None,
    description: str | None = None,
    reason: str = "",
) -> WriteResult:
    """Edit a note's content by find_replace (every occurrence; empty content removes the snippet) or
    replace. `reason` says why, in the revision log (an edit may remove what the note said)."""
    attempted = {"mode": mode, "find": find, "content": content}
    if description is not None:
        attempted["description"] = description

    def write() -> WriteResult:
        check_text(reason, field="reason", kind=TextKind.LINE, error=InvalidNote)
        locked_bank = _lock(note.bank)
        current = Note.objects.filter(pk=note.pk, bank=locked_bank).order_by("pk").first()
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
        check_content(new_content)
        new_description = check_description(description) if description is not None else current.description
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
        _log(
            locked_bank, actor, Revision.Action.UPDATE, note=current, before=before, after=current.snapshot(),
            reason=reason,
        )  # fmt: skip
        return WriteResult(current, "updated", locked_bank, current.key)

    return _attempt(note.bank, actor, note.key, attempted, write)


def edit_applicable_note(
    *, team: Team, person: Person, actor: Actor, key: str, find: str, content: str, reason: str = "", scope: str = ""
) -> WriteResult:
    """edit_note (find_replace) on the note `forget` would find for this key: the curator names notes
    by key, as the digest it reads shows them."""
    note = _applicable_note(team=team, person=person, key=check_key(key), scope=validate_scope(scope), refs={})
    if note is None:
        raise NoteNotFound(f"No note with key '{normalize_key(key)}' applies here; nothing was edited.", field="key")
    return edit_note(note=note, actor=actor, mode="find_replace", find=find, content=content, reason=reason)


def _applicable_note(*, team: Team, person: Person, key: str, scope: str, refs: dict[str, list[str]]) -> Note | None:
    """The note with this (normalised) key in the narrowest applicable bank that holds an applicable one."""
    for bank in applicable_banks(team=team, person=person, scope=scope):
        note = Note.objects.filter(team=team, bank=bank, key=key).order_by("pk").first()
        if note is not None and scope_refs_match(note.scope_refs, refs):
            return note
    return None


@transaction.atomic
def delete_note(*, note: Note, actor: Actor, reason: str = "") -> WriteResult:
    bank = _lock(note.bank)
    current = Note.objects.filter(pk=note.pk, bank=bank).order_by("pk").first()
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
    normalized = check_key(key)
    scope = validate_scope(scope)
    refs = check_scope_refs(context_refs, "context.refs")
    check_text(reason, field="reason", kind=TextKind.LINE, error=InvalidNote)
    note = _applicable_note(team=team, person=person, key=normalized, scope=scope, refs=refs)
    if note is not None:
        note_id = note.pk
        return delete_note(note=note, actor=actor, reason=reason or "forgotten on request"), note_id
    raise NoteNotFound(f"No note with key '{normalized}' applies here; nothing was forgotten.", field="key")


@dataclass(frozen=True)
class NoteErasure:
    """What erasing a note took with it, besides the note and its vector."""

    revisions: int  # revisions of its bank and key whose content was blanked
    messages: int  # messages it was learned from, now tombstones
    summaries: int  # conversation summaries those messages fed, cleared until rebuilt from what is left

    def as_dict(self) -> dict[str, int]:
        return {"revisions": self.revisions, "messages": self.messages, "summaries": self.summaries}

    def summary(self) -> str:
        def count(n: int, one: str, many: str) -> str:
            return f"{n} {one if n == 1 else many}"

        return (
            f"blanked {count(self.revisions, 'revision', 'revisions')}, erased "
            f"{count(self.messages, 'message', 'messages')} it was learned from and cleared "
            f"{count(self.summaries, 'conversation summary', 'conversation summaries')} they fed."
        )


@transaction.atomic
def erase_note(*, note: Note, actor: Actor) -> NoteErasure:
    """The one erasure of a note, whichever path asks for it (the API, the lens, the admin, the
    command, the demo, a person's erasure). The note and its vector go; so do the messages it was
    learned from (tombstones) and the summaries they fed (cleared here, so no later turn reads them,
    and rebuilt from what is left after commit). Erasure beats the log: its content leaves every
    revision of its bank and key (refused attempts included), its key wherever the bank's log names
    it, and the notes merged into it; the events stay."""
    note_id = note.pk
    # Before the note: its provenance rows go with it.
    sources = provenance.erase_sources(note)
    delete_note(note=note, actor=actor, reason=ERASED_REASON)
    # A query that found it may say what it said, and so may one that found nothing.
    reads.forget_reads_of(
        team=note.team, notes=[note_id], texts=[note.key, note.description, note.content], person_id=note.bank.person_id
    )
    event = Revision.objects.filter(team_id=note.team_id, note_id=note_id, action=Revision.Action.DELETE).latest("id")
    revisions = _erase_note_from_log(note=note, keep=event)
    # And from what webhooks were told of it (sent or still to send); note.erased itself says no words.
    erase_event_content(team_id=note.team_id, note_ids=[note_id])
    # An edit of it waiting for review quotes it (the text to replace): it is declined, its words blanked.
    Proposal.objects.filter(team_id=note.team_id, note_id=note_id, status=Proposal.Status.PENDING).update(
        status=Proposal.Status.REJECTED, decided_at=timezone.now(), decided_by=ERASED_REASON,
        key="", description="", content="", find="", category="", details={},
    )  # fmt: skip
    return NoteErasure(revisions=revisions, messages=sources.messages, summaries=sources.summaries)


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
        assert note.expires_at is not None  # selected by expires_at__lte
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
        keep.content = check_content(content)
    if description is not None:
        keep.description = check_description(description)
    keep.repetitions += sum(o.repetitions for o in absorbed)
    keep.updated_at = timezone.now()
    keep.save()
    indexing.schedule(keep.pk)
    for other in absorbed:
        _remove(other, actor, Revision.Action.MERGE, f"merged into '{keep.key}': {reason}")
    _log(bank, actor, Revision.Action.MERGE, note=keep, before=before, after=keep.snapshot(), reason=reason)
    return keep


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
