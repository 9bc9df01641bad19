"""Text helpers shared by the write path and the readers: key slugs, caps, tokens for BM25."""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Callable
from functools import cache, lru_cache
from pathlib import Path

import snowballstemmer

from memory.language import CONFIGS, ENGLISH

_NON_SLUG = re.compile(r"[^a-z0-9]+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
LINK = re.compile(r"\[\[([^\[\]]{1,100})\]\]")

# Postgres' `english` text search configuration drops these words (its tsearch_data/english.stop,
# the Snowball list), so the conversation search, which runs in Postgres, never matches them.
# tests/memory/test_stop_words.py checks this copy against the Postgres the service runs with.
POSTGRES_ENGLISH_STOP_WORDS = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers
    herself it its itself they them their theirs themselves what which who whom this that these those am is
    are was were be been being have has had having do does did doing a an the and but if or because as until
    while of at by for with about against between into through during before after above below to from up
    down in out on off over under again further then once here there when where why how all any both each few
    more most other some such no nor not only own same so than too very s t can will just don should now
    """.split()  # noqa: SIM905 (words as Postgres ships them: a list literal formats to 127 lines)
)

# Our stop words (tokens for BM25 over notes, the words a query searches messages with, "fewer
# than two real words" for passages) start from that list and differ in two ways, both pinned by
# tests/memory/test_stop_words.py:
# - words of chat that tell nothing about a person (greetings, thanks, fillers, "could"): Postgres
#   indexes them, we do not, so "ok thanks, hello" is not worth searching and never ranks a note;
CHAT_STOP_WORDS = frozenset(
    "also could get got hello hey hi im let lets ok okay please thank thanks us would yeah yes youre".split()  # noqa: SIM905
)
# - what a contraction or a possessive leaves once split at the apostrophe ("don't" is don and t,
#   "Ada's" is ada and s), which Postgres drops and we keep as words: the note ranking and the
#   passages gate have always counted them (dropping them would move rankings: a change to make
#   on its own, with the benchmarks).
KEPT_FRAGMENTS = frozenset({"don", "s", "t"})
STOP_WORDS = (POSTGRES_ENGLISH_STOP_WORDS - KEPT_FRAGMENTS) | CHAT_STOP_WORDS


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
    stemmed: str = _stemmer().stemWord(word)
    return stemmed


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def tokens(text: str, language: str = ENGLISH) -> list[str]:
    """Lowercased, stop words removed, stemmed: what BM25 indexes and queries with.

    `language` is a text-search configuration (memory.language): 'english' as always; another
    language Postgres stems with its Snowball stemmer and Postgres' stop words for it; 'simple' as
    lowercased words only. Like Postgres' `russian` and `hindi` configurations, those two read a
    word of ASCII letters as English ("databases" in a Russian note is stemmed as English).
    """
    if language == ENGLISH:
        return [stem(w) for w in words(text) if w not in STOP_WORDS]
    return [t for w in words(text) if (t := _analyser(language)(w))]


def token_spans(text: str, language: str = ENGLISH) -> list[tuple[int, int, str]]:
    """tokens(text, language), each with where its word starts and ends in the text."""
    if language == ENGLISH:
        return [
            (m.start(), m.end(), stem(w)) for m in _WORD.finditer(text) if (w := m.group().lower()) not in STOP_WORDS
        ]
    analyse = _analyser(language)
    return [(m.start(), m.end(), t) for m in _WORD.finditer(text) if (t := analyse(m.group().lower()))]


# Stop-word lists Postgres ships besides English (memory/assets/stopwords, its tsearch_data copies).
_STOP_WORD_DIR = Path(__file__).resolve().parent / "assets" / "stopwords"
# The configurations whose words of ASCII letters Postgres reads as English (its snowball_create.pl).
_ASCII_AS_ENGLISH = frozenset({"russian", "hindi"})


@cache
def stop_words(language: str) -> frozenset[str]:
    """The words a configuration drops: ours for English (STOP_WORDS), Postgres' list for a
    language it has one for, none for the others and for 'simple'."""
    if language == ENGLISH:
        return STOP_WORDS
    path = _STOP_WORD_DIR / f"{language}.stop"
    return frozenset(path.read_text(encoding="utf-8").split()) if path.exists() else frozenset()


@cache
def _analyser(language: str) -> Callable[[str], str]:
    """word (lowercased) -> its token in this configuration, "" for a stop word."""
    if language not in CONFIGS.values():  # 'simple', or anything unknown: words as they are
        return lambda word: word
    stemmer = snowballstemmer.stemmer(language)
    dropped = stop_words(language)
    ascii_as_english = language in _ASCII_AS_ENGLISH

    @lru_cache(maxsize=100_000)
    def analyse(word: str) -> str:
        if ascii_as_english and word.isascii():
            return "" if word in STOP_WORDS else stem(word)
        if word in dropped:
            return ""
        stemmed: str = stemmer.stemWord(word)
        return stemmed

    return analyse


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
