"""The digest's rules as pure functions: its order, its lines, its rendering and its size bound.

No database and no Django: memory.queries chooses the notes and hands them here, and the tests in
tests/memory/test_digest_rules.py run these functions alone (mutation testing runs them in seconds).
The caps a line is bounded by are passed in by the caller (memory.models owns them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol

from memory.framing import DIGEST_HEADER, json_line

DIGEST_EMPTY = "Nothing is remembered yet."
DIGEST_MORE = "{count} more notes are remembered but not listed here."
FULL_NOTICE = (
    "The {kind} memory bank is full: new notes are refused until something is removed. If something "
    "new is worth keeping, offer the person to drop something old or outdated first."
)
LINE_OVERHEAD = len(json_line({"key": "", "description": ""}))
# The largest count DIGEST_MORE is ever sized for: more notes than any bank limit allows.
_MORE_COUNT_BOUND = 10**9
# Applicable banks a turn reads: private, shared and global.
_BANKS_READ = 3


class Entry(Protocol):
    """What the digest reads of a note (a Note, or any row carrying these fields)."""

    @property
    def key(self) -> str: ...
    @property
    def description(self) -> str: ...


class Ranked(Entry, Protocol):
    """What the digest's order reads of a note."""

    @property
    def scope_refs(self) -> dict[str, list[str]]: ...
    @property
    def semantics(self) -> list[str]: ...
    @property
    def updated_at(self) -> datetime: ...


def digest_line(note: Entry) -> str:
    return json_line({"key": note.key, "description": note.description})


def digest_sort_key(note: Ranked) -> tuple[int, int, int, float]:
    """Scope specificity (distinct ref types, more first), precision (fewer refs first),
    semantic richness (more tags first), then updated_at (newest first)."""
    specificity = len(note.scope_refs)
    precision = sum(len(ids) for ids in note.scope_refs.values())
    return (-specificity, precision, -len(note.semantics), -note.updated_at.timestamp())


def digest_max_chars(limit: int, *, key_max: int, description_max: int) -> int:
    """The digest's worst case, a constant of the configuration.

    Keys are slugs (nothing to escape) and descriptions refuse control characters, so JSON can at
    most double a description (a quote or backslash becomes two characters).
    """
    line = LINE_OVERHEAD + key_max + 2 * description_max + 1
    more = len(DIGEST_MORE.format(count=_MORE_COUNT_BOUND)) + 1
    notices = _BANKS_READ * (len(FULL_NOTICE.format(kind="private")) + 1)
    return len(DIGEST_HEADER) + 1 + limit * line + more + notices


def split_listed[T](ordered: Sequence[T], limit: int) -> tuple[list[T], int]:
    """The notes the digest lists (the first `limit` of them, in digest order) and how many it does not."""
    return list(ordered[:limit]), max(0, len(ordered) - limit)


def render_digest(entries: Iterable[Entry], *, omitted: int, full_kinds: Iterable[str]) -> str:
    """The ## Memory section: the header, one line per listed note (or a line saying there is
    nothing), how many notes are not listed, and a notice for each full bank."""
    lines = [DIGEST_HEADER]
    lines.extend(digest_line(note) for note in entries)
    if len(lines) == 1:
        lines.append(DIGEST_EMPTY)
    if omitted:
        lines.append(DIGEST_MORE.format(count=omitted))
    lines.extend(FULL_NOTICE.format(kind=kind) for kind in full_kinds)
    return "\n".join(lines)
