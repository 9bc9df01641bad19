"""Memory as of a date: the notes as they stood at a past moment, rebuilt from the revision log.

Every write of a note logs its state after the change (Revision.after: key, description, content,
kind, category, scope refs, tags, expiry), and every removal logs the removal (a delete, an
eviction, a merge into another note: `after` is empty). So a note's state at a moment is the
`after` of its last such revision at or before it: present, or removed by then, or not yet there
when it has none. What the log does not keep (a note's source and repetition count) is not
rebuilt.

Erasure beats history: erasing a note blanks its revisions and marks them erased (and erasing a
person marks every revision about them), so a note with any erased revision is absent from every
past view, whenever the erasure happened. Mutes apply as they do today: a past note is withheld
from an agent when its category then, or the note as it is now, is muted for that agent.

Nothing here is on the path of a present-time read: the API, the tools and the lens call it only
when an `as_of` is given. Recall over the past ranks with the words and meaning of live recall
(memory.recall.rank): a past text that is still some note's present text uses its stored vector;
any other is embedded for this read only and never stored (a past text may be erased later).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, OuterRef, QuerySet, Subquery

from accounts.models import Agent, Person, Team
from memory.banks import applicable_banks_and_mutes
from memory.kept_banks import Candidate
from memory.language import note_config
from memory.models import Bank, Mute, Note, Revision
from memory.queries import TurnContext, scope_refs_match
from memory.recall import Bundle, Hit, Ranked, pack_bundle, rank
from memory.text import links
from memory.validation import check_scope_refs, validate_scope

# The actions that leave a note's state (after the change) or its removal in the log; refusals
# and latch events say nothing about a note's state.
STATE_ACTIONS = [
    Revision.Action.CREATE,
    Revision.Action.UPDATE,
    Revision.Action.APPEND,
    Revision.Action.MERGE,
    Revision.Action.DELETE,
    Revision.Action.EVICT,
]


def _not_erased(revisions: QuerySet[Revision]) -> QuerySet[Revision]:
    erased = Revision.objects.filter(team=OuterRef("team"), note_id=OuterRef("note_id"), erased=True)
    return revisions.exclude(Exists(erased))


def _first_seen() -> Subquery:
    first = Revision.objects.filter(team=OuterRef("team"), note_id=OuterRef("note_id"), action__in=STATE_ACTIONS)
    return Subquery(first.order_by("created_at", "id").values("created_at")[:1])


def _note_of(revision: Revision, bank: Bank, created_at: datetime) -> Note:
    """The note a revision's `after` describes, as an unsaved Note (its id is the note's)."""
    after = dict(revision.after or {})
    after["key"] = after.get("key") or revision.note_key
    return Note.from_snapshot(
        after,
        note_id=revision.note_id or 0,
        team_id=revision.team_id,
        bank=bank,
        created_at=created_at,
        updated_at=revision.created_at,
    )


def notes_as_of(*, moment: datetime, banks: Iterable[Bank]) -> list[Note]:
    """The notes of these banks as they stood at `moment`, by id: unsaved Notes with their banks,
    without source or repetitions (the log keeps neither). Erased notes never appear."""
    by_id = {bank.pk: bank for bank in banks}
    if not by_id:
        return []
    latest = (
        _not_erased(
            Revision.objects.filter(
                team_id__in={bank.team_id for bank in by_id.values()},
                bank_id__in=list(by_id),
                note_id__isnull=False,
                action__in=STATE_ACTIONS,
                created_at__lte=moment,
            )
        )
        .annotate(first_seen=_first_seen())
        .order_by("note_id", "-created_at", "-id")
        .distinct("note_id")
    )
    notes = []
    for revision in latest:
        if revision.after is None:  # removed by then
            continue
        assert revision.bank_id is not None  # filtered by bank
        notes.append(_note_of(revision, by_id[revision.bank_id], revision.first_seen))
    return notes


def withhold_muted(
    notes: list[Note], *, agent: Agent, person: Person | None, muted: frozenset[str] | None = None
) -> list[Note]:
    """The past notes this agent may read: none whose category then was muted for it by the person
    its bank is about (or by `person`, on whose behalf it reads), nor any note that is muted now.
    `muted`: the categories `person` muted for the agent, when the caller read them already (recall
    reads them with the banks, memory.banks.applicable_banks_and_mutes)."""
    if not notes:
        return notes
    team_id = notes[0].team_id
    if muted is None:
        persons = {note.bank.person_id for note in notes if note.bank.person_id} | ({person.pk} if person else set())
        # Category mutes; a mute of one note is in hidden_now (a deleted note takes its mutes with it).
        mutes = Mute.objects.filter(team_id=team_id, agent=agent, person_id__in=persons, note__isnull=True)
        pairs = set(mutes.values_list("person_id", "category"))
        hidden_category = {
            note.pk
            for note in notes
            if (note.bank.person_id, note.category) in pairs
            or (person is not None and (person.pk, note.category) in pairs)
        }
    else:
        hidden_category = {note.pk for note in notes if note.category in muted}
    ids = [note.pk for note in notes]
    existing = Note.objects.filter(team_id=team_id, pk__in=ids)
    hidden_now = set(existing.values_list("pk", flat=True)) - set(
        existing.unmuted_for(agent, person=person).values_list("pk", flat=True)
    )
    return [note for note in notes if note.pk not in hidden_category and note.pk not in hidden_now]


# --- one note, for the lens ---------------------------------------------------------------------


@dataclass(frozen=True)
class NoteThen:
    """One note at a moment: `note` when it stood then; otherwise why not."""

    note: Note | None
    bank: Bank
    state: str  # "present", "not_yet" (created later) or "removed" (deleted, evicted or merged by then)
    removed_by: str = ""  # the removal's action, when removed


def note_as_of(*, note_id: int, moment: datetime, banks: Iterable[Bank]) -> NoteThen | None:
    """This note at `moment`, if it is one of these banks' (the caller's view) and was never erased;
    None otherwise. The note may have been deleted since: the log still has it."""
    by_id = {bank.pk: bank for bank in banks}
    revisions = list(
        _not_erased(
            Revision.objects.filter(
                team_id__in={bank.team_id for bank in by_id.values()},
                bank_id__in=list(by_id),
                note_id=note_id,
                action__in=STATE_ACTIONS,
            )
        ).order_by("created_at", "id")
    )
    if not revisions:  # not this view's, or erased
        return None
    bank = by_id[revisions[0].bank_id or 0]
    then = [revision for revision in revisions if revision.created_at <= moment]
    if not then:
        return NoteThen(None, bank, "not_yet")
    last = then[-1]
    if last.after is None:
        return NoteThen(None, bank, "removed", removed_by=last.action)
    return NoteThen(_note_of(last, bank, revisions[0].created_at), bank, "present")


# --- recall and search over the past -------------------------------------------------------------


def visible_as_of(
    *,
    team: Team,
    person: Person,
    agent: Agent | None,
    moment: datetime,
    scope: str = "",
    context: TurnContext | None = None,
) -> list[Note]:
    """What recall would have ranked at `moment`, by today's rules (memory.kept_banks.visible): the
    applicable banks' notes then, still applying then (not expired), unmuted for the agent, scope refs
    matched, shadowed narrowest bank first. Banks are those that exist now."""
    context = context or TurnContext()
    scope = validate_scope(scope)
    refs = check_scope_refs(context.refs, "context.refs")
    banks, muted = applicable_banks_and_mutes(team=team, person=person, scope=scope, agent=agent)
    notes = notes_as_of(moment=moment, banks=banks)
    if agent is not None:
        notes = withhold_muted(notes, agent=agent, person=person, muted=muted.categories)
    by_bank: dict[int, list[Note]] = {}
    for note in sorted(notes, key=lambda note: note.key):
        by_bank.setdefault(note.bank_id, []).append(note)
    seen: set[str] = set()
    out: list[Note] = []
    for bank in banks:
        keep = [
            note
            for note in by_bank.get(bank.pk, [])
            if note.key not in seen
            and (note.expires_at is None or note.expires_at > moment)
            and (not note.scope_refs or scope_refs_match(note.scope_refs, refs))
        ]
        seen.update(note.key for note in keep)
        out.extend(keep)
    return out


def rank_as_of(team: Team, notes: list[Note], query: str, *, limit: int) -> Ranked:
    """memory.recall.rank over past notes: the same words and meaning, past texts embedded as needed."""
    for note in notes:
        note.language = note_config(f"{note.description}\n{note.content}")
    by_id = {note.pk: note for note in notes}
    scored, degraded = rank(team, [Candidate.of(note) for note in notes], query, notes=by_id, embed_missing=True)
    return Ranked(
        [Hit(by_id[s.candidate.pk], s.score, s.matched, bm25=s.bm25, similarity=s.similarity) for s in scored[:limit]],
        degraded,
    )


def recall_memories_as_of(
    *,
    team: Team,
    person: Person,
    agent: Agent | None,
    moment: datetime,
    query: str,
    limit: int = 5,
    scope: str = "",
    context: TurnContext | None = None,
) -> Ranked:
    """memory.recall.recall_memories as it would have answered at `moment`."""
    notes = visible_as_of(team=team, person=person, agent=agent, moment=moment, scope=scope, context=context)
    return rank_as_of(team, notes, query, limit=limit)


def recall_bundle_as_of(
    *,
    team: Team,
    person: Person,
    agent: Agent | None,
    moment: datetime,
    query: str,
    budget_chars: int = 4000,
    depth: int = 1,
    max_per_source: int = 1000,
    scope: str = "",
    context: TurnContext | None = None,
    seeds: int = 5,
) -> Bundle:
    """memory.recall.recall_bundle as it would have answered at `moment`: links followed among the
    notes of then."""
    notes = visible_as_of(team=team, person=person, agent=agent, moment=moment, scope=scope, context=context)
    ranked = rank_as_of(team, notes, query, limit=seeds)
    by_key = {note.key: note for note in notes}
    ordered: list[tuple[Note, str]] = [(hit.note, "match") for hit in ranked.hits]
    seen = {note.key for note, _ in ordered}
    frontier = [note for note, _ in ordered]
    for _ in range(depth):
        next_frontier = []
        for note in frontier:
            for linked in links(note.content):
                if linked in by_key and linked not in seen:
                    seen.add(linked)
                    ordered.append((by_key[linked], f"link:{note.key}"))
                    next_frontier.append(by_key[linked])
        frontier = next_frontier
    return pack_bundle(ordered, budget_chars=budget_chars, max_per_source=max_per_source, degraded=ranked.degraded)
