"""What text Mnemo accepts, decided in one place and used at every boundary.

Postgres cannot store some text at all: a NUL (U+0000) in a text or JSON column, and lone
surrogates (U+D800-U+DFFF, which arrive as JSON escapes like "\\ud800" and are not valid
Unicode). Other characters can be stored but have no business in some fields. Three kinds of
field, from strictest to loosest:

- IDENTIFIER (person ids, keys, categories, scopes, references, ontology ids, bank ids): no
  control characters at all (C0, DEL, C1, tab and line breaks included), no line or paragraph
  separators, and no bidirectional controls (U+061C, U+200E, U+200F, U+202A-U+202E,
  U+2066-U+2069), which can make one id display as another.
- LINE (descriptions, summaries, display names, reasons): one line; no control characters or
  line/paragraph separators. Bidirectional controls are allowed: right-to-left text may need them.
- TEXT (content, observations, messages, queries, personas): tab, line feed and carriage return
  are allowed; every other control character is refused. Bidirectional controls are allowed.

All three refuse NUL and lone surrogates. Refusals are DomainErrors (400 `invalid`, naming the
field); nothing is trimmed or replaced. `find_unstorable` applies the TEXT rule to a whole parsed
JSON document (every string and every object key), plus limits on nesting and on numbers, so a
request body is checked before any of it is used. `escape_unstorable` and `storable_json` turn
what was refused into something the revision log can hold.
"""

from __future__ import annotations

import enum
import math
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Annotated, Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from pydantic import AfterValidator, PlainValidator, WithJsonSchema

from config.exceptions import DomainError

INT64_MAX = 2**63 - 1
# Legitimate bodies nest a few levels (a package: banks → notes → scope_refs → ids).
MAX_JSON_DEPTH = 32

TEXT_WHITESPACE = frozenset("\t\n\r")
LINE_SEPARATORS = frozenset("\u2028\u2029")
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class TextKind(enum.Enum):
    IDENTIFIER = "identifier"
    LINE = "line"
    TEXT = "text"


class InvalidText(DomainError):
    code = "invalid"


def _describe(ch: str) -> str:
    return f"U+{ord(ch):04X}"


def text_problem(value: str, kind: TextKind) -> str | None:
    """Why value cannot be a field of this kind (a sentence without the field's name), or None."""
    for position, ch in enumerate(value):
        code = ord(ch)
        if code == 0:
            return f"contains a NUL character (U+0000) at position {position}, which cannot be stored; remove it."
        if 0xD800 <= code <= 0xDFFF:
            return (
                f"contains a lone surrogate ({_describe(ch)}) at position {position}, which is not valid Unicode; "
                "send the text as UTF-8 (a surrogate escape must be one half of a pair)."
            )
        if unicodedata.category(ch) == "Cc":
            if kind is TextKind.TEXT and ch in TEXT_WHITESPACE:
                continue
            if kind is TextKind.TEXT:
                return (
                    f"contains a control character ({_describe(ch)}) at position {position}; text may hold tab, "
                    "line feed and carriage return, but no other control characters. Remove it."
                )
            return (
                f"contains a control character ({_describe(ch)}) at position {position}; it must be one line of "
                "printable text, without line breaks or control characters."
            )
        if ch in LINE_SEPARATORS and kind is not TextKind.TEXT:
            return (
                f"contains a line or paragraph separator ({_describe(ch)}) at position {position}; it must be "
                "one line of text."
            )
        if ch in BIDI_CONTROLS and kind is TextKind.IDENTIFIER:
            return (
                f"contains a bidirectional control character ({_describe(ch)}) at position {position}; ids may not "
                "hold them (they can make one id look like another). Remove it."
            )
    return None


def check_text(value: str, *, field: str, kind: TextKind, error: type[DomainError] = InvalidText) -> str:
    """value, if it may be a field of this kind; otherwise error (400 `invalid`) naming the field."""
    problem = text_problem(value, kind)
    if problem is not None:
        raise error(f"{field} {problem}", field=field)
    return value


