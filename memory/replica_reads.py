"""Which database may answer a read for one person: a replica that has replayed every note write,
mute and erasure of theirs, or the primary (config.replicas says how it is decided).

The fingerprint here is of the banks the person reads (their own and the team's shared ones, as
memory.services.mutes.banks_they_read): every change to what those banks show raises a bank's
version in the writer's transaction (memory.services.revisions.new_bank_version), mutes and
erasures included. The conversation reads add their conversations' erasure counts
(conversations.replica_reads).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from accounts.models import Person
from config.replicas import fresh_replica, reading_from
from memory.models import Bank

BANKS_FINGERPRINT = f"""
(SELECT md5(string_agg(id::text || ':' || version::text, ',' ORDER BY id))
 FROM {Bank._meta.db_table}
 WHERE team_id = %(team)s AND (person_id = %(person)s OR kind = '{Bank.Kind.SHARED.value}'))
"""


@contextmanager
def reading_for(person: Person, *also: str) -> Iterator[str]:
    """Reads in the block go to a replica fresh for this person, or to the primary; `also` adds
    one-value subqueries (over %(team)s and %(person)s) to the fingerprint. Yields the alias."""
    fingerprint = "SELECT " + ", ".join((BANKS_FINGERPRINT, *also))
    with reading_from(fresh_replica(fingerprint, {"team": person.team_id, "person": person.pk})) as alias:
        yield alias
