"""Whose words a query asks about, read from its pronouns."""

from __future__ import annotations

import pytest

from conversations.models import Message
from conversations.subjects import pronoun_side

USER, ASSISTANT = Message.Role.USER, Message.Role.ASSISTANT


@pytest.mark.parametrize(
    ("query", "side"),
    [
        ("What brand are my favourite running shoes?", USER),
        ("How many days did I spend in Japan?", USER),
        ("I\u2019m planning a trip, where did I stay last time?", USER),  # a curly apostrophe
        ("What was the hiking trail you recommended near Denver?", ASSISTANT),
        ("Remind me what you had suggested for the dinner party", ASSISTANT),
        ("You mentioned a book about habits; what was it?", ASSISTANT),
        # Both: "you" with a verb of saying is what is asked about.
        ("I'm looking back at our chat. You recommended five bottles, which was the third?", ASSISTANT),
        # A bare "you" asks the agent to act: it names no side, nor does a query without pronouns.
        ("Can you suggest a good restaurant?", None),
        ("Which restaurant was the best one?", None),
        ("Wie heißt mein Hund?", None),  # English only
    ],
)
def test_the_pronouns_name_the_side_asked_about(query, side):
    assert pronoun_side(query) == side


def test_a_pronoun_inside_a_word_is_not_one():
    assert pronoun_side("Which mimetic item was mentioned?") is None
    assert pronoun_side("Youth hostels near Lyon") is None
