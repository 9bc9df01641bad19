from __future__ import annotations

from config.exceptions import DomainError


class InvalidNote(DomainError):
    code = "invalid"


class InvalidArguments(DomainError):
    """A tool call whose arguments are malformed: not an object, text no field can take, or a bad field."""

    code = "invalid"


class TooLong(DomainError):
    code = "too_long"


class UnknownOntologyId(DomainError):
    code = "unknown_ontology_id"


class BankFull(DomainError):
    code = "bank_full"


class Refused(DomainError):
    """A bounded bank judged the new note worth less than the weakest note it holds."""

    code = "refused"


class NoteNotFound(DomainError):
    code = "not_found"


class EditMismatch(DomainError):
    """find_replace was given text the note does not contain: well-formed input the note refuses."""

    code = "no_match"


class UnknownSource(DomainError):
    """A write named a message or turn as its source that is not the calling agent's with this person."""

    code = "unknown_source"


class ProposalDecided(DomainError):
    """A proposal that was already kept, not kept, or expired: it cannot be decided again."""

    code = "conflict"
