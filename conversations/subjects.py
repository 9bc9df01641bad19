"""Whose words a query asks about, read from its pronouns (no database read).

A search runs for the agent in its conversation with one person, so the query's pronouns have
fixed referents: "I", "me", "my" are the person ("What brand are my favourite running shoes?" is
answered by what the person said), and "you" with a verb of saying is the agent ("the hiking trail
you recommended", "you mentioned that 6S and MAJA..."). A bare "you" names no side: "Can you
suggest..." asks the agent to act, not what it said. When both are there, "you" with a verb of
saying wins ("I'm looking back at our conversation. You recommended five bottles..."). Names of
the participants (conversations.queries._named_speakers) decide before any pronoun does.
English only: a query in another language names no side here.
"""

from __future__ import annotations

import re

from conversations.models import Message

# A verb of saying or giving advice, in the past, within two words after "you" ("you told me",
# "you had recommended", "you once mentioned").
_SAYING = (
    "told|said|mentioned|recommended|suggested|gave|provided|listed|shared|explained|wrote|described|named|"
    "showed|sent|offered|proposed|advised|noted|pointed|brought|talked|compared|included|came up"
)
_AGENT_SAID = re.compile(rf"\byou(?:'d)?(?:\s+\w+){{0,2}}?\s+(?:{_SAYING})\b", re.IGNORECASE)
_FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself|i'm|i've|i'd|i'll)\b", re.IGNORECASE)


def pronoun_side(query: str) -> str | None:
    """The role whose messages `query` asks about by its pronouns, or None."""
    text = query.replace("\u2019", "'")
    if _AGENT_SAID.search(text):
        return Message.Role.ASSISTANT
    if _FIRST_PERSON.search(text):
        return Message.Role.USER
    return None
