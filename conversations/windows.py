"""The part of a long message that matters to a query: sentence-aligned windows.

A long message (an assistant's recipe, a pasted itinerary) holds the answer somewhere in its
thousands of characters; shown from its start and cut at a budget, it carries its head and not the
evidence. The composer's passages and search_conversation's snippets show instead the window of
the message whose words match the query best: whole sentences where they fit, at most `size`
characters, with where it sits in the message. Pure functions: no database, no Django.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from memory.text import token_spans

ELLIPSIS = "…"
MIN_WINDOW_CHARS = 120  # shorter, a window rarely holds a whole sentence
# A sentence ends at . ! ? … (closing quotes and brackets kept with it) before whitespace, or at a
# line break; list items and headings in an assistant's message are lines of their own.
_SENTENCE_END = re.compile(r"""(?<=[.!?…])["'\u201d\u2019)\]]*\s+|\s*\n\s*""")


@dataclass(frozen=True)
class Window:
    """Characters [start, end) of a message `length` long."""

    start: int
    end: int
    length: int

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.end == self.length

    def text(self, content: str) -> str:
        """The window's text, an ellipsis on each side where the message goes on."""
        if self.whole:
            return content
        body = content[self.start : self.end].strip()
        return (ELLIPSIS if self.start > 0 else "") + body + (ELLIPSIS if self.end < self.length else "")

    def position(self) -> str:
        """Where it sits, as a reader is told: "chars 2400-2760 of 3100"."""
        return f"chars {self.start}-{self.end} of {self.length}"


def _sentences(text: str) -> tuple[list[int], list[int]]:
    """Where sentences start, and where they end (before the whitespace after them)."""
    starts, ends = [0], []
    for match in _SENTENCE_END.finditer(text):
        if match.end() >= len(text):
            break
        ends.append(match.start())
        starts.append(match.end())
    ends.append(len(text))
    return starts, ends


def _window_end(text: str, start: int, size: int, ends: list[int]) -> int:
    """The farthest sentence end within `size` of `start`; inside a sentence too long for that, the
    last space before the limit (or the limit itself in a text without one)."""
    limit = min(len(text), start + size)
    fitting = bisect_right(ends, limit) - 1
    if fitting >= 0 and ends[fitting] > start:
        return ends[fitting]
    if limit == len(text):
        return limit
    space = text.rfind(" ", start + 1, limit)
    return space if space > start + size // 2 else limit


def _starts(text: str, size: int, sentence_starts: list[int], ends: list[int]) -> list[int]:
    """Where a window may start: every sentence (as _sentences found them), and within a sentence
    longer than half a window, every half window at a word."""
    found: set[int] = set()
    for begin, end in zip(sentence_starts, ends, strict=True):
        found.add(begin)
        step = max(1, size // 2)
        at = begin + step
        while at < end:
            space = text.find(" ", at, end)
            if space < 0:
                break
            found.add(space + 1)
            at = space + 1 + step
    return sorted(found)


def best_window(content: str, query: str, *, size: int, language: str) -> Window:
    """The window of at most `size` characters whose words match the query's best, both read in the
    message's language: each query token it holds counts once, a token the message says less often
    counts more (1 / sqrt of its count). Of the windows that score best, the middle one; with no
    word matched, the message's start. A message that fits is its own window."""
    length = len(content)
    if length <= size:
        return Window(0, length, length)
    wanted = {token for _, _, token in token_spans(query, language)}
    at: dict[str, list[int]] = {}
    for begin, _end, token in token_spans(content, language):
        if token in wanted:
            at.setdefault(token, []).append(begin)
    sentence_starts, ends = _sentences(content)
    if not at:
        return Window(0, _window_end(content, 0, size, ends), length)
    weights = {token: 1 / math.sqrt(len(places)) for token, places in at.items()}
    scored = []
    for start in _starts(content, size, sentence_starts, ends):
        end = _window_end(content, start, size, ends)
        held = (
            weight for token, weight in weights.items() if bisect_left(at[token], end) > bisect_left(at[token], start)
        )
        scored.append((round(sum(held), 9), start, end))
    top = max(score for score, _, _ in scored)
    # Of the windows that score best (they overlap the same matches), the middle one: the matches
    # with as much around them on each side as the window allows.
    best = [(start, end) for score, start, end in scored if score == top]
    start, end = best[(len(best) - 1) // 2]
    return Window(start, end, length)
