"""memory.text's rules as pure functions: no database, no Django (`make mutate` runs these against its mutants)."""

from __future__ import annotations

import pytest

from memory.text import (
    CHAT_STOP_WORDS,
    KEPT_FRAGMENTS,
    LINK,
    POSTGRES_ENGLISH_STOP_WORDS,
    STOP_WORDS,
    links,
    normalize_key,
    real_word_count,
    snippet,
    stem,
    stop_words,
    tokens,
    word_diff,
    words,
)
from tests.support.postgres_share import POSTGRES_SHARE

# --- stop words -------------------------------------------------------------------------------


def test_the_postgres_copy_is_the_file_postgres_ships():
    shipped = POSTGRES_SHARE / "tsearch_data/english.stop"
    assert set(shipped.read_text().split()) == POSTGRES_ENGLISH_STOP_WORDS


def test_our_stop_words_are_postgres_minus_the_fragments_plus_chat():
    assert {"don", "s", "t"} == KEPT_FRAGMENTS
    chat = "also could get got hello hey hi im let lets ok okay please thank thanks us would yeah yes youre"
    assert set(chat.split(" ")) == CHAT_STOP_WORDS
    assert STOP_WORDS == (POSTGRES_ENGLISH_STOP_WORDS - KEPT_FRAGMENTS) | CHAT_STOP_WORDS
    assert "the" in STOP_WORDS
    assert "hello" in STOP_WORDS
    assert not {"don", "s", "t"} & STOP_WORDS


# --- keys -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("Prefers Norwegian", "prefers-norwegian"),
        ("prefers_norwegian", "prefers-norwegian"),
        ("  --Café  au   lait!!-- ", "cafe-au-lait"),
        ("ÅSE", "ase"),
        ("Room 101", "room-101"),
        ("日本", ""),
        ("", ""),
    ],
)
def test_normalize_key_slugs_to_lowercase_ascii_words_joined_by_single_dashes(raw: str, key: str):
    assert normalize_key(raw) == key


# --- words and tokens -------------------------------------------------------------------------


def test_words_are_lowercased_runs_of_letters_and_digits_without_underscores():
    assert words("Ada's cat_dog, 42 Øre!") == ["ada", "s", "cat", "dog", "42", "øre"]
    assert words("") == []


def test_stem_is_english_snowball():
    assert stem("running") == "run"
    assert stem("ponies") == "poni"


def test_tokens_drop_stop_words_and_stem_the_rest():
    assert tokens("Hello, the runners are running to Oslo") == ["runner", "run", "oslo"]
    assert tokens("Ada's") == ["ada", "s"]  # a kept fragment is a token


def test_tokens_in_another_language_use_its_stemmer_and_its_stop_words():
    assert tokens("Я взяла собаку и собаке", "russian") == ["взял", "собак", "собак"]  # я, и: stop words
    assert tokens("die Wohnungen und die Wohnung", "german") == ["wohnung", "wohnung"]
    assert tokens("Sus hermanas viven en Sevilla", "spanish") == ["herman", "viv", "sevill"]


def test_russian_reads_a_word_of_ascii_letters_as_english_and_german_does_not():
    assert tokens("the databases", "russian") == ["databas"]  # the: an English stop word
    assert tokens("the databases", "german") == ["the", "databas"]


def test_simple_keeps_every_word_as_written_lowercased():
    assert tokens("Die Wohnungen und I", "simple") == ["die", "wohnungen", "und", "i"]
    assert tokens("Die Wohnungen", "no-such-configuration") == ["die", "wohnungen"]


def test_the_stop_words_of_a_language_are_its_own():
    assert stop_words("english") == STOP_WORDS
    assert {"und", "die"} <= stop_words("german")
    assert "und" not in stop_words("russian")
    assert stop_words("greek") == frozenset()  # Postgres ships no list: the stemmer alone
    assert stop_words("simple") == frozenset()


def test_real_word_count_counts_words_that_are_not_stop_words():
    assert real_word_count("ok thanks, hello") == 0
    assert real_word_count("the cat sat on the mat") == 3
    assert real_word_count("") == 0


# --- links ------------------------------------------------------------------------------------


