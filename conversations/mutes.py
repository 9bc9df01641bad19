"""What a mute withholds of an agent's conversations with a person.

A person's mute (memory.models.Mute) withholds from the agent the muted notes, the messages they
were learned from (their sources: NoteSource's messages, and the person's message of a turn a note
was written during) and the summary built from those messages. Every read for the agent (a turn,
search_conversation, recent_messages) resolves the muted messages once, in one statement, and
leaves them out; nothing is deleted or kept aside, so a mute and an unmute hold in every process
from the moment they commit, and unmuting gives everything back.

A conversation's summary is left out of the agent's turns while a mute withholds a message it was
built from (one at or before curated_through): it is not rebuilt per agent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accounts.models import Agent, Person
from config.prepared import statement_cursor
from conversations.models import Conversation, Message, NoteSource, Turn
from memory.models import Bank, Mute, Note

# The muted notes (muted one by one, or by category) of the person's banks, or of any bank when
# this person muted them: as Note.objects.unmuted_for decides for a read on their behalf. Then the
# messages of this agent's conversations with this person they were learned from. With no mute
# for the agent, the first step finds nothing and the rest is never read.
_MUTED_MESSAGES = """
WITH mutes AS (
    SELECT person_id, note_id, category FROM {mute} WHERE team_id = %(team)s AND agent_id = %(agent)s
),
muted AS (
    SELECT n.id FROM mutes m JOIN {note} n ON n.id = m.note_id JOIN {bank} b ON b.id = n.bank_id
    WHERE m.person_id = %(person)s OR m.person_id = b.person_id
    UNION
    SELECT n.id FROM mutes m JOIN {note} n ON n.team_id = %(team)s AND n.category = m.category
        JOIN {bank} b ON b.id = n.bank_id
    WHERE m.note_id IS NULL AND (m.person_id = %(person)s OR m.person_id = b.person_id)
)
SELECT DISTINCT msg.id, msg.conversation_id, msg."order"
FROM muted
JOIN {source} s ON s.team_id = %(team)s AND s.note_id = muted.id
LEFT JOIN {turn} t ON t.id = s.turn_id
JOIN {message} msg ON msg.id = coalesce(s.message_id, t.message_id)
JOIN {conversation} c ON c.id = msg.conversation_id
WHERE c.team_id = %(team)s AND c.agent_id = %(agent)s AND c.person_id = %(person)s
"""


@dataclass(frozen=True)
class MutedMessages:
    """The messages of an agent's conversations with a person that mutes withhold from it."""

    ids: frozenset[int] = frozenset()
    lowest: dict[int, int] = field(default_factory=dict)  # each conversation's earliest muted order

    @classmethod
    def from_rows(cls, rows: list[tuple[Any, ...]] | None) -> MutedMessages:
        lowest: dict[int, int] = {}
        for _, conversation_id, order in rows or ():
            lowest[conversation_id] = min(order, lowest.get(conversation_id, order))
        return cls(frozenset(pk for pk, _, _ in rows or ()), lowest)

    def withholds_summary(self, conversation: Conversation) -> bool:
        """Whether the conversation's summary was built from a muted message."""
        lowest = self.lowest.get(conversation.pk)
        return lowest is not None and lowest <= conversation.curated_through


def muted_messages_statement(*, agent: Agent, person: Person) -> tuple[str, dict[str, Any]]:
    """The statement muted_messages runs, for a caller that sends it with statements of its own
    (the composer, with its history: one round trip). Its rows go to MutedMessages.from_rows."""
    sql = _MUTED_MESSAGES.format(
        mute=Mute._meta.db_table,
        note=Note._meta.db_table,
        bank=Bank._meta.db_table,
        source=NoteSource._meta.db_table,
        turn=Turn._meta.db_table,
        message=Message._meta.db_table,
        conversation=Conversation._meta.db_table,
    )
    return sql, {"team": agent.team_id, "agent": agent.pk, "person": person.pk}


def muted_messages(*, agent: Agent, person: Person) -> MutedMessages:
    sql, params = muted_messages_statement(agent=agent, person=person)
    with statement_cursor() as cursor:
        cursor.execute(sql, params)
        return MutedMessages.from_rows(cursor.fetchall())
