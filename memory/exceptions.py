from __future__ import annotations

from config.exceptions import DomainError


class InvalidNote(DomainError):
    code = "invalid"
    http_status = 400


class TooLong(DomainError):
    code = "too_long"
    http_status = 422


class UnknownOntologyId(DomainError):
    code = "unknown_ontology_id"
    http_status = 422


class BankFull(DomainError):
    code = "bank_full"
    http_status = 409


class Refused(DomainError):
    """A bounded bank judged the new note worth less than the weakest note it holds."""

    code = "refused"
    http_status = 409


class NoteNotFound(DomainError):
    code = "not_found"
    http_status = 404


class EditMismatch(DomainError):
    code = "invalid"
    http_status = 422
