"""Which Postgres text-search configuration a text's words are stemmed and stop-worded with.

The keyword half of search (conversation search here; note recall can use the same) used to read
every text as English: an English stop-word list and stemmer mangle Russian or German words, or
miss them. Each text is now read in its own language when Postgres has a configuration for it
and the language is clear; otherwise as 'simple' (lower-cased words, no stemming, no stop words),
which finds exact words in any language rather than mangling them.

The language is identified with py3langid (a naive Bayes model over byte n-grams, shipped inside
the package), restricted to the languages Postgres can stem. A short or unclear text whose best
guess is English stays English (most short chat is, and its words then match English stems); any
other unclear text is 'simple'.
"""

from __future__ import annotations

import unicodedata
from functools import cache, lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from py3langid.langid import LanguageIdentifier

# ISO 639-1 code -> the Postgres text-search configuration of that language (Postgres 16's
# snowball configurations but Yiddish, which the identifier does not know; Postgres 18 adds Estonian,
# not mapped yet; tests/memory/test_language.py checks they all exist).
CONFIGS = {
    "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "da": "danish", "nl": "dutch",
    "en": "english", "fi": "finnish", "fr": "french", "de": "german", "el": "greek", "hi": "hindi",
    "hu": "hungarian", "id": "indonesian", "ga": "irish", "it": "italian", "lt": "lithuanian",
    "ne": "nepali", "no": "norwegian", "pt": "portuguese", "ro": "romanian", "ru": "russian",
    "sr": "serbian", "es": "spanish", "sv": "swedish", "ta": "tamil", "tr": "turkish",
}  # fmt: skip
NEUTRAL = "simple"
ENGLISH = "english"
# A guess at least this probable (among the languages above) is taken; below it, see the module doc.
CONFIDENT = 0.6
NOTE_SAMPLE = 1000


@cache
def _identifier(*, stemmable_only: bool) -> LanguageIdentifier:
    # Imported here: loading the model takes about a second, and only identifying needs it.
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    if stemmable_only:
        identifier.set_languages(list(CONFIGS))
    return identifier


def preload() -> None:
    """Load the identifier now rather than on the first text a process reads (a second or more, which
    a web process's first turn would otherwise wait for)."""
    _identifier(stemmable_only=False)
    _identifier(stemmable_only=True)


# The configurations of the latest short texts read (a turn's message is read when it is recorded,
# and again when the turn searches by it): identifying one costs 0.3 to 1 ms.
_REMEMBERED = 512
_REMEMBERED_UP_TO = 1_000  # characters


def text_search_config(text: str) -> str:
    """The configuration to read this text's words with: its language's, 'english', or 'simple'.

    A text clearly in a language (among the 97 the identifier knows) is read in that language's
    configuration, or as 'simple' when Postgres has none (Welsh, Japanese, ...). An unclear one is
    weighed among the languages Postgres can stem: most like English, it is read as English, and
    as 'simple' otherwise.
    """
    return _remembered_config(text) if len(text) <= _REMEMBERED_UP_TO else _identify_config(text)


@lru_cache(maxsize=_REMEMBERED)
def _remembered_config(text: str) -> str:
    return _identify_config(text)


def _identify_config(text: str) -> str:
    if not any(ch.isalpha() for ch in text):
        return ENGLISH  # numbers and symbols only: every configuration reads them alike
    language, probability = _identifier(stemmable_only=False).classify(text)
    if probability >= CONFIDENT:
        return CONFIGS.get(language, NEUTRAL)
    language, probability = _identifier(stemmable_only=True).classify(text)
    if probability >= CONFIDENT:
        return CONFIGS[language]
    return ENGLISH if language == "en" else NEUTRAL


def note_config(text: str) -> str:
    """The configuration a note's words are read with (its description and content, not its key).

    As text_search_config, with two differences for notes, which are short and mostly English and
    whose every word is matched against a query read the same way (memory.recall), so that reading
    a word in a wrong language costs a missed inflection, never a missed word:

    - a text the identifier places, confidently, in a language Postgres cannot stem that is close
      to English (short English notes come out as Nigerian Pidgin or Frisian) is read as English
      when, among the languages Postgres can stem, it is clearly English;
    - an unclear text written in Latin letters is read as English ("Rosa supports Partizan." is
      unclear; 'simple' would lose "support"), one in another script as 'simple'.

    Only the first NOTE_SAMPLE characters are read: a longer text's language is clear by then, and
    reading all 2,000 characters of a full note costs its write 1 to 3 ms more than reading 1,000.
    """
    text = text[:NOTE_SAMPLE]
    if not any(ch.isalpha() for ch in text):
        return ENGLISH
    language, probability = _identifier(stemmable_only=False).classify(text)
    if probability >= CONFIDENT and language in CONFIGS:
        return CONFIGS[language]
    stemmable, stemmable_probability = _identifier(stemmable_only=True).classify(text)
    if probability >= CONFIDENT:
        return ENGLISH if stemmable == "en" and stemmable_probability >= CONFIDENT else NEUTRAL
    if stemmable_probability >= CONFIDENT:
        return CONFIGS[stemmable]
    return ENGLISH if stemmable == "en" or _latin(text) else NEUTRAL


def _latin(text: str) -> bool:
    """Whether every letter of the text is a Latin one (accented or not)."""
    return all(ch.isascii() or unicodedata.name(ch, "").startswith("LATIN") for ch in text if ch.isalpha())
