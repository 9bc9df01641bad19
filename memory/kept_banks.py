"""What recall keeps of each bank, per version of the bank, and each note's words.

A recall (memory/recall.py) reads only the banks' versions; a bank's notes are read when a write
has raised its version or a note expired (KeptBank). Kept with each bank: its live notes as light
rows (Candidate, with the hash of each note's text, computed by Postgres), their words (Terms,
token counts kept by that hash and language, so a note is tokenised once per version of its text)
and the unit vectors of their present text as they are found. A bank at a new version takes over
the notes no write touched (by each row's xmin and updated_at) and reads only the rest.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, cast

import numpy as np
from django.utils import timezone

from accounts.models import Agent, Person, Team
from config.prepared import statement_cursor
from memory.banks import applicable_banks_and_mutes
from memory.embedders import Vector
from memory.indexing import NOTES, namespace_for, unit_from_binary
from memory.language import ENGLISH
from memory.models import Bank, Note, NoteVector, OntologyNode
from memory.queries import TurnContext, scope_refs_match
from memory.text import tokens
from memory.validation import check_scope_refs, validate_scope

# BM25 counts a word of the key three times and one of the description twice: they name the note.
KEY_WEIGHT = 3
DESCRIPTION_WEIGHT = 2


# --- the candidates, kept per version of each bank ------------------------------------------


class Candidate(NamedTuple):
    """A note as recall first sees it: enough to filter, shadow, score and find its vector (a
    tuple: a thousand of them are kept per bank)."""

    pk: int
    bank_id: int
    key: str
    scope_refs: dict[str, list[str]]
    semantics: list[str]
    updated_at: datetime
    text_hash: str  # NOTES.text_hash of its key, description and content
    language: str  # the text-search configuration its words are read with (Note.language)

    @classmethod
    def of(cls, note: Note) -> Candidate:
        return cls(
            note.pk,
            note.bank_id,
            note.key,
            note.scope_refs,
            note.semantics,
            note.updated_at,
            NOTES.text_hash(note),
            note.language,
        )


class Vectors:
    """The present vectors of a kept bank's notes under one (namespace, model, width): unit rows,
    zero where a note has none yet (its vector is looked for again on the next recall)."""

    def __init__(self, size: int, dim: int) -> None:
        self.matrix = np.zeros((size, dim), dtype=np.float32)
        self.present = np.zeros(size, dtype=bool)


class KeptBank:
    """One version of a bank as recall keeps it: its live notes as light rows, their words (token
    counts, and for each word of a query the notes that hold it) and, as they are found, their vectors.

    Valid while the bank has this version (every write that changes what the bank shows raises it,
    in the writer's transaction: memory.services.revisions) and until the first of its notes
    expires. The words and vectors are those of each note's present text (by its hash): nothing of
    an earlier text, or of an erased note, is ever used again; a new version replaces this one,
    taking over what it kept of the notes no write touched since (by each row's version: `marks`)."""

    def __init__(self, *, version: int, rows: list[Candidate], categories: list[str], known: dict[int, Terms],
                 expiries: list[datetime | None], marks: list[str],
                 texts: dict[int, tuple[str, str, str]] | None = None) -> None:  # fmt: skip
        self.version = version
        self.rows = rows
        self.categories = categories
        self._known = known  # the words of rows taken over from an earlier version, by row
        self._texts = texts or {}  # the text of rows read with it (key, description, content), by id
        self._terms: list[Terms] | None = None
        self.expiries = expiries
        self.marks = marks  # each row's version (its xmin and updated_at): unchanged, it is taken over
        ending = [expiry for expiry in expiries if expiry is not None]
        self.valid_until = min(ending) if ending else None
        self.stamps = np.array([row.updated_at.timestamp() for row in rows], dtype=np.float64)
        self.languages = {row.language for row in rows}  # a row's words are read in its language
        self._holding: dict[tuple[str, str], list[int]] = {}
        self._places: dict[int, int] | None = None
        self.vectors: dict[tuple[str, str, int], Vectors] = {}
        self.lock = threading.Lock()

    @property
    def terms(self) -> list[Terms]:
        """Each row's words, read when a recall first needs them (the composer, which keeps only
        the vectors, never does): from TERMS, or the notes' text for those not seen before."""
        terms = self._terms
        if terms is None:
            # Read outside the lock (a turn reading vectors need not wait on it); two recalls that
            # both find it missing read the same words, and either's list is kept.
            known = self._known
            missing = [index for index in range(len(self.rows)) if index not in known]
            found = [self.rows[index] for index in missing]
            read = dict(zip(missing, text_terms(found, texts=self._texts), strict=True))
            terms = [known[index] if index in known else read[index] for index in range(len(self.rows))]
            with self.lock:
                if self._terms is None:
                    self._terms = terms
                    self._known = {}
                    self._texts = {}
                terms = self._terms
        return terms

    def places(self) -> dict[int, int]:
        """Each note's row, by id (found once)."""
        if self._places is None:
            self._places = {row.pk: index for index, row in enumerate(self.rows)}
        return self._places

    def holding(self, language: str, word: str) -> list[int]:
        """The rows whose words, read in `language`, include `word` (looked for once per word)."""
        found = self._holding.get((language, word))
        if found is None:
            found = [i for i, words in enumerate(self.terms) if word in words.counts and words.language == language]
            if len(self._holding) > 50_000:
                self._holding.clear()
            self._holding[(language, word)] = found
        return found


KEPT_NOTES = 20_000  # notes of kept banks a process holds at most (a 1,000-note bank: some 3 MB)
_kept_banks: OrderedDict[int, KeptBank] = OrderedDict()
_kept_lock = threading.Lock()


def forget_kept_banks(bank_ids: Iterable[int]) -> None:
    """Drop what this process keeps of these banks (a person's erasure, once it commits: their
    banks are gone, and nothing of them should stay in memory until it ages out)."""
    with _kept_lock:
        for bank_id in bank_ids:
            _kept_banks.pop(bank_id, None)


def forget_kept() -> None:
    """Drop everything recall keeps (tests, and a benchmark's cold recall)."""
    with _kept_lock:
        _kept_banks.clear()


# Each live note of a bank with its row's version (the xmin of the row: the transaction that last
# wrote it, and its updated_at: for two writes of one row in one transaction), and the columns
# recall keeps of the notes whose version is not the one an earlier read of the bank had (every
# note, without one): one statement. The hash is NOTES.text_hash's, computed by Postgres. A refresh also reads the text of the notes written since, for
# their words: only a few, where a first read (the composer's, which needs no words) would read all.
_READ = """
SELECT n.id, m.mark, f.*
FROM {note} n
CROSS JOIN LATERAL (SELECT n.xmin::text || ' ' || n.updated_at::text AS mark) m
LEFT JOIN unnest(%(ids)s::bigint[], %(marks)s::text[]) AS k(id, mark) ON k.id = n.id
LEFT JOIN LATERAL (
    SELECT n.key, n.scope_refs::text, n.semantics::text, n.updated_at,
           {text_hash},
           n.language, n.category, n.expires_at,
           CASE WHEN %(texts)s THEN n.description END, CASE WHEN %(texts)s THEN n.content END
    WHERE k.mark IS DISTINCT FROM m.mark
) f ON true
WHERE n.team_id = %(team)s AND n.bank_id = %(bank)s AND (n.expires_at IS NULL OR n.expires_at > %(now)s)
ORDER BY n.id
"""


def _read_bank(team: Team, bank: Bank, now: datetime, earlier: KeptBank | None) -> KeptBank:
    """The bank at its present version, in one round trip: its notes' versions, and the rows of
    the notes written since `earlier` was read (every note's, without one)."""
    params: dict[str, Any] = {
        "team": team.pk,
        "bank": bank.pk,
        "now": now,
        "ids": [row.pk for row in earlier.rows] if earlier is not None else [],
        "marks": earlier.marks if earlier is not None else [],
        "texts": earlier is not None,
    }
    with statement_cursor() as cursor:
        cursor.execute(_READ.format(note=Note._meta.db_table, text_hash=NOTES.text_hash_sql("n")), params)
        found = cursor.fetchall()
    place = {row.pk: index for index, row in enumerate(earlier.rows)} if earlier is not None else {}
    rows_out: list[Candidate] = []
    categories: list[str] = []
    known: dict[int, Terms] = {}  # the words an earlier version had read, by row here
    earlier_terms = earlier._terms if earlier is not None else None
    expiries: list[datetime | None] = []
    kept_marks: list[str] = []
    texts: dict[int, tuple[str, str, str]] = {}  # of the notes written since `earlier`, by id
    taken: list[tuple[int, int]] = []  # (row here, row in earlier) of each note taken over
    for pk, mark, key, refs, tags, updated_at, text_hash, language, category, expires_at, described, content in found:
        if key is None:  # the version `earlier` has: taken over
            assert earlier is not None
            at = place[pk]
            taken.append((len(rows_out), at))
            rows_out.append(earlier.rows[at])
            categories.append(earlier.categories[at])
            if earlier_terms is not None:
                known[len(rows_out) - 1] = earlier_terms[at]
            elif at in earlier._known:
                known[len(rows_out) - 1] = earlier._known[at]
            expiries.append(earlier.expiries[at])
        else:
            # Most notes have no refs or tags: their JSON is decoded only when there is some.
            rows_out.append(
                Candidate(pk, bank.pk, key, _json(refs, {}), _json(tags, []), updated_at, text_hash, language)
            )
            categories.append(category)
            expiries.append(expires_at)
            if content is not None:
                texts[pk] = (key, described, content)
        kept_marks.append(mark)
    kept = KeptBank(
        version=bank.version, rows=rows_out, categories=categories, known=known, expiries=expiries,
        marks=kept_marks, texts=texts,
    )  # fmt: skip
    if earlier is not None and taken:
        _carry_vectors(earlier, kept, taken)
    return kept


def _carry_vectors(earlier: KeptBank, kept: KeptBank, taken: list[tuple[int, int]]) -> None:
    """The vectors an earlier version of the bank held for the notes taken over (unchanged, so of
    the same text): a write costs the next recall one note's vector, not the bank's."""
    here = np.array([new for new, _ in taken])
    there = np.array([old for _, old in taken])
    with earlier.lock:  # not while another recall fills a row in: a row and its flag go together
        for where, found in earlier.vectors.items():
            carried = Vectors(len(kept.rows), found.matrix.shape[1])
            carried.matrix[here] = found.matrix[there]
            carried.present[here] = found.present[there]
            kept.vectors[where] = carried


def _kept_bank(team: Team, bank: Bank, now: datetime) -> KeptBank:
    """The bank as kept at its present version, read (and kept) when it is not."""
    with _kept_lock:
        kept = _kept_banks.get(bank.pk)
        if kept is not None:
            _kept_banks.move_to_end(bank.pk)
    if kept is None or kept.version != bank.version or (kept.valid_until is not None and kept.valid_until <= now):
        kept = _read_bank(team, bank, now, kept)
        with _kept_lock:
            _kept_banks[bank.pk] = kept
    return kept


def _bound(in_use: set[int]) -> None:
    """Drop the least recently read banks while more than KEPT_NOTES notes are kept, never one the
    recall in progress reads (a recall over banks larger than the bound keeps them all)."""
    with _kept_lock:
        held = sum(len(kept.rows) for kept in _kept_banks.values())
        for bank_id in list(_kept_banks):
            if held <= KEPT_NOTES:
                break
            if bank_id not in in_use:
                held -= len(_kept_banks.pop(bank_id).rows)


@dataclass
class Visible:
    """A recall's candidates: each bank read (narrowest first) with the rows of it that apply."""

    banks: list[tuple[KeptBank, list[int]]]

    @property
    def candidates(self) -> list[Candidate]:
        return [kept.rows[index] for kept, rows in self.banks for index in rows]


def visible(
    *, team: Team, person: Person, agent: Agent | None, scope: str = "", context: TurnContext | None = None
) -> Visible:
    """Everything the concrete scope allows: the rules of queries.visible_notes (live, unmuted for
    the agent, scope refs matched, shadowed narrowest bank first); tags gate the digest, not recall.
    Read from the banks as kept per version: a recall reads the banks, and a bank's notes only
    when it changed."""
    context = context or TurnContext()
    scope = validate_scope(scope)
    refs = check_scope_refs(context.refs, "context.refs")
    # The mutes are read with the banks: a mute raises the versions of every bank its person reads,
    # but so does every write, and a recall right after one would read them again anyway.
    banks, muted = applicable_banks_and_mutes(team=team, person=person, scope=scope, agent=agent)
    now = timezone.now()
    seen: set[str] = set()
    out = []
    for bank in banks:
        kept = _kept_bank(team, bank, now)
        rows = kept.rows
        keep = []
        for index, row in enumerate(rows):
            if row.key in seen:
                continue
            if muted and muted.hides(pk=row.pk, category=kept.categories[index]):
                continue
            if row.scope_refs and not scope_refs_match(row.scope_refs, refs):
                continue
            keep.append(index)
        seen.update(rows[index].key for index in keep)
        out.append((kept, keep))
    _bound({bank.pk for bank in banks})
    return Visible(out)


def candidates(
    *, team: Team, person: Person, agent: Agent | None, scope: str = "", context: TurnContext | None = None
) -> list[Candidate]:
    """The notes a recall ranks, as light rows (see `visible`)."""
    return visible(team=team, person=person, agent=agent, scope=scope, context=context).candidates


def _json[T](text: str, empty: T) -> T:
    return empty if text in ("{}", "[]") else cast(T, json.loads(text))


# --- words: token counts kept per note version -------------------------------------


@dataclass(frozen=True)
class Terms:
    counts: dict[str, int]
    length: int
    language: str = ENGLISH  # the configuration its words were read with, and a query is read with

    @classmethod
    def of(cls, key: str, description: str, content: str, gloss: str = "", language: str = ENGLISH) -> Terms:
        words = (
            tokens(key.replace("-", " "), language) * KEY_WEIGHT
            + tokens(description, language) * DESCRIPTION_WEIGHT
            + tokens(content, language)
            + tokens(gloss, language)
        )
        return cls(dict(Counter(words)), len(words), language)


class TermsCache:
    """Token counts of notes by the hash of their text, least recently used dropped first.

    The hash changes with the text, so an entry is never stale: an edited note is a new entry, and
    the old one ages out. An entry records the language its words were read in, and one read in
    another language than the note's now (its language read anew) is not used but read again. An entry is only ever read for a live note holding that very text, so
    the words of an erased note are never used again (and age out too). Per process (each web or
    worker process warms its own); 20,000 short notes take some 30 MB."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[str, Terms] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, hashes: Iterable[str]) -> dict[str, Terms]:
        found = {}
        with self._lock:
            for hashed in hashes:
                terms = self._entries.get(hashed)
                if terms is not None:
                    self._entries.move_to_end(hashed)
                    found[hashed] = terms
        return found

    def put(self, hashed: str, terms: Terms) -> None:
        with self._lock:
            self._entries[hashed] = terms
            self._entries.move_to_end(hashed)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


TERMS = TermsCache(size=20_000)


def glossaries(team: Team, found: list[Candidate]) -> dict[str, str]:
    tags = {tag for c in found for tag in c.semantics}
    if not tags:
        return {}
    return {
        node.node_id: f"{node.label} {node.glossary}"
        for node in OntologyNode.objects.filter(team=team, node_id__in=tags)
    }


def text_terms(found: list[Candidate], texts: dict[int, tuple[str, str, str]] | None = None) -> list[Terms]:
    """Each candidate's terms from its text: cached by the text's hash, the text (key, description,
    content) taken from `texts` when the caller has it, and loaded only for notes not seen before."""
    cached = TERMS.get_many(c.text_hash for c in found)
    missing = [c for c in found if (kept := cached.get(c.text_hash)) is None or kept.language != c.language]
    if missing:
        by_id = {c.pk: texts[c.pk] for c in missing if texts and c.pk in texts}
        unread = [c.pk for c in missing if c.pk not in by_id]
        if unread:
            loaded = Note.objects.filter(pk__in=unread).values_list("pk", "key", "description", "content")
            by_id.update({pk: (key, description, content) for pk, key, description, content in loaded})
        # A note rewritten since the candidates were read is scored on its newer text this time.
        read = [(*by_id[c.pk], c) for c in missing if c.pk in by_id]
        for key, description, content, c in read:
            cached[c.text_hash] = Terms.of(key, description, content, language=c.language)
            if NOTES.hash_values(key, description, content) == c.text_hash:
                TERMS.put(c.text_hash, cached[c.text_hash])
    # A note deleted meanwhile matches nothing.
    return [cached.get(c.text_hash, Terms({}, 0, c.language)) for c in found]


def glossed(terms: Terms, tags: list[str], glossary: dict[str, str]) -> Terms:
    """A note's terms with its tags' glossary words counted as its own."""
    gloss = tokens(" ".join(glossary.get(tag, "") for tag in tags), terms.language)
    counts = Counter(terms.counts)
    counts.update(gloss)
    return Terms(dict(counts), terms.length + len(gloss), terms.language)


_VECTORS = """
SELECT note_id, text_hash, vector_send(embedding) FROM {table}
WHERE team_id = %(team)s AND namespace = %(namespace)s AND model = %(model)s AND dim = %(dim)s
  AND note_id = ANY(%(ids)s::bigint[])
"""


def present_vectors(team: Team, seen: Visible, model: str, dim: int) -> list[Vectors]:
    """Each bank's vectors of its present texts, the candidates' missing ones looked for first."""
    where = (namespace_for(team.pk), model, dim)
    found = []
    wanted: dict[int, tuple[KeptBank, Vectors, int]] = {}  # note id -> where its vector goes
    for kept, keep in seen.banks:
        with kept.lock:
            held = kept.vectors.get(where)
            if held is None:
                held = kept.vectors[where] = Vectors(len(kept.rows), dim)
        found.append(held)
        for local in keep:
            if not held.present[local]:
                wanted[kept.rows[local].pk] = (kept, held, local)
    if wanted:
        with statement_cursor() as cursor:
            # Each vector in pgvector's binary form (memory.indexing.unit_from_binary).
            cursor.execute(_VECTORS.format(table=NoteVector._meta.db_table), {
                "team": team.pk, "namespace": where[0], "model": model, "dim": dim, "ids": list(wanted),
            })  # fmt: skip
            rows = cursor.fetchall()
        for note_id, hashed, sent in rows:
            kept, held, local = wanted[note_id]
            if kept.rows[local].text_hash != hashed:
                continue  # a vector of an earlier text: not this note's meaning now
            unit = unit_from_binary(sent, dim)
            if unit is None:
                continue
            with kept.lock:
                held.matrix[local] = unit
                held.present[local] = True
    return found


def similarities(*, team: Team, banks: list[Bank], current: dict[int, str], vector: Vector, model: str, dim: int
                 ) -> dict[int, float] | None:  # fmt: skip
    """Cosine similarity to `vector` of each of these notes (id -> the hash of its present text)
    that has a vector of that text, from the banks as kept (the composer orders a turn's notes by
    it): no distance is computed by the database on a turn, and a vector is looked up once.

    None when a bank is not kept yet and keeping it would take room other banks hold (more than
    KEPT_NOTES in all): the caller asks the database, so that a process serving more people's
    notes than it keeps does not read whole banks turn after turn, dropping one for another."""
    with _kept_lock:
        unkept = [bank for bank in banks if bank.pk not in _kept_banks]
        notes_kept = sum(len(kept.rows) for kept in _kept_banks.values())
    if unkept and notes_kept + len(current) > KEPT_NOTES:
        return None
    now = timezone.now()
    parts: list[tuple[KeptBank, list[int]]] = []
    for bank in banks:
        kept = _kept_bank(team, bank, now)
        rows = kept.rows
        place = kept.places()
        keep = [
            at for pk, hashed in current.items() if (at := place.get(pk)) is not None and rows[at].text_hash == hashed
        ]
        parts.append((kept, keep))
    _bound({bank.pk for bank in banks})
    seen = Visible(parts)
    scores = cosines(team, seen, vector, model=model, dim=dim)
    return {row.pk: score for row, score in zip(seen.candidates, scores.tolist(), strict=True) if not math.isnan(score)}


def cosines(team: Team, seen: Visible, vector: Vector, *, model: str, dim: int) -> np.ndarray:
    """The cosine similarity to `vector` of each of seen.candidates, in that order, from the vectors
    of their present text (NaN for a note that has none yet)."""
    unit = np.asarray(vector, dtype=np.float32)
    unit = unit / (float(np.linalg.norm(unit)) or 1.0)
    found = np.full(sum(len(keep) for _, keep in seen.banks), np.nan)
    start = 0
    for (kept, keep), held in zip(seen.banks, present_vectors(team, seen, model, dim), strict=True):
        if keep:
            rows = np.asarray(keep)
            with kept.lock:  # each row read with its flag
                scores = held.matrix[rows] @ unit
                present = held.present[rows]
            found[start : start + len(keep)] = np.where(present, scores, np.nan)
        start += len(keep)
    return found
