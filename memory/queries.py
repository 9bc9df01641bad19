"""Reads: applicability, shadowing and the digest. Recall and search are in memory/recall.py."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Exists, OuterRef
from django.utils import timezone

from accounts.models import Agent, Person, Team
from config.prepared import columns_of, statement_cursor
from memory.banks import applicable_banks
from memory.digest import digest_max_chars as digest_bound
from memory.digest import digest_sort_key, render_digest, split_listed
from memory.embedders import Vector
from memory.exceptions import UnknownOntologyId
from memory.indexing import namespace_for, vector_text
from memory.models import (
    CONTENT_MAX,
    DESCRIPTION_MAX,
    KEY_MAX,
    Bank,
    Mute,
    Note,
    NoteQuerySet,
    NoteVector,
    OntologyNode,
    Revision,
)
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
        self.context = set(context_tags)
        # Without context tags nothing matches but untagged notes: the ontology need not be read.
        nodes = (
            {node.node_id: node for node in OntologyNode.objects.filter(team=team).order_by()} if self.context else {}
        )
        by_pk = {node.pk: node for node in nodes.values()}
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

    def matching(self) -> set[str]:
        """Every tag that matches: a note applies when it has no tag or one of these."""
        return {tag for tag in self.covered | self.endpoints.keys() if self.tag_matches(tag)}


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


# The applicability rules as SQL, written once: the ORM expressions below and the turn's own query
# (turn_notes) both use these.
SCOPE_REFS_MATCH = (
    "NOT EXISTS (SELECT 1 FROM jsonb_each({column}) AS ref(ref_type, ids) WHERE NOT "
    "(ref.ids ?| ARRAY(SELECT jsonb_array_elements_text(({wanted})::jsonb -> ref.ref_type))))"
)
SEMANTICS_MATCH = "({column} = '[]'::jsonb OR {column} ?| ({tags})::text[])"
REF_TYPES = "(SELECT count(*) FROM jsonb_object_keys({column}))"
REF_COUNT = "(SELECT coalesce(sum(jsonb_array_length(ref.ids)), 0) FROM jsonb_each({column}) AS ref(ref_type, ids))"


class _RefTypes(models.Func):
    template = REF_TYPES.format(column="%(expressions)s")
    output_field = models.IntegerField()


class _RefCount(models.Func):
    template = REF_COUNT.format(column="%(expressions)s")
    output_field = models.IntegerField()


class _TagCount(models.Func):
    function = "jsonb_array_length"
    output_field = models.IntegerField()


@dataclass
class Applicable:
    """The applicable notes as a query, not yet read: a caller reads only the columns and rows it
    needs (the digest its first lines, the composer the content of the notes that fit).

    `unshadowed` is every applicable note, with `bank_rank` (0 for the narrowest bank read);
    `notes` keeps the narrowest bank's note of each key, and ordered by (bank_rank, key) it is the
    order visible_notes returns.
    """

    banks: list[Bank]
    unshadowed: models.QuerySet[Note]

    @property
    def notes(self) -> models.QuerySet[Note]:
        narrower = self.unshadowed.filter(
            models.Q(key=OuterRef("key")), models.Q(("bank_rank__lt", OuterRef("bank_rank")))
        )
        return self.unshadowed.filter(~Exists(narrower))


def digest_order() -> list[models.OrderBy]:
    """digest_sort_key in SQL, then visible order for ties (Python's sort is stable)."""
    return [
        _RefTypes(models.F("scope_refs")).desc(),
        _RefCount(models.F("scope_refs")).asc(),
        _TagCount(models.F("semantics")).desc(),
        models.F("updated_at").desc(),
        models.F("bank_rank").asc(),
        models.F("key").asc(),
    ]


class _ScopeRefsMatch(models.Func):
    """A note's scope_refs match the context's refs (as scope_refs_match): for every ref type the
    note names, the context holds one of its ids for that type."""

    output_field = models.BooleanField()

    def __init__(self, refs: dict[str, list[str]]) -> None:
        super().__init__(models.F("scope_refs"), models.Value(json.dumps(refs)))

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:  # type: ignore[override]
        column, column_params = compiler.compile(self.source_expressions[0])
        wanted, wanted_params = compiler.compile(self.source_expressions[1])
        return SCOPE_REFS_MATCH.format(column=column, wanted=wanted), [*column_params, *wanted_params]


class _SemanticsMatch(models.Func):
    """A note's semantics match (as TagMatcher.matches): no tag, or one of the matching tags."""

    output_field = models.BooleanField()

    def __init__(self, tags: set[str]) -> None:
        super().__init__(models.F("semantics"), models.Value(sorted(tags), output_field=ArrayField(models.TextField())))

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:  # type: ignore[override]
        column, column_params = compiler.compile(self.source_expressions[0])
        tags, tags_params = compiler.compile(self.source_expressions[1])
        return SEMANTICS_MATCH.format(column=column, tags=tags), [*column_params, *column_params, *tags_params]


def applicable_notes(
    *,
    team: Team,
    person: Person,
    agent: Agent | None,
    scope: str = "",
    context: TurnContext | None = None,
    gate_on_tags: bool = True,
) -> Applicable:
    """Applicable, unmuted, unexpired notes, shadowed narrowest first, chosen in the database.

    The rules are visible_notes' (scope_refs_match, TagMatcher, shadow), written as SQL: filtering
    runs before shadowing, so a note is hidden only by an applicable note of the same key in a
    narrower bank.
    """
    context = context or TurnContext()
    scope = validate_scope(scope)
    refs = check_scope_refs(context.refs, "context.refs")
    matcher = TagMatcher(team, context.tags) if gate_on_tags else None
    banks = applicable_banks(team=team, person=person, scope=scope)
    rank = models.Case(
        *(models.When(bank_id=bank.pk, then=models.Value(index)) for index, bank in enumerate(banks)),
        output_field=models.IntegerField(),
    )
    notes = (
        Note.objects.filter(team=team, bank__in=banks)
        .live(timezone.now())
        .annotate(bank_rank=rank)
        .filter(_ScopeRefsMatch(refs))
    )
    if matcher is not None:
        notes = notes.filter(_SemanticsMatch(matcher.matching()))
    if agent is not None:
        notes = notes.unmuted_for(agent, person=person)
    return Applicable(banks=banks, unshadowed=notes)


# --- the turn's notes, kept per bank version ----------------------------------------------------

# Every applicable note of a turn, shadowed, without its content: what only a write can change.
_TURN_NOTES = """
WITH applicable AS (
    SELECT n.id, n.key, n.description, n.kind, n.updated_at, n.expires_at, n.scope_refs, n.semantics, n.content,
           array_position(%(banks)s::bigint[], n.bank_id) AS bank_rank
    FROM {note} n JOIN {bank} b ON b.id = n.bank_id
    WHERE n.team_id = %(team)s AND n.bank_id = ANY(%(banks)s::bigint[])
      AND (n.expires_at IS NULL OR n.expires_at > %(now)s)
      AND {in_scope}
      AND (NOT %(gate)s OR {tagged})
      AND NOT EXISTS (
          SELECT 1 FROM {mute} m
          WHERE m.team_id = n.team_id AND m.agent_id = %(agent)s
            AND (m.note_id = n.id OR (m.note_id IS NULL AND m.category = n.category))
            AND (m.person_id = b.person_id OR m.person_id = %(person)s))
),
shown AS (
    SELECT *, row_number() OVER (PARTITION BY key ORDER BY bank_rank) AS shadow_rank FROM applicable
),
listed AS (
    SELECT *, row_number() OVER (
        ORDER BY {ref_types} DESC, {ref_count}, jsonb_array_length(semantics) DESC, updated_at DESC, bank_rank, key
    ) AS digest_position
    FROM shown WHERE shadow_rank = 1
)
SELECT l.id, l.key, l.description, l.digest_position,
       length(to_json(l.key)::text), length(to_json(left(l.content, %(content_cap)s))::text), length(l.content),
       l.kind = 'page',
       row_number() OVER (ORDER BY l.updated_at DESC, l.bank_rank, l.key),
       {text_hash},
       (SELECT min(a.expires_at) FROM applicable a)
FROM listed l
"""
# A note's text hash as memory.indexing.NOTES.text_hash computes it.
_TEXT_HASH = "encode(sha256(convert_to(l.key || E'\\n' || l.description || E'\\n' || l.content, 'UTF8')), 'hex')"


@dataclass(frozen=True)
class TurnNote:
    """An applicable note as the composer reads it, without its content."""

    pk: int
    key: str
    description: str
    digest_position: int  # 1 for the note the digest lists first (digest_sort_key)
    key_json_chars: int  # the key's length as a JSON string
    content_json_chars: int  # the content's first content_cap characters, as a JSON string
    content_chars: int


KEPT_CONTENT_CHARS = 64_000  # note content a context keeps at most (NOTES_CHARS is 8,000 a turn)


class KeptContents:
    """The content of the notes turns chose, kept with a context's notes for the same versions of
    its banks (_Kept): a later turn that chooses a note again reads nothing. Every write that
    changes a note's content raises its bank's version, so a new version starts with none; a note
    erased goes with its version (no later turn uses what was kept for an earlier one)."""

    def __init__(self) -> None:
        self._by_id: dict[int, str] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def read(self, *, team: Team, ids: list[int]) -> dict[int, str]:
        """note_contents of these notes: those kept, and the rest read."""
        with self._lock:
            found = {pk: self._by_id[pk] for pk in ids if pk in self._by_id}
        missing = [pk for pk in ids if pk not in found]
        if missing:
            found.update(note_contents(team=team, ids=missing))
        return found

    def keep(self, contents: dict[int, str]) -> None:
        """Keep contents the caller checked against its notes (their lengths agree with the ones
        read for these versions), while there is room."""
        with self._lock:
            for pk, content in contents.items():
                if pk in self._by_id or self._chars + len(content) > KEPT_CONTENT_CHARS:
                    continue
                self._by_id[pk] = content
                self._chars += len(content)


@dataclass
class TurnNotes:
    banks: list[Bank]
    notes: list[TurnNote]  # the curated page first, then by meaning, then newest first
    digest: str  # the digest of these notes (build_digest's text)
    contents: KeptContents = field(default_factory=KeptContents)  # of these notes, kept with them


@dataclass(frozen=True)
class _Kept:
    """A turn's applicable notes as one process keeps them, valid for one version of each bank read."""

    banks: tuple[tuple[int, int, bool], ...]  # (id, version, is_full) of each bank read
    valid_until: datetime | None  # the first expiry among them: from then on, read again
    notes: list[TurnNote]
    ids: list[int]
    hashes: dict[int, str]  # of each note's present text: only a vector of that text is current
    pages: list[bool]
    newest: list[int]  # each note's place newest first (ties: narrower bank, then key)
    digest: str
    contents: KeptContents = field(default_factory=KeptContents)  # read by the turns that chose them


KEPT_CONTEXTS = 256  # turn contexts (team, person, agent, scope, refs, tags) a process keeps
_kept: OrderedDict[tuple[Any, ...], _Kept] = OrderedDict()
_kept_lock = threading.Lock()


def forget_kept_banks(bank_ids: Iterable[int]) -> None:
    """Drop what this process keeps of these banks (the write path calls it once a write commits;
    other processes see the bank's new version and read again)."""
    gone = set(bank_ids)
    with _kept_lock:
        for context in [c for c, kept in _kept.items() if any(bank[0] in gone for bank in kept.banks)]:
            del _kept[context]


def forget_kept_notes() -> None:
    """Drop everything this process keeps of turn notes (tests, and a benchmark's cold turn)."""
    with _kept_lock:
        _kept.clear()


def _read_kept(
    *,
    team: Team,
    person: Person,
    agent: Agent,
    banks: list[Bank],
    refs: dict[str, list[str]],
    tags: list[str],
    content_cap: int,
    now: datetime,
    seen: tuple[tuple[int, int, bool], ...],
) -> _Kept:
    tables = {"note": Note._meta.db_table, "bank": Bank._meta.db_table, "mute": Mute._meta.db_table}
    sql = _TURN_NOTES.format(
        **tables,
        in_scope=SCOPE_REFS_MATCH.format(column="n.scope_refs", wanted="%(refs)s"),
        tagged=SEMANTICS_MATCH.format(column="n.semantics", tags="%(tags)s"),
        ref_types=REF_TYPES.format(column="scope_refs"),
        ref_count=REF_COUNT.format(column="scope_refs"),
        text_hash=_TEXT_HASH,
    )
    params: dict[str, Any] = {
        "banks": [bank.pk for bank in banks],
        "team": team.pk,
        "now": now,
        "refs": json.dumps(refs),
        "gate": True,
        "tags": tags,
        "agent": agent.pk,
        "person": person.pk,
        "content_cap": content_cap,
    }
    with statement_cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    notes = [TurnNote(*row[:7]) for row in rows]
    listed, omitted = split_listed(sorted(notes, key=lambda note: note.digest_position), settings.DIGEST_LIMIT)
    digest = render_digest(listed, omitted=omitted, full_kinds=[bank.kind for bank in banks if bank.is_full])
    return _Kept(
        banks=seen,
        valid_until=rows[0][10] if rows else None,
        notes=notes,
        ids=[row[0] for row in rows],
        hashes={row[0]: row[9] for row in rows},
        pages=[row[7] for row in rows],
        newest=[row[8] for row in rows],
        digest=digest,
    )


# The cosine distance of each kept note's vector of this team's namespace, this model and width (see
# memory.vectors.similarities), with the hash of the text it was computed from: only a vector of
# the note's present text counts (compared in Python: a join on 1,000 hashes cost Postgres more).
_DISTANCES = """
SELECT v.note_id, v.text_hash, v.embedding <=> %(vector)s::vector
FROM {vector} v
WHERE v.team_id = %(team)s AND v.note_id = ANY(%(ids)s::bigint[]) AND v.namespace = %(namespace)s
  AND v.model = %(model)s AND v.dim = %(dim)s
"""


def _distances(
    *, team: Team, kept: _Kept, banks: list[Bank], vector: Vector | None, model: str, dim: int
) -> dict[int, float]:
    """The cosine distance of each kept note's vector of its present text to `vector`: from the
    vectors kept of these banks (memory.kept_banks), or computed by pgvector when the process has
    no room to keep them."""
    if vector is None or not kept.ids:
        return {}
    from memory import kept_banks  # it applies this module's rules: imported when first needed

    found = kept_banks.similarities(team=team, banks=banks, current=kept.hashes, vector=vector, model=model, dim=dim)
    if found is not None:
        return {note_id: 1.0 - similarity for note_id, similarity in found.items()}
    params: dict[str, Any] = {
        "vector": vector_text(vector),
        "ids": "{" + ",".join(map(str, kept.ids)) + "}",
        "team": team.pk,
        "namespace": namespace_for(team.pk),
        "model": model,
        "dim": dim,
    }
    with statement_cursor() as cursor:
        cursor.execute(_DISTANCES.format(vector=NoteVector._meta.db_table), params)
        return {note_id: distance for note_id, hashed, distance in cursor if kept.hashes[note_id] == hashed}


def turn_notes(
    *,
    team: Team,
    person: Person,
    agent: Agent,
    scope: str,
    context: TurnContext | None,
    vector: Vector | Callable[[], Vector | None] | None,
    model: str = "",
    dim: int = 0,
    content_cap: int = CONTENT_MAX,
    banks: list[Bank] | None = None,
) -> TurnNotes:
    """Every applicable note of a turn, without its content, for the composer, and their digest.

    The notes and their order are visible_notes' (applicable, unmuted, unexpired, shadowed), ranked
    as the composer gives them: the curated page first (newest first), then by cosine distance of
    their current vector to `vector` (a vector of `model` and `dim`, or a function giving it, called
    once the notes are read; notes without one after those),
    then newest first, ties in visible order. Each carries its place in the digest's order and the
    JSON lengths of its key and content.

    What only a write can change (the notes, their lines' lengths, the hashes of their text, the
    digest) is read in one hand-written query (compiling the equivalent queryset cost more than
    running it; the rules' SQL is shared with applicable_notes) and kept by the process for the
    versions of the banks read, which the write path raises (memory.services.revisions), until
    the first of the notes expires. A turn then reads only the banks, and orders the kept notes by
    the distances of their current vectors, kept per bank version too (memory.kept_banks). The banks are read before the notes, so what is
    kept is never older than the versions it is kept for. `banks`: the applicable banks, when the
    caller read them already (memory.banks.banks_read; the composer sends it with its history).
    """
    context = context or TurnContext()
    scope = validate_scope(scope)
    refs = check_scope_refs(context.refs, "context.refs")
    tags = sorted(TagMatcher(team, context.tags).matching())
    if banks is None:
        banks = applicable_banks(team=team, person=person, scope=scope)
    if not banks:
        return TurnNotes(banks, [], render_digest([], omitted=0, full_kinds=[]))
    now = timezone.now()
    seen = tuple((bank.pk, bank.version, bank.is_full) for bank in banks)
    where = (team.pk, person.pk, agent.pk, scope, json.dumps(refs, sort_keys=True), tuple(tags), content_cap,
             settings.DIGEST_LIMIT)  # fmt: skip
    with _kept_lock:
        kept = _kept.get(where)
        if kept is not None:
            _kept.move_to_end(where)
    if kept is None or kept.banks != seen or (kept.valid_until is not None and kept.valid_until <= now):
        kept = _read_kept(
            team=team, person=person, agent=agent, banks=banks, refs=refs, tags=tags, content_cap=content_cap,
            now=now, seen=seen,
        )  # fmt: skip
        with _kept_lock:
            _kept[where] = kept
            while len(_kept) > KEPT_CONTEXTS:
                _kept.popitem(last=False)
    if callable(vector):  # asked for only now: it may still be being computed while the notes are read
        vector = vector()
    distance = _distances(team=team, kept=kept, banks=banks, vector=vector, model=model, dim=dim)

    def rank(index: int) -> tuple[int, int, float, int]:
        if kept.pages[index]:
            return (0, 0, 0.0, kept.newest[index])
        found = distance.get(kept.ids[index])
        return (1, 1, 0.0, kept.newest[index]) if found is None else (1, 0, found, kept.newest[index])

    order = sorted(range(len(kept.notes)), key=rank)
    return TurnNotes(banks, [kept.notes[index] for index in order], kept.digest, kept.contents)


def note_contents(*, team: Team, ids: list[int]) -> dict[int, str]:
    """The content of each of these notes of the team that still exists, by id. Hand-written: the
    composer asks for it every turn, and compiling the equivalent queryset cost more than running it."""
    if not ids:
        return {}
    with statement_cursor() as cursor:
        cursor.execute(
            f"SELECT id, content FROM {Note._meta.db_table} WHERE team_id = %s AND id = ANY(%s::bigint[])",
            [team.pk, ids],
        )
        return dict(cursor.fetchall())


def notes_with_banks(*, team: Team, ids: list[int]) -> dict[int, Note]:
    """Each of these notes of the team that still exists, whole, with its bank, by id (what
    recall returns). Hand-written: the queryset (select_related, in_bulk) took 1.4-1.9 ms of CPU
    to build and read for five notes, several times the round trip."""
    if not ids:
        return {}
    notes, banks = columns_of(Note, "n"), columns_of(Bank, "b")
    with statement_cursor() as cursor:
        cursor.execute(
            f"SELECT {notes.select}, {banks.select} FROM {notes.table} n JOIN {banks.table} b ON b.id = n.bank_id "
            "WHERE n.team_id = %s AND n.id = ANY(%s::bigint[])",
            [team.pk, ids],
        )
        rows = cursor.fetchall()
    found = {}
    for row in rows:
        note = notes.instance(row[: notes.width])
        note.bank = banks.instance(row[notes.width :])
        found[note.pk] = note
    return found


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
    found = applicable_notes(
        team=team, person=person, agent=agent, scope=scope, context=context, gate_on_tags=gate_on_tags
    )
    banks = {bank.pk: bank for bank in found.banks}
    notes = list(found.notes.order_by(models.F("bank_rank"), "key"))
    for note in notes:
        note.bank = banks[note.bank_id]  # the banks were read already: no join
    return Visible(banks=found.banks, notes=notes)


def muted_categories(*, person: Person, agent: Agent) -> set[str]:
    return set(
        Mute.objects.filter(team_id=person.team_id, person=person, agent=agent, note=None).values_list(
            "category", flat=True
        )
    )


# --- the digest -------------------------------------------------------------------------------


def digest_max_chars(limit: int | None = None) -> int:
    """The digest's worst case, a constant of the configuration (memory.digest.digest_max_chars)."""
    limit = settings.DIGEST_LIMIT if limit is None else limit
    return digest_bound(limit, key_max=KEY_MAX, description_max=DESCRIPTION_MAX)


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
        return digest_of(applicable_notes(team=team, person=person, agent=agent, scope=scope, context=context))
    ordered = sorted(visible.notes, key=digest_sort_key)
    entries, omitted = split_listed(ordered, settings.DIGEST_LIMIT)
    full_banks = [bank for bank in visible.banks if bank.is_full]
    text = render_digest(entries, omitted=omitted, full_kinds=[bank.kind for bank in full_banks])
    return Digest(text=text, entries=entries, omitted=omitted, full_banks=full_banks)


def digest_of(found: Applicable) -> Digest:
    """The digest of these applicable notes, in one query: the database orders them by
    digest_sort_key (ties in visible order), reads the first DIGEST_LIMIT without their content,
    and counts the rest."""
    limit = settings.DIGEST_LIMIT
    rows: list[Note] = list(
        found.notes.defer("content")
        .annotate(applicable=models.Window(models.Count("pk")))
        .order_by(*digest_order())[:limit]
    )
    banks = {bank.pk: bank for bank in found.banks}
    for note in rows:
        note.bank = banks[note.bank_id]
    omitted = max(0, getattr(rows[0], "applicable") - limit) if rows else 0  # noqa: B009 - an annotation
    full_banks = [bank for bank in found.banks if bank.is_full]
    text = render_digest(rows, omitted=omitted, full_kinds=[bank.kind for bank in full_banks])
    return Digest(text=text, entries=rows, omitted=omitted, full_banks=full_banks)


# --- whole-person requests --------------------------------------------------------------------

CONTENT_ACTIONS = ("create", "update", "append")


def shared_notes_about(*, team: Team, person: Person) -> NoteQuerySet:
    """Notes of shared banks written about this person: a write on their behalf (its revision names
    them as its subject) created the note or changed its content."""
    written_about = Revision.objects.filter(
        team=team, person=person, action__in=CONTENT_ACTIONS, note_id__isnull=False, bank__kind=Bank.Kind.SHARED
    ).values("note_id")
    return Note.objects.filter(team=team, bank__kind=Bank.Kind.SHARED, pk__in=written_about).select_related("bank")


def notes_written_by(agents: Iterable[Agent], since: datetime) -> dict[int, int]:
    """How many notes each agent created or changed since then, counted in the revision log (an
    agent's writes are logged under its slug, so a renamed agent's older writes are not counted)."""
    by_key = {(agent.team_id, agent.slug): agent.pk for agent in agents}
    written = dict.fromkeys(by_key.values(), 0)
    if not by_key:
        return written
    rows = (
        Revision.objects.filter(
            team__in={team_id for team_id, _ in by_key},
            actor=Revision.Actor.AGENT,
            actor_ref__in={slug for _, slug in by_key},
            action__in=CONTENT_ACTIONS,
            created_at__gte=since,
        )
        .values_list("team_id", "actor_ref")
        .annotate(count=models.Count("id"))
        .order_by()
    )
    for team_id, slug, count in rows:
        if (team_id, slug) in by_key:
            written[by_key[team_id, slug]] = count
    return written
