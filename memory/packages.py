"""Import and export of memory packages: the first of the three writers of notes (source "import").

A memory package is a versioned, self-describing file of notes grouped by bank. Import sends
every note through the single write path (`memory.services.remember`, source ``import``, actor
``import``), so caps, key normalisation, ontology ids, bank limits and the revision log apply
exactly as for any other write. Export gathers everything Mnemo's memory holds about one person,
for a data-access request (export plus erase answer a data-subject request).

The format is described once, by the pydantic models of memory.package_format: `MemoryPackage`
(a JSON object: the header, then banks of notes) and `MemoryPackageLine` (the JSONL form: the
header line, then one note per line carrying its bank). They validate an import and give the
OpenAPI schema of /api/v1/imports and /api/v1/exports.

On import:

- A bank's ``kind``, ``person`` and ``scope`` decide where its notes go (``private`` without a
  scope is the person's global bank, as for the remember tool); a stated bank id that does not
  match them refuses the note. People are created on first sight.
- Timestamps, ``id``, ``source``, ``repetitions`` and ``policy`` are informational: a note
  imported now is created now, and a new bank gets the limits configured at that moment.
- Import is idempotent by key: a note whose key exists in its bank is an upsert, so importing
  the same package twice reports every note ``unchanged`` the second time and logs nothing new.
- A note the write path refuses (over a cap, an unknown ontology id, a FULL bank, an expiry in
  the past, a malformed field...) is reported with its code and message, and logged as a
  ``refused`` revision, while the other notes still import.
- A file that is not a memory package of a known version is refused as a whole
  (``InvalidNote``, 400 ``invalid``) before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Prefetch, QuerySet
from django.utils import timezone
from pydantic import ValidationError

from accounts.models import Agent, Person, Team
from accounts.services import get_or_create_person
from config.exceptions import DomainError, NotFound
from config.text import find_unstorable
from memory import person_data, services
from memory.banks import bank_id_for, bank_kind_for
from memory.exceptions import InvalidNote
from memory.models import Bank, Mute, Note, Revision
from memory.package_format import (
    BANK_MEMBERS,
    EXPECTED,
    HEADER,
    MemoryPackage,
    MemoryPackageHeader,
    MemoryPackageLine,
    format_error,
    is_shape_error,
)
from memory.queries import shared_notes_about
from memory.read_queries import reads_for_export
from memory.validation import validate_scope

Progress = Callable[[int, int], None]  # (notes done, notes in the package)


# --- the report -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportRefusal:
    bank: str
    key: str
    code: str
    message: str


@dataclass
class ImportReport:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    refused: int = 0
    refusals: list[ImportRefusal] = field(default_factory=list)
    evicted: list[dict[str, Any]] = field(default_factory=list)
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)  # e.g. conversations: what it imported

    @property
    def total(self) -> int:
        return self.created + self.updated + self.unchanged + self.refused

    def summary(self) -> str:
        notes = f"created {self.created}, updated {self.updated}, unchanged {self.unchanged}, refused {self.refused}"
        for name, counts in self.sections.items():
            numbers = ", ".join(f"{count} {what}" for what, count in counts.items() if isinstance(count, int))
            refused = len(counts.get("refusals", []))
            notes += f"; {name}: {numbers}" + (f", {refused} refused" if refused else "")
        return notes

    def as_dict(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "refused": self.refused,
            "refusals": [asdict(refusal) for refusal in self.refusals],
            "evicted": list(self.evicted),
            **self.sections,
        }


# --- parsing ----------------------------------------------------------------------------------


def parse_package_text(text: str) -> dict[str, Any] | list[dict[str, Any]]:
    """Parse a package file: one JSON object, or JSONL (a header line, then one note per line)."""
    text = text.removeprefix("\ufeff")
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise InvalidNote(f"The package is empty; expected {EXPECTED}.", field="package")
    try:
        whole = json.loads(text)
    except RecursionError:
        raise InvalidNote("The package is nested too deeply to be a memory package.", field="package") from None
    except json.JSONDecodeError:
        pass
    else:
        if isinstance(whole, dict) and "banks" not in whole and len(lines) == 1:
            return [whole]  # JSONL with a header and no notes
        if not isinstance(whole, dict | list):
            raise InvalidNote(f"The package is a JSON {type(whole).__name__}; expected {EXPECTED}.", field="package")
        return whole
    parsed: list[dict[str, Any]] = []
    for number, line in lines:
        try:
            value = json.loads(line)
        except RecursionError:
            raise InvalidNote(f"Line {number} is nested too deeply to be a note.", field="package") from None
        except json.JSONDecodeError as exc:
            raise InvalidNote(
                f"Line {number} is not valid JSON ({exc.msg}, column {exc.colno}); expected {EXPECTED}.",
                field="package",
            ) from None
        if not isinstance(value, dict):
            raise InvalidNote(f"Line {number} is not a JSON object; every JSONL line is one object.", field="package")
        parsed.append(value)
    return parsed


@dataclass(frozen=True)
class _Entry:
    """One note to import and the bank it names, as the package gives them."""

    bank_kind: Any
    person: Any
    scope: Any
    bank_id: Any  # as stated in the package, or None
    note: dict[str, Any]
    about: Any = None  # a shared bank's notes: the person they were written about

    def as_line(self) -> dict[str, Any]:
        return {
            **self.note,
            "bank_kind": self.bank_kind,
            "person": self.person,
            "about": self.about,
            "scope": self.scope,
            "bank": self.bank_id,
        }


def _entries(data: Any, agent: Agent | None) -> list[_Entry]:
    """Check the package's shape, and that it names no other agent's conversations than the agent's
    (with an agent), and list its notes; nothing is written if it is refused."""
    if (problem := find_unstorable(data)) is not None:
        # Text Postgres cannot store (or a number out of range) anywhere refuses the whole file,
        # as a malformed file: no exporter writes one, and it may be in a person id many notes share.
        raise InvalidNote(f"{problem.field} {problem.message} Nothing was imported.", field=problem.field)
    if isinstance(data, dict):
        try:
            MemoryPackage.model_validate(data, context={"where": "the package"})
        except ValidationError as exc:
            shape = [error for error in exc.errors() if is_shape_error(error["loc"])]
            if shape:
                raise format_error(shape[0]) from None
        for section in person_data.sections():
            section.check(data.get(section.name), agent)
        return [
            _Entry(bank.get("kind"), bank.get("person"), bank.get("scope"), bank.get("id"), note, bank.get("about"))
            for bank in data["banks"]
            for note in bank.get("notes", [])
        ]
    if isinstance(data, list):
        if not data:
            raise InvalidNote(f"The package is empty; expected {EXPECTED}.", field="format")
        if not isinstance(data[0], dict):
            raise InvalidNote(f"the header line is not a JSON object; expected {EXPECTED}.", field="format")
        try:
            MemoryPackageHeader.model_validate(data[0], context={"where": "the header line"})
        except ValidationError as exc:
            raise format_error(exc.errors()[0]) from None
        entries = []
        for number, line in enumerate(data[1:], 2):
            if not isinstance(line, dict):
                raise InvalidNote(
                    f"Line {number} is not a JSON object; every JSONL line is one object.", field="package"
                )
            entries.append(
                _Entry(
                    line.get("bank_kind"), line.get("person"), line.get("scope"), line.get("bank"), line,
                    line.get("about"),
                )
            )  # fmt: skip
        return entries
    raise InvalidNote(f"The package is not a JSON object; expected {EXPECTED}.", field="package")


# --- import -----------------------------------------------------------------------------------


def import_package(
    *,
    team: Team,
    data: dict[str, Any] | list[dict[str, Any]],
    actor: services.Actor,
    agent: Agent | None,
    progress: Progress | None = None,
) -> ImportReport:
    """Import every note of a package through the write path; refusals are reported, not fatal.

    Imported for an agent (an ordinary key's), the package may hold that agent's conversations
    only; without one (an admin-capable key, the command), any agent's of the team. A package
    refused as a whole (not a package, malformed, holding text that cannot be stored, naming
    another agent's conversations) raises a DomainError and is logged as one refused revision.
    """
    try:
        entries = _entries(data, agent)
    except DomainError as exc:
        services.record_refused_call(
            team=team, actor=actor, operation="import", arguments=package_summary(data), message=exc.message,
            field=exc.field,
        )  # fmt: skip
        raise
    report = ImportReport()
    people: dict[str, Person] = {}
    for done, entry in enumerate(entries, 1):
        _import_entry(team, entry, actor, report, people)
        if progress is not None:
            progress(done, len(entries))
    if isinstance(data, dict):
        for section in person_data.sections():
            if data.get(section.name):
                report.sections[section.name] = section.load(team, data[section.name])
    return report


def package_summary(data: Any) -> dict[str, Any]:
    """What the revision log keeps of a refused package: its header and size, not its notes, and
    the value that refused it when it holds text no field can take (the log escapes it)."""
    if isinstance(data, dict):
        banks = data.get("banks")
        summary = {
            "format": data.get("format"),
            "version": data.get("version"),
            "banks": len(banks) if isinstance(banks, list) else None,
        }
    elif isinstance(data, list):
        header = data[0] if data and isinstance(data[0], dict) else {}
        summary = {"format": header.get("format"), "version": header.get("version"), "lines": len(data)}
    else:
        summary = {"package": data}
    if (problem := find_unstorable(data)) is not None:
        summary["refused"] = {problem.field: problem.value}
    return summary


def _import_entry(
    team: Team, entry: _Entry, actor: services.Actor, report: ImportReport, people: dict[str, Person]
) -> None:
    note = entry.note
    raw_key = note.get("key")
    key_label = raw_key if isinstance(raw_key, str) else ""
    bank_label = entry.bank_id if isinstance(entry.bank_id, str) else ""
    line: MemoryPackageLine | None = None
    errors: Sequence[Mapping[str, Any]] = []
    try:
        line = MemoryPackageLine.model_validate(entry.as_line())
    except ValidationError as exc:
        # Where the note goes is checked before the note, as the write path would.
        errors = sorted(exc.errors(), key=lambda error: error["loc"][0] not in BANK_MEMBERS)
    try:
        if errors and errors[0]["loc"][0] in BANK_MEMBERS:
            raise format_error(errors[0])
        bank, bank_label, person, scope = _target(team, entry, people)
        if line is None:
            raise format_error(errors[0])
        fields = _note_fields(line)
    except DomainError as exc:  # refused before the write path, which logs its own refusals: log it here
        services.record_refused_call(
            team=team, actor=actor, operation="import",
            arguments={"bank_kind": entry.bank_kind, "person": entry.person or entry.about, "scope": entry.scope, **note},
            message=exc.message, field=exc.field,
        )  # fmt: skip
        report.refused += 1
        report.refusals.append(ImportRefusal(bank_label, key_label, exc.code, exc.message))
        return
    try:
        result = services.remember(
            team=team,
            person=person,  # in a shared bank, the person its note is about, if the package says
            actor=actor,
            bank=bank,
            scope=scope,
            source=Note.Source.IMPORT,
            **fields,
        )
    except DomainError as exc:
        report.refused += 1
        report.refusals.append(ImportRefusal(bank_label, key_label, exc.code, exc.message))
        return
    if result.action == "created":
        report.created += 1
    elif result.action == "updated":
        report.updated += 1
    else:
        report.unchanged += 1
    report.evicted.extend({"bank": result.bank.address, **evicted} for evicted in result.evicted)


def _target(team: Team, entry: _Entry, people: dict[str, Person]) -> tuple[str, str, Person | None, str]:
    """The remember arguments (bank, scope, person) for an entry whose bank_kind and scope are
    well formed, and the bank id they lead to."""
    which = entry.bank_kind
    scope = validate_scope(entry.scope)
    kind = bank_kind_for(which, scope)
    external_id = None
    if kind != Bank.Kind.SHARED:
        if not isinstance(entry.person, str) or not entry.person.strip():
            raise InvalidNote(f"A {which} bank needs the person's id.", field="person")
        external_id = entry.person.strip()
    bank_id = bank_id_for(kind, Person(external_id=external_id) if external_id else None, scope)
    if entry.bank_id is not None and entry.bank_id != bank_id:
        raise InvalidNote(
            f"Bank id {entry.bank_id!r} does not match its kind, person and scope, which give {bank_id!r}; "
            "nothing was written.",
            field="bank",
        )
    if kind == Bank.Kind.SHARED and entry.about is not None:
        # Written about this person: the write names them, so their export and erasure find it.
        if not isinstance(entry.about, str) or not entry.about.strip():
            raise InvalidNote("A shared bank's about must be the id of the person its notes are about.", field="about")
        external_id = entry.about.strip()
    person = None
    if external_id is not None:
        if external_id not in people:
            people[external_id] = get_or_create_person(team=team, external_id=external_id)
        person = people[external_id]
    return which, bank_id, person, scope


def _note_fields(line: MemoryPackageLine) -> dict[str, Any]:
    """The note's fields as remember takes them: the format checked their types, the write path checks the rest."""
    return {
        "key": line.key,
        "description": line.description,
        "content": line.content,
        "kind": line.kind,
        "category": line.category,
        "scope_refs": line.scope_refs,
        "semantics": line.semantics,
        "expires_at": line.expires_at,
    }


# --- export -----------------------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _note_out(note: Note) -> dict[str, Any]:
    return {
        "id": note.pk,
        "key": note.key,
        "description": note.description,
        "content": note.content,
        "kind": note.kind,
        "category": note.category,
        "scope_refs": note.scope_refs,
        "semantics": note.semantics,
        "source": note.source,
        "repetitions": note.repetitions,
        "expires_at": _iso(note.expires_at),
        "created_at": _iso(note.created_at),
        "updated_at": _iso(note.updated_at),
    }


def _revision_out(revision: Revision) -> dict[str, Any]:
    return {
        "id": revision.pk,
        "bank": revision.bank_ref,
        "note": revision.note_id,
        "note_key": revision.note_key,
        "action": revision.action,
        "actor": revision.actor,
        "actor_ref": revision.actor_ref,
        "before": revision.before,
        "after": revision.after,
        "reason": revision.reason,
        "request_id": revision.request_id,
        "erased": revision.erased,
        "created_at": _iso(revision.created_at),
    }


def _banks_of(team: Team, person: Person, agent: Agent | None) -> QuerySet[Bank]:
    notes = Note.objects.filter(team=team).order_by("key")
    if agent is not None:
        notes = notes.unmuted_for(agent, person=person)
    return (
        Bank.objects.filter(team=team, person=person)
        .prefetch_related(Prefetch("notes", queryset=notes))
        .order_by("address")
    )


def _shared_banks_about(team: Team, person: Person, agent: Agent | None) -> list[dict[str, Any]]:
    notes = shared_notes_about(team=team, person=person).order_by("bank__address", "key")
    if agent is not None:
        notes = notes.unmuted_for(agent, person=person)
    banks: dict[str, dict[str, Any]] = {}
    for note in notes:
        bank = banks.setdefault(note.bank.address, {
            "id": note.bank.address, "kind": note.bank.kind, "person": None, "about": person.external_id,
            "scope": note.bank.scope, "policy": note.bank.policy, "notes": [],
        })  # fmt: skip
        bank["notes"].append(_note_out(note))
    return list(banks.values())


def export_person(*, team: Team, person: Person, agent: Agent | None = None) -> dict[str, Any]:
    """Everything held about one person in a team, for a data-access request: their private and
    global banks, the notes shared banks hold about them, their revisions and mutes, the retrieval
    audit's reads about them (ids and queries, never content), and what other apps registered
    (memory.person_data: their conversations with messages, summaries and turns).

    Made for an agent (with its API key), it holds what that agent may read: the notes and
    revisions the person muted for it (by category or one by one) are left out, and `withheld`
    names those categories and notes so the omission shows; conversations are that agent's own,
    without the messages and summaries a mute withholds (conversations.mutes). Without an agent (an
    admin-capable key, a command), nothing is left out.
    """
    if person.team_id != team.pk:
        raise NotFound("No such person in this team.", field="person")
    banks = [
        {
            "id": bank.address,
            "kind": bank.kind,
            "person": person.external_id,
            "scope": bank.scope,
            "policy": bank.policy,
            "notes": [_note_out(note) for note in bank.notes.all()],
        }
        for bank in _banks_of(team, person, agent)
    ] + _shared_banks_about(team, person, agent)
    revisions = Revision.objects.filter(team=team, person=person).order_by("created_at", "id")
    mutes = Mute.objects.filter(team=team, person=person).select_related("agent").order_by("created_at", "id")
    withheld: dict[str, Any] = {}
    if agent is not None:
        revisions = revisions.unmuted_for(agent)
        theirs = [mute for mute in mutes if mute.agent_id == agent.pk]
        withheld = {
            "withheld": {
                "agent": agent.slug,
                "categories": sorted(mute.category for mute in theirs if mute.note_id is None),
                "notes": sorted(mute.note_id for mute in theirs if mute.note_id is not None),
                "reason": (
                    "The person muted these categories and notes for this agent; their notes and revisions, the "
                    "messages they were learned from and the summaries built from those are left out."
                ),
            }
        }
    return {
        **HEADER,
        "exported_at": timezone.now().isoformat(),
        "team": team.slug,
        "person": {
            "id": person.external_id,
            "display_name": person.display_name,
            "created_at": _iso(person.created_at),
        },
        "mutes": [
            {
                "agent": mute.agent.slug,
                "category": mute.category or None,
                "note": mute.note_id,
                "created_at": _iso(mute.created_at),
            }
            for mute in mutes
        ],
        **withheld,
        "banks": banks,
        "revisions": [_revision_out(revision) for revision in revisions],
        "reads": reads_for_export(team=team, person=person, agent=agent),
        **{section.name: section.export(team, person, agent) for section in person_data.sections()},
    }