def ascii_number(raw: str, *, maximum: int) -> int | None:
    """raw as a whole number from 0 to maximum written in ASCII digits, or None.

    int() alone would take "²" or "٣" (any Unicode digit), a sign and spaces, and raises past
    4,300 digits; the length is checked before any conversion.
    """
    if not (raw.isascii() and raw.isdigit()) or len(raw) > len(str(maximum)):
        return None
    number = int(raw)
    return number if number <= maximum else None


def parse_id(raw: str, *, field: str, noun: str = "an id") -> int:
    """A row id (or another count from 1) given as text: ASCII digits, at least 1, within 64 bits,
    the range of Postgres' bigint, so no id the database could not compare reaches it."""
    number = ascii_number(raw, maximum=INT64_MAX)
    if number is None or number < 1:
        shown = raw if len(raw) <= 40 else raw[:40] + "…"
        raise InvalidText(
            f"{field} must be {noun}: a whole number from 1 to {INT64_MAX} in ASCII digits (got {shown!r}).",
            field=field,
        )
    return number


def query_id(params: Mapping[str, str], name: str, *, noun: str = "an id") -> int | None:
    """The id a query parameter gives (parse_id's rule), or None when it is absent or empty.

    The one reading of a number from a query string, for the API (InvalidText answers 400 with
    the error shape) and the lens (memory.views.requested_id turns it into a 400 page).
    """
    raw = params.get(name)
    return parse_id(raw, field=name, noun=noun) if raw else None


AS_OF_FORMAT = "ISO 8601 with a timezone (e.g. 2026-11-30T18:00:00Z) or a date (e.g. 2026-11-30)"
_AS_OF_MAX_CHARS = 64  # the longest ISO 8601 moment is about 40 characters


def parse_as_of(raw: str, *, field: str = "as_of", now: datetime | None = None) -> datetime:
    """The moment an `as_of` asks about, as an aware datetime: the one reading of it, for the API,
    the tools and the lens.

    A date means the end of that day in UTC (today: now), so a day's changes count as that day's.
    A datetime without a timezone is read as UTC. A moment in the future, or text that is neither,
    is refused (400 `invalid`) with a message that gives the format."""
    now = now or timezone.now()
    text = raw.strip()
    shown = text if len(text) <= 40 else text[:40] + "…"
    moment: datetime | None = None
    if len(text) <= _AS_OF_MAX_CHARS and text.isascii():
        try:
            if "T" not in text.upper() and ":" not in text:  # a date (2026-11-30, 20261130): the whole day
                day = date.fromisoformat(text)
                end = datetime.combine(day, time.max, tzinfo=UTC)
                moment = min(end, now) if day <= now.astimezone(UTC).date() else end
            else:
                moment = datetime.fromisoformat(text)
                moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
        except (ValueError, OverflowError):
            moment = None
    if moment is None:
        raise InvalidText(f"{field} must be {AS_OF_FORMAT}; got {shown!r}.", field=field)
    if moment > now:
        raise InvalidText(
            f"{field} is in the future ({shown}); ask about a moment up to now, in {AS_OF_FORMAT}.", field=field
        )
    return moment


def query_as_of(params: Mapping[str, str], name: str = "as_of") -> datetime | None:
    """The moment a query parameter asks about (parse_as_of), or None when it is absent or empty."""
    raw = params.get(name)
    return parse_as_of(raw, field=name) if raw else None


# --- the same rule for pydantic models, DRF serializers and Django forms ------------------------


def _pydantic_check(kind: TextKind) -> Any:
    def check(value: str) -> str:
        problem = text_problem(value, kind)
        if problem is not None:
            raise ValueError(problem)  # memory.api.parse_args reports it without pydantic's prefix
        return value

    return check


Identifier = Annotated[str, AfterValidator(_pydantic_check(TextKind.IDENTIFIER))]
Line = Annotated[str, AfterValidator(_pydantic_check(TextKind.LINE))]
Text = Annotated[str, AfterValidator(_pydantic_check(TextKind.TEXT))]


