"""The revision log: who wrote, each write's row, and refused writes (which leave nothing else)."""

from __future__ import annotations

import logging
import operator
import re
from dataclasses import dataclass
from functools import partial, reduce
from typing import Any

from django.db import transaction
from django.db.models import Case, CharField, F, Q, TextField, Value, When
from django.db.models.functions import Cast, Concat

from accounts.models import Agent, Person, Team
from config.prepared import Insert, statement_cursor
from config.text import TextKind, escape_unstorable, storable_json, text_problem
from memory.models import CONTENT_MAX, Bank, Note, Revision
from memory.queries import forget_kept_banks
from memory.text import normalize_key
from webhooks.models import EventType
from webhooks.services import emit_event

logger = logging.getLogger(__name__)

REASON_MAX = 2000


@dataclass(frozen=True)
class Actor:
    """Who performed a write, for the revision log."""

    kind: str  # a Revision.Actor value
    ref: str = ""
    request_id: str = ""

    @classmethod
    def for_agent(cls, agent: Agent, request_id: str = "") -> Actor:
        return cls(Revision.Actor.AGENT, agent.slug, request_id)


def new_bank_version(bank_ids: list[int]) -> None:
    """A change to what these banks show: raise their versions in the writer's transaction, so that
    once it commits no process uses what it kept of them (memory.queries.turn_notes, memory.recall's
    kept banks: each compares the versions it reads), and this process drops its turn notes."""
    if not bank_ids:
        return
    # Locked in id order in one statement, as every writer does: two writers raising overlapping
    # sets of banks (a person's erasure, another person's mute of shared banks) never deadlock.
    with statement_cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {Bank._meta.db_table} SET version = version + 1
            WHERE id IN (SELECT id FROM {Bank._meta.db_table} WHERE id = ANY(%s) ORDER BY id FOR UPDATE)
            """,
            [sorted(set(bank_ids))],
        )
    transaction.on_commit(partial(forget_kept_banks, bank_ids))


def _insert_raising_version(revision: Revision, bank_id: int) -> None:
    """Insert the revision and raise its bank's version (new_bank_version) in one statement: every
    logged write pays one round trip for both, not two. The INSERT is the one revision.save() would
    send (config.prepared.Insert)."""
    insert = Insert.of(revision)
    with statement_cursor() as cursor:
        # A data-modifying WITH runs exactly once, whether or not the INSERT refers to it. One row:
        # its lock (which the writer usually holds already) needs no order.
        cursor.execute(
            f"WITH raised AS (UPDATE {Bank._meta.db_table} SET version = version + 1 WHERE id = %s) {insert.sql}",
            [bank_id, *insert.params],
        )
        (pk,) = cursor.fetchone()
    Insert.inserted(revision, pk)
    transaction.on_commit(partial(forget_kept_banks, [bank_id]))


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
    subject: Person | None = None,
) -> Revision:
    # A shared bank belongs to no one, so its events name the person the write was about (the
    # subject of the call), which is how a person's export and erasure find what was said of them there.
    revision = Revision(
        team_id=bank.team_id,
        bank=bank if bank.pk else None,
        bank_ref=bank.address,
        person_id=bank.person_id or (subject.pk if subject is not None else None),
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
    if bank.pk:
        _insert_raising_version(revision, bank.pk)
    else:
        revision.save(force_insert=True)
    if note is not None:
        _emit_note_event(revision, bank, actor, note, removed=after is None and action != Revision.Action.REFUSED)
    return revision


def _emit_note_event(revision: Revision, bank: Bank, actor: Actor, note: Note, *, removed: bool) -> None:
    """Every change the log records is an event for the team's webhooks, ordered per note by the
    revision's id (taken under the bank's lock, so in commit order)."""
    if revision.action not in (
        Revision.Action.CREATE, Revision.Action.UPDATE, Revision.Action.APPEND, Revision.Action.MERGE,
        Revision.Action.DELETE, Revision.Action.EVICT,
    ):  # fmt: skip
        return
    data: dict[str, Any] = {
        "note": note.pk,
        "bank": bank.address,
        "revision": revision.pk,
        "actor": actor.kind,
        "agent": actor.ref if actor.kind == Revision.Actor.AGENT else None,
    }
    if removed and revision.reason == ERASED_REASON:
        event_type = EventType.NOTE_ERASED  # what it said is gone: no key, no content
    elif removed:
        event_type = EventType.NOTE_DELETED
        data |= {"key": note.key, "category": note.category}
    else:
        event_type = EventType.NOTE_CREATED if revision.action == Revision.Action.CREATE else EventType.NOTE_UPDATED
        data |= {
            "key": note.key,
            "category": note.category,
            "kind": note.kind,
            "description": note.description,
            "content": note.content,
        }
    emit_event(
        team_id=bank.team_id,
        event_type=event_type,
        data=data,
        subject=f"note:{note.pk}",
        sequence=revision.pk,
        person_id=revision.person_id,
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
    bank = Bank.objects.filter(team=team, address=bank_ref).first()
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
        bank_ref, person, key = note.bank.address, note.bank.person, note.key
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


# --- erasure ----------------------------------------------------------------------------------

ERASED_REASON = "erased on the person's request"
UNRESOLVED_PREFIX = "(unresolved"


def _erased_key(note_id: int) -> str:
    """What the log calls an erased note instead of its key, which may have been built from its content."""
    return f"erased-{note_id}"


def _key_pattern(key: str) -> re.Pattern[str]:
    # The key as a whole slug, not inside a longer one ("tea" is not in "teapot" or "tea-2").
    return re.compile(rf"(?<![a-z0-9-]){re.escape(key)}(?![a-z0-9-])")


def _erase_note_from_log(*, note: Note, keep: Revision | None) -> int:
    """Blank the content of every revision of this note's bank and key: its own events, refused
    attempts at that key (which carry no note id), and the notes merged into it (whose text it
    absorbed). The key is replaced by a placeholder wherever the bank's log names it, reasons
    included. `keep` (the erasure's own event) keeps its reason. Returns how many rows were blanked."""
    bank = note.bank
    note_ids = {note.pk}
    keys = {note.key}
    # Notes merged into this one, and the notes merged into those: their words live on in it.
    merges = Revision.objects.filter(
        team_id=note.team_id, bank_ref=bank.address, action=Revision.Action.MERGE, note_id__isnull=False
    ).only("note_id", "note_key", "reason")
    while absorbed := {
        (row.note_id, row.note_key)
        for row in merges.exclude(note_id__in=note_ids)
        if any(f"merged into '{key}'" in row.reason for key in keys)
    }:
        note_ids |= {note_id for note_id, _ in absorbed if note_id is not None}
        keys |= {key for _, key in absorbed}
    same_key = Q(note_key__in=keys) & (
        Q(bank_ref=bank.address)
        | (Q(bank_ref__startswith=UNRESOLVED_PREFIX) & Q(person_id=bank.person_id) & Q(person_id__isnull=False))
    )
    rows = Revision.objects.filter(team_id=note.team_id).filter(Q(note_id__in=note_ids) | same_key)
    blanked = rows.update(
        before=None,
        after=None,
        erased=True,
        note_key=Case(
            When(note_id__isnull=False, then=Concat(Value("erased-"), Cast("note_id", CharField()))),
            default=Value(_erased_key(note.pk)),
            output_field=CharField(),
        ),
        reason=Case(When(pk=keep.pk, then=F("reason")), default=Value(""), output_field=TextField())
        if keep is not None
        else Value(""),
    )
    # Other events of the bank may name the key in their reason (an eviction made room for it, a
    # bounded bank refused a newcomer in its favour, a merge folded into it).
    patterns = [(_key_pattern(key), _erased_key(note.pk)) for key in keys]
    naming = reduce(operator.or_, (Q(reason__contains=key) for key in keys))
    for revision in Revision.objects.filter(team_id=note.team_id, bank_ref=bank.address).filter(naming):
        reason = revision.reason
        for pattern, placeholder in patterns:
            reason = pattern.sub(placeholder, reason)
        if reason != revision.reason:
            Revision.objects.filter(pk=revision.pk).update(reason=reason)
    return blanked
