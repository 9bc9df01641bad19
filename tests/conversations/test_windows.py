"""Sentence-aligned windows of a long message: the part that matches a query, and where it sits."""

from __future__ import annotations

import pytest

from conversations.windows import ELLIPSIS, Window, best_window

FILLER = "We talked about the weather and the traffic on the way home. " * 40  # 2,440 characters
FACT = "My sister's wedding is in Porto on the twelfth of June."


def test_a_message_that_fits_is_its_own_window():
    window = best_window("I adopted a greyhound.", "greyhound", size=100, language="english")
    assert window == Window(0, 22, 22)
    assert window.whole
    assert window.text("I adopted a greyhound.") == "I adopted a greyhound."


def test_the_window_holds_the_matching_sentence_whole_far_into_the_message():
    content = FILLER + FACT + " " + FILLER
    window = best_window(content, "Where is my sister's wedding?", size=300, language="english")
    assert window.start <= content.index(FACT)
    assert content.index(FACT) + len(FACT) <= window.end
    assert window.end - window.start <= 300
    assert window.start > 2_000  # found where it is, not at the head
    text = window.text(content)
    assert FACT in text
    assert text.startswith(ELLIPSIS)
    assert text.endswith(ELLIPSIS)
    assert window.position() == f"chars {window.start}-{window.end} of {len(content)}"


def test_windows_start_and_end_on_sentences():
    content = FILLER + FACT + " " + FILLER
    window = best_window(content, "sister wedding Porto", size=300, language="english")
    assert content[window.start - 2 : window.start] == ". "
    assert content[window.end - 1] == "."


def test_the_matches_sit_in_the_middle_of_the_window_when_it_has_room_around_them():
    content = FILLER + FACT + " " + FILLER
    window = best_window(content, "sister wedding Porto", size=400, language="english")
    before = content.index(FACT) - window.start
    after = window.end - (content.index(FACT) + len(FACT))
    assert before > 60
    assert after > 60


def test_a_rarer_word_of_the_message_outweighs_a_common_one():
    content = (
        ("The garden needs water. " * 30) + "The garden gnome came from Lisbon. " + ("The garden needs water. " * 30)
    )
    window = best_window(content, "garden gnome", size=120, language="english")
    assert "gnome" in window.text(content)


def test_with_no_word_matched_the_window_is_the_start():
    content = FILLER + FACT
    window = best_window(content, "zebra", size=300, language="english")
    assert window.start == 0
    assert window.end <= 300
    assert not window.text(content).startswith(ELLIPSIS)


def test_a_sentence_longer_than_the_window_is_cut_at_a_word():
    content = "word " * 200 + "the needle is here " + "word " * 200
    window = best_window(content, "needle", size=100, language="english")
    assert "needle" in window.text(content)
    assert window.end - window.start <= 100
    assert content[window.start - 1] == " "


@pytest.mark.parametrize("language", ["english", "simple", "german"])
def test_words_match_in_the_messages_language(language):
    content = "Bla bla bla. " * 50 + "Der Hund heißt Bello. " + "Bla bla bla. " * 50
    window = best_window(content, "Hund Bello", size=100, language=language)
    assert "Bello" in window.text(content)