def _pydantic_as_of(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"must be a string: {AS_OF_FORMAT}.")
    try:
        return parse_as_of(value)
    except InvalidText as exc:
        raise ValueError(exc.message.removeprefix("as_of ")) from None


# A tool's as_of: parsed by parse_as_of, shown in the schema as the text it accepts.
AsOf = Annotated[
    datetime,
    PlainValidator(_pydantic_as_of),
    WithJsonSchema({"type": "string", "description": f"A past moment: {AS_OF_FORMAT}."}),
]


class TextValidator:
    """A Django/DRF field validator: `serializers.CharField(validators=[TextValidator(TextKind.IDENTIFIER)])`."""

    def __init__(self, kind: TextKind) -> None:
        self.kind = kind

    def __call__(self, value: Any) -> None:
        if isinstance(value, str) and (problem := text_problem(value, self.kind)) is not None:
            raise DjangoValidationError(problem, code="invalid")

    def __eq__(self, other: object) -> bool:  # Django's migration autodetector compares validators
        return isinstance(other, TextValidator) and other.kind == self.kind

    def __hash__(self) -> int:
        return hash(self.kind)


# --- whole documents ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    field: str
    message: str
    value: Any = None  # what was refused there


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def find_unstorable(value: Any, path: str = "", depth: int = 0) -> Problem | None:
    """The first place in a parsed JSON document that no field of Mnemo could take, or None.

    Every string and every object key is held to the TEXT rule (the loosest); numbers must be
    finite and fit in 64 bits; nesting stops at MAX_JSON_DEPTH. Stricter rules per field
    (identifiers, one-line text) are the fields' own.
    """
    if depth > MAX_JSON_DEPTH:
        return Problem(
            path or "body", f"is nested more than {MAX_JSON_DEPTH} levels deep; send a flatter document.", "(nested)"
        )
    if isinstance(value, str):
        problem = text_problem(value, TextKind.TEXT)
        return Problem(path or "body", problem, value) if problem else None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        if abs(value) > INT64_MAX:
            return Problem(path or "body", "is a number out of range; numbers must fit in 64 bits.", value)
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return Problem(
                path or "body", "is a number out of range; numbers must be finite and fit in 64 bits.", value
            )
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            key_text = str(key)
            problem = text_problem(key_text, TextKind.TEXT)
            if problem is not None:
                return Problem(_join(path, escape_unstorable(key_text)), f"(a member name) {problem}", key_text)
            found = find_unstorable(item, _join(path, key_text), depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = find_unstorable(item, f"{path}[{index}]" if path else f"[{index}]", depth + 1)
            if found is not None:
                return found
        return None
    return None


def escape_unstorable(text: str) -> str:
    """text with every character the TEXT rule refuses written as a visible escape (\\u0000)."""
    if text_problem(text, TextKind.TEXT) is None:
        return text
    return "".join(
        f"\\u{ord(ch):04x}"
        if ord(ch) == 0
        or 0xD800 <= ord(ch) <= 0xDFFF
        or (unicodedata.category(ch) == "Cc" and ch not in TEXT_WHITESPACE)
        else ch
        for ch in text
    )


def storable_json(value: Any, *, max_chars: int, depth: int = 0) -> Any:
    """A copy of value the revision log can always store: refused characters escaped, strings
    clipped at max_chars (and marked), depth and size bounded, non-JSON values as text."""
    if depth > 8:
        return "(nested too deeply to log)"
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) <= INT64_MAX else f"{str(value)[:40]}… (a number out of range)"
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        escaped = escape_unstorable(value)
        return escaped if len(escaped) <= max_chars else escaped[:max_chars] + f"… (clipped; {len(value)} characters)"
    if isinstance(value, dict):
        items = list(value.items())[:50]
        return {
            escape_unstorable(str(key))[:200]: storable_json(item, max_chars=max_chars, depth=depth + 1)
            for key, item in items
        }
    if isinstance(value, list | tuple):
        return [storable_json(item, max_chars=max_chars, depth=depth + 1) for item in value[:50]]
    return escape_unstorable(str(value))[:max_chars]
