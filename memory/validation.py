"""Input validation for notes: keys, descriptions, content, kinds, categories, scope and semantics.

Each check returns the value as it will be stored (a key normalised to its slug) or raises the
domain error that names the field: InvalidNote (400 invalid), TooLong (422 too_long) or
UnknownOntologyId (422). Nothing is trimmed.
"""

from __future__ import annotations

from typing import Any

from accounts.models import Team
from config.text import TextKind, check_text
from memory.exceptions import InvalidNote, TooLong, UnknownOntologyId
from memory.models import CONTENT_MAX, DESCRIPTION_MAX, KEY_MAX, Note, OntologyNode
from memory.text import normalize_key

CATEGORY_MAX = 64
SCOPE_MAX = 200
REF_ID_MAX = 200


def validate_scope(scope: str | None) -> str:
    scope = check_text(scope or "", field="scope", kind=TextKind.IDENTIFIER, error=InvalidNote).strip()
    if len(scope) > SCOPE_MAX:
        raise TooLong(f"scope is {len(scope)} characters; the limit is {SCOPE_MAX}.", field="scope")
    return scope


def check_key(raw: str, field_name: str = "key") -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidNote(f"{field_name} must be a non-empty string.", field=field_name)
    # Checked before normalising: the slug would silently drop a control or bidi character.
    check_text(raw, field=field_name, kind=TextKind.IDENTIFIER, error=InvalidNote)
    key = normalize_key(raw)
    if not key:
        raise InvalidNote(f"{field_name} {raw!r} has no letters or digits to make a key from.", field=field_name)
    if len(key) > KEY_MAX:
        raise TooLong(f"{field_name} is {len(key)} characters; the limit is {KEY_MAX}.", field=field_name)
    return key


def check_description(description: str) -> str:
    if not isinstance(description, str) or not description.strip():
        raise InvalidNote("description must be a one-line summary of the note.", field="description")
    check_text(description, field="description", kind=TextKind.LINE, error=InvalidNote)
    if len(description) > DESCRIPTION_MAX:
        raise TooLong(
            f"description is {len(description)} characters; the limit is {DESCRIPTION_MAX}. Shorten it; nothing was written.",
            field="description",
        )
    return description


def check_content(content: str, field_name: str = "content") -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidNote(f"{field_name} must not be empty.", field=field_name)
    check_text(content, field=field_name, kind=TextKind.TEXT, error=InvalidNote)
    if len(content) > CONTENT_MAX:
        raise TooLong(
            f"{field_name} is {len(content)} characters; the limit is {CONTENT_MAX}. Split or condense it; nothing was written.",
            field=field_name,
        )
    return content


def check_kind(kind: str) -> str:
    if kind not in Note.Kind.values:
        raise InvalidNote(f"kind must be one of {', '.join(Note.Kind.values)} (got {kind!r}).", field="kind")
    return kind


def check_category(category: str | None) -> str:
    if not category:
        return ""
    if not isinstance(category, str):
        raise InvalidNote("category must be a string, such as preferences.", field="category")
    check_text(category, field="category", kind=TextKind.IDENTIFIER, error=InvalidNote)
    normalized = normalize_key(category)
    if not normalized:
        raise InvalidNote(f"category {category!r} has no letters or digits.", field="category")
    if len(normalized) > CATEGORY_MAX:
        raise TooLong(f"category is {len(normalized)} characters; the limit is {CATEGORY_MAX}.", field="category")
    return normalized


def check_scope_refs(refs: Any, field_name: str = "scope_refs") -> dict[str, list[str]]:
    if refs in (None, {}):
        return {}
    if not isinstance(refs, dict):
        raise InvalidNote(f'{field_name} must be an object like {{"project": ["P"]}}.', field=field_name)
    cleaned: dict[str, list[str]] = {}
    for ref_type, ids in refs.items():
        if not isinstance(ref_type, str) or not normalize_key(ref_type):
            raise InvalidNote(f"{field_name} has an empty or invalid reference type.", field=field_name)
        check_text(ref_type, field=field_name, kind=TextKind.IDENTIFIER, error=InvalidNote)
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i.strip() for i in ids):
            raise InvalidNote(f"{field_name}.{ref_type} must be a non-empty list of ids.", field=field_name)
        for ref_id in ids:
            check_text(ref_id, field=f"{field_name}.{ref_type}", kind=TextKind.IDENTIFIER, error=InvalidNote)
        if any(len(i) > REF_ID_MAX for i in ids):
            raise TooLong(f"{field_name}.{ref_type} has an id over {REF_ID_MAX} characters.", field=field_name)
        cleaned[ref_type] = sorted(set(ids))
    return cleaned


def check_semantics(team: Team, tags: Any, field_name: str = "semantics") -> list[str]:
    if tags in (None, []):
        return []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InvalidNote(f"{field_name} must be a list of ontology ids.", field=field_name)
    for tag in tags:
        check_text(tag, field=field_name, kind=TextKind.IDENTIFIER, error=InvalidNote)
    wanted = sorted(set(tags))
    known = set(OntologyNode.objects.filter(team=team, node_id__in=wanted).values_list("node_id", flat=True))
    unknown = [t for t in wanted if t not in known]
    if unknown:
        raise UnknownOntologyId(
            f"Unknown ontology id {unknown[0]!r} in {field_name}. Use an exact ontology id.", field=field_name
        )
    return wanted