def test_links_are_normalised_keys_in_order_of_first_mention_without_repeats():
    content = "See [[Favourite Food]] and [[oslo]], then [[favourite_food]] again and [[ !! ]]."
    assert links(content) == ["favourite-food", "oslo"]


def test_a_link_holds_one_to_a_hundred_characters_and_no_brackets():
    assert links("[[" + "a" * 100 + "]]") == ["a" * 100]
    assert links("[[" + "a" * 101 + "]]") == []
    assert links("[[]]") == []
    assert links("[[a[b]]") == []
    assert LINK.findall("x [[one]] y") == ["one"]


# --- snippets ---------------------------------------------------------------------------------


def test_a_short_text_is_its_own_snippet():
    text = "x" * 160
    assert snippet(text, {"x"}) == text
    assert snippet("x" * 161, {"x"}) == "x" * 160 + "…"  # the default size is 160
    assert snippet("abc", set(), size=3) == "abc"


def test_a_snippet_starts_a_third_of_its_size_before_the_match_with_ellipses_where_cut():
    text = "a" * 100 + "needle" + "b" * 100
    # the match at 100; the window starts size // 3 = 10 before it and is 30 long
    assert snippet(text, {"needle"}, size=30) == "…" + "a" * 10 + "needle" + "b" * 14 + "…"


def test_a_snippet_at_the_start_has_no_leading_ellipsis():
    text = "needle" + "b" * 100
    assert snippet(text, {"needle"}, size=20) == "needle" + "b" * 14 + "…"


def test_a_snippet_near_the_end_is_the_last_stretch_with_no_trailing_ellipsis():
    text = "a" * 100 + "needle"
    assert snippet(text, {"needle"}, size=20) == "…" + "a" * 14 + "needle"


def test_a_snippet_without_a_match_is_the_start():
    text = "a" * 50
    assert snippet(text, {"zzz"}, size=10) == "a" * 10 + "…"


def test_a_snippet_without_a_match_starts_at_the_very_start_even_when_tiny():
    assert snippet("abcdef", {"zzz"}, size=2) == "ab…"


def test_a_snippet_is_around_the_first_occurrence_of_the_longest_matched_word():
    text = "a" * 30 + "zebra" + "b" * 30 + "antelope" + "c" * 30 + "antelope" + "d" * 30
    # by length "antelope" comes first (alphabetically "zebra" would); its first occurrence wins
    assert snippet(text, {"zebra", "antelope"}, size=12) == "…" + "bbbb" + "antelope" + "…"


def test_a_match_at_position_zero_counts_as_found():
    text = "needle" + "b" * 100 + "cat" + "c" * 100
    assert snippet(text, {"needle", "cat"}, size=10) == "needlebbbb…"


def test_a_snippet_finds_the_longest_matched_word_first_case_insensitively():
    text = "x" * 40 + "cat" + "y" * 40 + "CATALOG" + "z" * 40
    # "catalog" is tried before "cat"; the match is found in the lowercased text
    assert snippet(text, {"cat", "catalog"}, size=9) == "…" + "yyy" + "CATALO" + "…"


# --- word diffs -------------------------------------------------------------------------------


def test_word_diff_of_one_corrected_word_strikes_it_and_inserts_the_new_one():
    assert word_diff("likes tea a lot", "likes coffee a lot") == [
        ("equal", "likes "),
        ("delete", "tea"),
        ("insert", "coffee"),
        ("equal", " a lot"),
    ]


def test_word_diff_keeps_line_breaks_and_reports_pure_inserts_and_deletes():
    assert word_diff("a\nb", "a\nb c") == [("equal", "a\nb"), ("insert", " c")]
    assert word_diff("a b c", "a c") == [("equal", "a "), ("delete", "b "), ("equal", "c")]
    assert word_diff("", "") == []


def test_word_diff_does_not_treat_frequent_words_as_junk():
    # autojunk would ignore words repeated in over 1% of a 200+ unit text: one inserted word would
    # show as half the text replaced
    before = " ".join(["the"] * 150)
    after = " ".join(["the"] * 75 + ["big"] + ["the"] * 75)
    runs = word_diff(before, after)
    assert [(op, text) for op, text in runs if op != "equal"] == [("insert", "big ")]
    assert [op for op, _ in runs] == ["equal", "insert", "equal"]
    assert "".join(text for _, text in runs) == after
