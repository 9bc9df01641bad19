"""Reads: applicability, shadowing and the digest. Recall and search are in memory/recall.py."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from django.conf import settings
from django.utils import timezone

from accounts.models import Agent, Person, Team
from memory.banks import applicable_banks
from memory.exceptions import UnknownOntologyId
from memory.framing import DIGEST_HEADER, json_line
from memory.models import DESCRIPTION_MAX, KEY_MAX, Bank, CategoryMute, Note, OntologyNode
from memory.validation import check_scope_refs, validate_scope

# --- applicability ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnContext:
    refs: dict[str, list[str]] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)


def scope_refs_match(note_refs: dict[str, list[str]], context_refs: dict[str, list[str]]) -> bool:
    """Every type the note names must match; alternatives within a type are OR'ed."""
    return all(set(ids) & set(context_refs.get(ref_type, ())) for ref_type, ids in note_refs.items())


class TagMatcher:
    """Decides whether a note's semantic tags apply, given the turn's context tags.

    A domain tag matches when the context holds it or any of its descendants; a relationship
    tag matches when the context holds it or either of its endpoints (or their descendants).
    """

    def __init__(self, team: Team, context_tags: Iterable[str]) -> None:
        nodes = {node.node_id: node for node in OntologyNode.objects.filter(team=team)}
        by_pk = {node.pk: node for node in nodes.values()}
        self.context = set(context_tags)
        unknown = sorted(self.context - nodes.keys())
        if unknown:
            raise UnknownOntologyId(
                f"Unknown ontology id {unknown[0]!r} in context.tags. Use an exact ontology id.", field="context.tags"
            )
        # Everything the context tags sit under (themselves included).
        self.covered: set[str] = set()
        for tag in self.context:
            node: OntologyNode | None = nodes[tag]
            while node is not None and node.node_id not in self.covered:
                self.covered.add(node.node_id)
                node = by_pk.get(node.parent_id) if node.parent_id else None
        self.endpoints = {
            node.node_id: (by_pk[node.source_id].node_id, by_pk[node.target_id].node_id)
            for node in nodes.values()
            if node.kind == OntologyNode.Kind.RELATIONSHIP and node.source_id and node.target_id
        }

    def tag_matches(self, tag: str) -> bool:
        if tag in self.endpoints:
            return tag in self.context or any(end in self.covered for end in self.endpoints[tag])
        return tag in self.covered

    def matches(self, semantics: list[str]) -> bool:
        return not semantics or any(self.tag_matches(tag) for tag in semantics)


class Keyed(Protocol):
    @property
    def key(self) -> str: ...


def shadow[N: Keyed](notes_by_bank: list[list[N]]) -> list[N]:
    """Keep the narrowest bank's note for each key (banks given narrowest first). Notes, or
    anything with a key (recall shadows light rows before it loads any note)."""
    seen: set[str] = set()
    kept: list[N] = []
    for notes in notes_by_bank:
        for note in notes:
            if note.key not in seen:
                seen.add(note.key)
                kept.append(note)
    return kept


@dataclass
class Visible:
    """What a turn may see of memory: applicable notes after shadowing, and the banks read."""

    banks: list[Bank]
    notes: list[Note]


def visible_notes(
    *,
    team: Team,
    person: Person,
    agent: Agent | None,
    scope: str = "",
    context: TurnContext | None = None,
    gate_on_tags: bool = True,
) -> Visible:
    """Applicable, unmuted, unexpired notes, shadowed narrowest first. Filtering runs before shadowing.

    With an agent, what the person muted for it is left out (Note.objects.unmuted_for); without
    one (the person's own lens), nothing is.
    """
    context = context or TurnContext()
    scope = validate_scope(scope)
    refs = check_scope_refs(context.refs, "context.refs")
    matcher = TagMatcher(team, context.tags) if gate_on_tags else None
    banks = applicable_banks(team=team, person=person, scope=scope)
    notes = Note.objects.filter(team=team, bank__in=banks).live(timezone.now()).select_related("bank")
    if agent is not None:
        notes = notes.unmuted_for(agent, person=person)
    rows = list(notes)
    per_bank: list[list[Note]] = []
    for bank in banks:
        applicable = [
            note
            for note in rows
            if note.bank_id == bank.pk
            and scope_refs_match(note.scope_refs, refs)
            and (matcher is None or matcher.matches(note.semantics))
        ]
        per_bank.append(applicable)
    return Visible(banks=banks, notes=shadow(per_bank))


def muted_categories(*, person: Person, agent: Agent) -> set[str]:
    return set(
        CategoryMute.objects.filter(team_id=person.team_id, person=person, agent=agent).values_list(
            "category", flat=True
        )
    )


# --- the digest -------------------------------------------------------------------------------

DIGEST_EMPTY = "Nothing is remembered yet."
DIGEST_MORE = "{count} more notes are remembered but not listed here."
FULL_NOTICE = (
    "The {kind} memory bank is full: new notes are refused until something is removed. If something "
    "new is worth keeping, offer the person to drop something old or outdated first."
)
_LINE_OVERHEAD = len(json_line({"key": "", "description": ""}))


def digest_line(note: Note) -> str:
    return json_line({"key": note.key, "description": note.description})


def digest_sort_key(note: Note) -> tuple[int, int, int, float]:
    """Scope specificity (distinct ref types, more first), precision (fewer refs first),
    semantic richness (more tags first), then updated_at (newest first)."""
    specificity = len(note.scope_refs)
    precision = sum(len(ids) for ids in note.scope_refs.values())
    return (-specificity, precision, -len(note.semantics), -note.updated_at.timestamp())


def digest_max_chars(limit: int | None = None) -> int:
    """The digest's worst case, a constant of the configuration.

    Keys are slugs (nothing to escape) and descriptions refuse control characters, so JSON can at
    most double a description (a quote or backslash becomes two characters).
    """
    limit = settings.DIGEST_LIMIT if limit is None else limit
    line = _LINE_OVERHEAD + KEY_MAX + 2 * DESCRIPTION_MAX + 1
    more = len(DIGEST_MORE.format(count=10**9)) + 1
    notices = 3 * (len(FULL_NOTICE.format(kind="private")) + 1)
    return len(DIGEST_HEADER) + 1 + limit * line + more + notices


@dataclass
class Digest:
    text: str
    entries: list[Note]
    omitted: int
    full_banks: list[Bank]


def build_digest(
    *,
    team: Team,
    person: Person,
    agent: Agent | None,
    scope: str = "",
    context: TurnContext | None = None,
    visible: Visible | None = None,
) -> Digest:
    """The standing ## Memory section. Pass `visible` when the caller already computed it."""
    if visible is None:
        visible = visible_notes(team=team, person=person, agent=agent, scope=scope, context=context)
    ordered = sorted(visible.notes, key=digest_sort_key)
    limit = settings.DIGEST_LIMIT
    entries, omitted = ordered[:limit], max(0, len(ordered) - limit)
    lines = [DIGEST_HEADER]
    lines.extend(digest_line(note) for note in entries)
    if not entries:
        lines.append(DIGEST_EMPTY)
    if omitted:
        lines.append(DIGEST_MORE.format(count=omitted))
    full_banks = [bank for bank in visible.banks if bank.is_full]
    lines.extend(FULL_NOTICE.format(kind=bank.kind) for bank in full_banks)
    return Digest(text="\n".join(lines), entries=entries, omitted=omitted, full_banks=full_banks)
