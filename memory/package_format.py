"""The memory package format, described once: pydantic models that validate an import (with the
messages below) and give the OpenAPI schema of /api/v1/imports and /api/v1/exports
(drf-spectacular reads pydantic models). memory.packages imports and exports with them.

`MemoryPackage` is the JSON form: the header, then banks of notes. `MemoryPackageLine` is a line
of the JSONL form, whose first line is the header (`MemoryPackageHeader`) and every other line
one note carrying its bank. A member marked SkipValidation is informational, or is checked by
the write path or by where the note goes (memory.packages), which say what is wrong in their
own words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    SkipValidation,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)

from memory.exceptions import InvalidNote
from memory.models import Bank, Note

FORMAT = "mnemo.memory-package"
# Version 2 added what a whole-person export holds besides the person's own banks: shared banks'
# notes about them (a bank's `about`) and their conversations. Import reads every version listed.
VERSION = 2
READABLE_VERSIONS = (1, 2)
HEADER = {"format": FORMAT, "version": VERSION}
EXPECTED = (
    f'a JSON object with "format": "{FORMAT}" and "version": {VERSION} (or JSONL whose first line is that header)'
)


def _format(value: Any, info: ValidationInfo) -> Any:
    if value != FORMAT:
        where = (info.context or {}).get("where", "the package")
        raise ValueError(f'Unknown package format {value!r} in {where}; expected "format": "{FORMAT}".')
    return value


def _version(value: Any) -> Any:
    if type(value) is not int or value not in READABLE_VERSIONS:
        readable = " and ".join(str(version) for version in READABLE_VERSIONS)
        raise ValueError(f"Unsupported {FORMAT} version {value!r}; this Mnemo reads versions {readable}.")
    return value


def _banks(value: Any) -> Any:
    if not isinstance(value, list):
        raise ValueError('"banks" must be a list of banks, each with its "notes".')
    return value


def _bank_kind(value: Any) -> Any:
    if not isinstance(value, str) or value not in Bank.Kind.values:
        raise ValueError(f"A bank's kind must be one of {', '.join(Bank.Kind.values)} (got {value!r}).")
    return value


def _scope(value: Any) -> Any:
    if value is not None and not isinstance(value, str):
        raise ValueError("A bank's scope must be a string such as project:apollo.")
    return value


def _string(default: str | None = None) -> Callable[[Any, ValidationInfo], Any]:
    def check(value: Any, info: ValidationInfo) -> Any:
        if value is None and default is not None:
            return default
        if not isinstance(value, str):
            raise ValueError(f"{info.field_name} must be a string.")
        return value

    return check


def _time(value: Any, info: ValidationInfo) -> datetime | None:
    if value is None or value == "":
        return None
    parsed = None
    if isinstance(value, str):
        try:
            parsed = parse_datetime(value)
        except ValueError:
            parsed = None
    if parsed is None:
        raise ValueError(f"{info.field_name} must be an ISO 8601 date and time (got {value!r}).")
    if timezone.is_naive(parsed):
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _export_only(description: str = "") -> Any:
    # Required, so the export's schema says it is always there; import ignores it, absent or not.
    return Field(description=description or None, json_schema_extra={"readOnly": True})


_Format = Annotated[str, BeforeValidator(_format), Field(description=f'Always "{FORMAT}".')]
_Version = Annotated[
    int, BeforeValidator(_version), Field(description=f"The format's version: {VERSION} (import also reads 1).")
]
_BankKind = Annotated[str, BeforeValidator(_bank_kind), Field(description=f"One of {', '.join(Bank.Kind.values)}.")]
_Scope = Annotated[str | None, BeforeValidator(_scope)]
_Person = Annotated[str | None, SkipValidation]  # checked where the note goes: a shared bank has none
_BankId = Annotated[str | None, SkipValidation]  # checked against kind, person and scope
_Text = Annotated[str, BeforeValidator(_string())]
_Time = Annotated[
    datetime | None, PlainValidator(_time), WithJsonSchema({"type": ["string", "null"], "format": "date-time"})
]
_Informational = Annotated[datetime | None, SkipValidation]


class _Package(BaseModel):
    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _absent_is_null(cls, data: Any) -> Any:
        # A required member that is absent is treated as null, so its own check names it.
        if isinstance(data, dict):
            return {name: None for name, member in cls.model_fields.items() if member.is_required()} | data
        return data


class MemoryPackageHeader(_Package):
    """What makes a file a memory package: the first members of the JSON form, the first line of the JSONL form."""

    format: _Format
    version: _Version


class MemoryPackageNote(_Package):
    """A note, as export writes it and import reads it."""

    id: Annotated[int, SkipValidation] = _export_only()
    key: _Text
    description: _Text
    content: _Text
    kind: Annotated[str, BeforeValidator(_string(Note.Kind.FACT))] = Field(
        default=Note.Kind.FACT, description=f"One of {', '.join(Note.Kind.values)}; default fact."
    )
    category: Annotated[str, BeforeValidator(_string(""))] = ""
    # Checked by the write path, as for every writer.
    scope_refs: Annotated[dict[str, list[str]] | None, SkipValidation] = None
    semantics: Annotated[list[str] | None, SkipValidation] = Field(
        default=None, description="Exact ontology ids of the importing team."
    )
    source: Annotated[str, SkipValidation] = _export_only()
    repetitions: Annotated[int, SkipValidation] = _export_only()
    expires_at: _Time = None
    created_at: _Informational = Field(default=None, description="Informational; ignored on import.")
    updated_at: _Informational = Field(default=None, description="Informational; ignored on import.")


class MemoryPackageBank(_Package):
    """A bank's notes; its kind, person and scope say where they go."""

    id: _BankId = Field(default=None, description="Checked against kind, person and scope.")
    kind: _BankKind
    person: _Person = Field(default=None, description="The person's id; null for a shared bank.")
    about: _Person = Field(
        default=None,
        description="A shared bank in a person's export: the person its notes were written about (version 2).",
    )
    scope: _Scope = Field(default="", description="For example project:apollo; empty for none.")
    policy: Annotated[str | None, SkipValidation] = Field(
        default=None, description=f"One of {', '.join(Bank.Policy.values)}; informational, ignored on import."
    )
    notes: list[MemoryPackageNote] = []


