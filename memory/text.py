"""Text helpers shared by the write path and the readers: key slugs, caps, tokens for BM25."""

from __future__ import annotations

import difflib
import re
import unicodedata
from functools import cache, lru_cache

import snowballstemmer

_NON_SLUG = re.compile(r"[^a-z0-9]+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
LINK = re.compile(r"\[\[([^\[\]]{1,100})\]\]")

# Words that carry no meaning for matching. "Fewer than two real words" (passages) counts
# the words left after removing these.
STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "i'm",
        "im",
        "it's",
        "its",
        "you're",
        "youre",
        "ok",
        "okay",
        "yes",
        "yeah",
        "thanks",
        "thank",
        "please",
        "hi",
        "hello",
        "hey",
        "also",
        "get",
        "got",
        "let",
        "lets",
        "us",
    ]
)


def normalize_key(raw: str) -> str:
    """'Prefers Norwegian' and 'prefers_norwegian' both become 'prefers-norwegian'."""
    ascii_text = unicodedata.normalize("NFKD", raw).encode("ascii", "ignore").decode()
    return _NON_SLUG.sub("-", ascii_text.lower()).strip("-")


@cache
def _stemmer() -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    # The stemmer is pure Python and recall re-tokenises every candidate note on each call:
    # caching per word makes that nearly free after the first pass.
    return _stemmer().stemWord(word)


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def tokens(text: str) -> list[str]:
    """Lowercased, stop words removed, stemmed: what BM25 indexes and queries with."""
    return [stem(w) for w in words(text) if w not in STOP_WORDS]


def real_word_count(text: str) -> int:
    return sum(1 for w in words(text) if w not in STOP_WORDS)


def links(content: str) -> list[str]:
    """The keys a note links to with [[key]], normalised, in order of first mention."""
    seen: dict[str, None] = {}
    for match in LINK.finditer(content):
        key = normalize_key(match.group(1))
        if key:
            seen.setdefault(key, None)
    return list(seen)


def snippet(text: str, matched: set[str], size: int = 160) -> str:
    """The stretch of text around the first matched word (the whole text when short)."""
    if len(text) <= size:
        return text
    lowered = text.lower()
    position = 0
    for word in sorted(matched, key=len, reverse=True):
        found = lowered.find(word)
        if found >= 0:
            position = found
            break
    start = max(0, position - size // 3)
    end = min(len(text), start + size)
    start = max(0, end - size)
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")


_DIFF_UNIT = re.compile(r"\s+|\S+")


def word_diff(before: str, after: str) -> list[tuple[str, str]]:
    """The change from before to after as runs of (op, text), op being equal, delete or insert.

    Words and the whitespace between them are the units, so line breaks survive in the runs and a
    one-word correction shows as one word struck and one inserted. Runs are plain text: whoever
    renders them escapes them.
    """
    old, new = _DIFF_UNIT.findall(before), _DIFF_UNIT.findall(after)
    runs: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op == "equal":
            runs.append(("equal", "".join(old[i1:i2])))
        if op in ("delete", "replace"):
            runs.append(("delete", "".join(old[i1:i2])))
        if op in ("insert", "replace"):
            runs.append(("insert", "".join(new[j1:j2])))
    return runs
