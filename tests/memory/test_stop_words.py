"""One stop-word source: memory.text's list is Postgres' `english` list (the conversation search
runs in Postgres with it), with the two differences memory/text.py explains, pinned here."""

from __future__ import annotations

import pytest
from django.db import connection

from conversations.queries import meaningful_terms, worth_searching
from memory.text import (
    CHAT_STOP_WORDS,
    KEPT_FRAGMENTS,
    POSTGRES_ENGLISH_STOP_WORDS,
    STOP_WORDS,
    real_word_count,
    tokens,
)
from tests.support.postgres_share import POSTGRES_SHARE


def postgres_drops(words: set[str] | frozenset[str]) -> set[str]:
    """Those of `words` that Postgres' english configuration indexes as nothing."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT w FROM unnest(%s::text[]) AS w WHERE to_tsvector('english', w) = ''::tsvector", [sorted(words)]
        )
        return {word for (word,) in cursor}


def test_the_copy_is_the_list_postgres_ships():
    shipped = POSTGRES_SHARE / "tsearch_data/english.stop"
    assert set(shipped.read_text().split()) == POSTGRES_ENGLISH_STOP_WORDS


@pytest.mark.django_db
def test_the_database_drops_every_word_of_the_copy():
    assert postgres_drops(POSTGRES_ENGLISH_STOP_WORDS) == POSTGRES_ENGLISH_STOP_WORDS


@pytest.mark.django_db
def test_chat_words_are_ours_alone_so_a_turn_of_chat_is_not_searched():
    assert STOP_WORDS == (POSTGRES_ENGLISH_STOP_WORDS - KEPT_FRAGMENTS) | CHAT_STOP_WORDS
    assert postgres_drops(CHAT_STOP_WORDS) == set()  # Postgres alone would search them
    assert not worth_searching("Ok thanks, hello!")
    assert meaningful_terms("Hey, thanks, could you get it?") == []
    assert tokens("Yes please, hi") == []


@pytest.mark.django_db
def test_contraction_fragments_are_words_to_us_and_stop_words_to_postgres():
    assert postgres_drops(KEPT_FRAGMENTS) == KEPT_FRAGMENTS
    assert real_word_count("I don't") == 2  # don, t: worth searching, as it always was
    assert worth_searching("I don't")
    assert meaningful_terms("I don't") == ["don", "t"]  # which Postgres then drops from the query
    assert tokens("Ada's cat") == ["ada", "s", "cat"]