class MemoryPackageWithheld(BaseModel):
    agent: str
    categories: list[str]
    notes: list[int] = []
    reason: str


class MemoryPackage(MemoryPackageHeader):
    """A memory package as one JSON object. Export adds the members marked read-only."""

    exported_at: _Informational = None
    team: Annotated[str, SkipValidation] = _export_only("Export only: the team's slug.")
    person: Annotated[dict[str, Any], SkipValidation] = _export_only("Export only: the person's id and display name.")
    mutes: Annotated[list[dict[str, Any]], SkipValidation] = _export_only(
        "Export only: categories and notes muted per agent."
    )
    withheld: Annotated[MemoryPackageWithheld, SkipValidation] = _export_only(
        "Export only (to an agent): the categories and notes the person muted for it, left out of this export "
        "with the messages they were learned from and the summaries built from those."
    )
    banks: Annotated[list[MemoryPackageBank], BeforeValidator(_banks)]
    revisions: Annotated[list[dict[str, Any]] | None, SkipValidation] = Field(
        default=None, description="The person's revision log; ignored on import."
    )
    # Optional and ignored on import, so a version 1 reader takes a package with it and one without:
    # adding it needs no new version.
    reads: Annotated[list[dict[str, Any]] | None, SkipValidation] = Field(
        default=None,
        description=(
            "Export only: the retrieval audit's reads about the person (tool, agent, query, note and message "
            "ids by rank, counts, time), kept READ_AUDIT_DAYS; ignored on import."
        ),
        json_schema_extra={"readOnly": True},
    )
    # Checked by the section that imports it (conversations.person_data), which names the fault.
    conversations: Annotated[list[dict[str, Any]] | None, SkipValidation] = Field(
        default=None,
        description=(
            "Version 2: the person's conversations, each with agent, person, external_id, started_at, ended_at, "
            "summary, messages (role, content, created_at, external_id) and turns (informational). Imported "
            "into the agents of the same slug; their summaries are restored."
        ),
    )


class MemoryPackageLine(MemoryPackageNote):
    """A line of the JSONL form after the header: one note carrying its bank. Import reads every
    note this way (a JSON-form bank's kind and id stand for bank_kind and bank)."""

    bank_kind: _BankKind
    person: _Person = None
    about: _Person = None
    scope: _Scope = ""
    bank: _BankId = Field(default=None, description="The bank id, checked against bank_kind, person and scope.")


BANK_MEMBERS = ("bank_kind", "person", "about", "scope", "bank")


def _path(loc: tuple[int | str, ...]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).removeprefix(".")


def format_error(error: Mapping[str, Any]) -> InvalidNote:
    where = _path(error["loc"])
    if error["type"] == "value_error":
        message = str(error["ctx"]["error"])  # our own checks, above, say it all
    elif error["type"] == "model_type":
        message = f"{where} is not a JSON object."
    elif error["type"] == "list_type":
        message = f"{where} must be a list of {error['loc'][-1]}."
    else:
        message = f"{where}: {error['msg']}."
    return InvalidNote(message, field=where)


def is_shape_error(loc: tuple[int | str, ...]) -> bool:
    """Whether an error is about the package's shape (its header, its list of banks, a bank's list
    of notes), which refuses it whole, rather than about one bank's or note's own members, which
    refuses only those notes."""
    return len(loc) <= 2 or (loc[2] == "notes" and len(loc) <= 4)
