"""The conversation reads' replica choice: memory.replica_reads' fingerprint, and the person's
conversations with their erasure counts (every erasure raises its conversation's in the same
transaction; a deleted conversation drops out), so no replica that still holds an erased or
deleted message answers."""

from __future__ import annotations

from contextlib import AbstractContextManager

from accounts.models import Person
from conversations.models import Conversation
from memory import replica_reads

CONVERSATIONS_FINGERPRINT = f"""
(SELECT md5(string_agg(id::text || ':' || erasures::text, ',' ORDER BY id))
 FROM {Conversation._meta.db_table}
 WHERE team_id = %(team)s AND person_id = %(person)s)
"""


def reading_for(person: Person) -> AbstractContextManager[str]:
    """Reads in the block go to a replica fresh for this person's notes and conversations, or to the primary."""
    return replica_reads.reading_for(person, CONVERSATIONS_FINGERPRINT)
