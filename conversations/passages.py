"""The windows a long message is embedded as, so the meaning half reads all of it.

A small embedding model reads the first few hundred tokens of a text and nothing after: the vector
of a 3,000-character message says what its head says. A message longer than PASSAGE_FROM is also
embedded as overlapping, sentence-aligned windows of at most PASSAGE_CHARS characters (the
sentences conversations.windows finds, as the shown windows are cut), each a MessagePassage; the
meaning half scores a message by its closest window or its head. Pure functions: no database.
"""

from __future__ import annotations

from bisect import bisect_left

from conversations.windows import _sentences, _starts, _window_end

PASSAGE_FROM = 600  # characters: a shorter message fits the model whole
PASSAGE_CHARS = 400  # at most, per window: about a hundred tokens, well within what the model reads
# Each window starts at the first sentence (or word, in a long sentence) past this share of the
# previous one: a sentence cut by one window's end is whole in the next.
STEP_SHARE = 0.5


def passage_windows(content: str) -> list[tuple[int, int]]:
    """The (start, end) windows a message is embedded as: none for a message of at most
    PASSAGE_FROM characters, else windows of at most PASSAGE_CHARS from its start to its end,
    each starting at a sentence (or a word, within a long sentence) inside the one before."""
    if len(content) <= PASSAGE_FROM:
        return []
    sentence_starts, ends = _sentences(content)
    starts = _starts(content, PASSAGE_CHARS, sentence_starts, ends)
    windows: list[tuple[int, int]] = []
    start = 0
    while True:
        end = _window_end(content, start, PASSAGE_CHARS, ends)
        if content[start:end].strip():
            windows.append((start, end))
        if end >= len(content):
            return windows
        at = bisect_left(starts, start + max(1, int((end - start) * STEP_SHARE)))
        start = starts[at] if at < len(starts) and starts[at] < end else _next_start(content, end)


def _next_start(content: str, end: int) -> int:
    """Where the text goes on after `end` (past the whitespace there)."""
    return len(content) - len(content[end:].lstrip())
