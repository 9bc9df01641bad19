"""The retrieval audit's writes: every read about a person, recorded without slowing the read.

A read entry point (each read tool, and the composed turn) makes one call, `record_read`, which
only builds the row and appends it to this process's pending list: a few microseconds, no
database, no broker. The rows are written in bulk, after the answer has left:

- by `request_finished`, which Django sends once a response has been sent (the REST tools, the
  turns, the lens); `MemoryConfig.ready` connects `flush_reads` to it;
- by the MCP server, which flushes in the background after handing a tool call's result back
  (config/mcp.py), so the insert runs while the result travels;
- by `flush_reads()` anywhere else (a command, a Celery task, a test), and at once, inline, when
  `PENDING_MAX` rows are waiting, so the list never grows without bound.

Why not a Celery task per read: sending one costs a Redis round trip inside the read (about as
much as the insert it saves) and a lost Redis would lose the row anyway or fail the read. Why not
insert inline: a committed insert is 0.3 to 1 ms on this stack, the whole budget (`make bench`,
"reads", shows both). What this choice may lose: the rows recorded by a process that dies
(killed, out of memory) in the milliseconds between a response and its flush; a failed insert is
logged with the number of rows lost, never silently dropped. The audit is an account for people
and developers, not the record the reads themselves depend on, so that window is accepted.

Erasure reaches the pending list too: `forget_reads_of` and `erase_reads_of_person` scrub the
rows this process has not written yet as well as the table.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import Agent, Person, Team
from memory.models import Read
from memory.text import STOP_WORDS
from memory.text import words as text_words

logger = logging.getLogger(__name__)

PENDING_MAX = 500  # rows waiting before a read writes them itself
RETENTION_BATCH = 5000  # rows the retention sweep deletes per statement

# The conversation of each returned message, in order; or, when the caller only has the message
# ids (a turn's passages), a lookup {message id: conversation id} run at flush time, after the
# response, instead of inside the read.
ConversationIds = Sequence[int] | Callable[[], Mapping[int, int]]

_pending: list[tuple[Read, ConversationIds]] = []
_pending_lock = threading.Lock()
_flush_lock = threading.Lock()  # one flush at a time, so a flush returns only once earlier rows are written


def record_read(
    *,
    team: Team,
    agent: Agent,
    person: Person,
    tool: str,
    started: float,
    query: str = "",
    notes: Iterable[int] = (),
    messages: Iterable[int] = (),
    conversations: ConversationIds = (),
    degraded: Iterable[str] = (),
    turn_id: int | None = None,
    as_of: datetime | None = None,
    request_id: str = "",
) -> None:
    """Record one read about `person`: ids in rank order, never content. `started` is the
    `time.perf_counter()` taken when the read began. Written later, in bulk (see the module)."""
    note_ids, message_ids = list(notes), list(messages)
    row = Read(
        team_id=team.pk,
        agent_id=agent.pk,
        person_id=person.pk,
        tool=tool,
        query=query,
        turn_id=turn_id,
        as_of=as_of,
        notes=note_ids,
        messages=message_ids,
        note_count=len(note_ids),
        message_count=len(message_ids),
        degraded=list(degraded),
        latency_ms=round((time.perf_counter() - started) * 1000, 3),
        request_id=request_id[:100],
        created_at=timezone.now(),
    )
    with _pending_lock:
        _pending.append((row, conversations))
        full = len(_pending) >= PENDING_MAX
    if full:
        flush_reads()


def pending_reads() -> int:
    """How many reads this process has recorded but not written yet."""
    with _pending_lock:
        return len(_pending)


def _conversations_of(row: Read, conversations: ConversationIds) -> list[int]:
    if callable(conversations):
        found = conversations()
        # A message erased in between has no conversation any more: 0 says so.
        return [found.get(message, 0) for message in row.messages]
    return list(conversations)


def flush_reads(**_signal: Any) -> int:
    """Write every pending read of this process, in one insert. Returns how many were written.

    Also a `request_finished` receiver (hence the keyword arguments). Never raises: a read that
    cannot be written is logged, with how many were lost.
    """
    with _flush_lock:
        with _pending_lock:
            batch = list(_pending)
            _pending.clear()
        if not batch:
            return 0
        try:
            rows = []
            for row, conversations in batch:
                if row.messages:
                    row.conversations = _conversations_of(row, conversations)
                rows.append(row)
            # One INSERT: outside a transaction it is atomic by itself (an atomic block would add a
            # BEGIN and a COMMIT, a round trip each, to every audited request); inside one, a
            # savepoint keeps a failure from spoiling the caller's transaction.
            with transaction.atomic() if connection.in_atomic_block else nullcontext():
                Read.objects.bulk_create(rows)
        except IntegrityError:
            # A row names what is gone since its read (a person erased, an agent deleted, in another
            # process): the others are written one by one, and only the orphans are lost.
            return _write_one_by_one(rows)
        except DatabaseError:
            logger.exception("The retrieval audit lost %d reads: writing them failed", len(batch))
            return 0
        return len(rows)


def _write_one_by_one(rows: list[Read]) -> int:
    written = 0
    for row in rows:
        row.pk, row._state.adding = None, True
        try:
            with transaction.atomic():
                row.save(force_insert=True)
        except IntegrityError:
            continue
        written += 1
    if written < len(rows):
        logger.warning(
            "The retrieval audit lost %d reads: their team, agent or person was deleted before they were written",
            len(rows) - written,
        )
    return written


def discard_pending_reads() -> int:
    """Drop the reads this process has not written yet. For tests: a test whose transaction rolls
    back must not leave reads for the next test to write (their people no longer exist)."""
    with _pending_lock:
        dropped = len(_pending)
        _pending.clear()
    return dropped


def _scrub_pending(matches: Callable[[Read], bool], action: Callable[[Read], bool]) -> None:
    """Apply `action` to the pending rows `matches` selects; a row for which it returns False is dropped."""
    with _pending_lock:
        kept = [(row, conv) for row, conv in _pending if not matches(row) or action(row)]
        _pending[:] = kept


def _blank(row: Read) -> bool:
    if row.query:
        row.query, row.query_erased = "", True
    return True


def _content_words(texts: Iterable[str]) -> set[str]:
    """The words of erased text that could identify it in a query: not stop words, not one or two letters."""
    return {word for text in texts for word in text_words(text) if len(word) > 2 and word not in STOP_WORDS}


def forget_reads_of(
    *,
    team: Team,
    notes: Iterable[int] = (),
    messages: Iterable[int] = (),
    texts: Iterable[str] = (),
    person_id: int | None = None,
) -> int:
    """Blank the query of every read that returned one of these notes or messages: a query can
    carry the very fact that was erased. With `texts` (what was erased), the queries of reads about
    `person_id` (every person of the team when None) that share a word with it are blanked too,
    whether or not they found anything: an agent that searched for "Cnrytown" and found nothing
    still wrote the fact down. The read itself stays (who looked, when, how much came back). Call
    it from every erasure of notes or messages. Returns how many stored reads changed."""
    note_ids, message_ids = list(notes), list(messages)
    erased_words = _content_words(texts)
    if not note_ids and not message_ids and not erased_words:
        return 0
    erased_notes, erased_messages = set(note_ids), set(message_ids)

    def quotes(row: Read) -> bool:
        about = person_id is None or row.person_id == person_id
        return about and bool(erased_words.intersection(text_words(row.query)))

    _scrub_pending(
        lambda row: (
            row.team_id == team.pk
            and bool(erased_notes.intersection(row.notes) or erased_messages.intersection(row.messages) or quotes(row))
        ),
        _blank,
    )
    returned = Q(pk__in=[])
    if note_ids:
        returned |= Q(notes__overlap=note_ids)
    if message_ids:
        returned |= Q(messages__overlap=message_ids)
    if erased_words:
        about = Q() if person_id is None else Q(person_id=person_id)
        # Words as the lens and the tools split them (memory.text.words), matched whole in SQL.
        pattern = r"\m(" + "|".join(_regex_escape(word) for word in sorted(erased_words)) + r")\M"
        returned |= about & Q(query__iregex=pattern)
    return Read.objects.for_team(team).filter(returned).exclude(query="").update(query="", query_erased=True)


def _regex_escape(word: str) -> str:
    return "".join(ch if ch.isalnum() else f"\\{ch}" for ch in word)


def erase_reads_of_person(*, team: Team, person: Person) -> int:
    """Delete every read about this person (erasing a person erases what was read about them)."""
    _scrub_pending(lambda row: row.team_id == team.pk and row.person_id == person.pk, lambda row: False)
    deleted, _ = Read.objects.for_team(team).filter(person=person).delete()
    return deleted


def delete_old_reads(*, now: datetime | None = None) -> int:
    """The retention sweep: delete reads older than READ_AUDIT_DAYS, in batches. Returns how many."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.READ_AUDIT_DAYS)
    total = 0
    while True:
        ids = list(Read.objects.filter(created_at__lt=cutoff).order_by().values_list("pk", flat=True)[:RETENTION_BATCH])
        if not ids:
            return total
        deleted, _ = Read.objects.filter(pk__in=ids).delete()
        total += deleted
