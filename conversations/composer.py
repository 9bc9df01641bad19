"""The composer: the one function that decides what a turn of an agent is given.

Layers, in eviction order:  persona → last exchange → summary → notes → passages → deeper window.
One ceiling (COMPOSER_CEILING characters) holds over everything but the persona. The last
exchange is granted first; then each layer takes what it asks for, left to right, so when the
ceiling binds, room is given up from the right. Everything drawn from memory or from the
conversation is framed by memory.framing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from concurrent.futures import Future
from contextlib import nullcontext
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction

from accounts.models import Agent, Person, Team
from config import metrics
from config.exceptions import DomainError
from config.prepared import run_together
from conversations import budget
from conversations.exceptions import MemoryUnavailable
from conversations.models import Conversation, Message
from conversations.mutes import MutedMessages, muted_messages_statement
from conversations.queries import PendingSearch, RankedMessages, meaning_text, start_search, worth_searching
from conversations.windows import ELLIPSIS, MIN_WINDOW_CHARS, Window, best_window
from memory import vectors
from memory.banks import BanksRead, banks_read
from memory.embedders import Vector, get_embedder
from memory.framing import NOTES_HEADER, PASSAGES_HEADER, SUMMARY_HEADER, json_line
from memory.models import CONTENT_MAX, Bank
from memory.queries import KeptContents, TurnContext, TurnNote, note_contents, turn_notes
from memory.validation import validate_scope

logger = logging.getLogger(__name__)

LAYERS = ("persona", "last_exchange", "summary", "notes", "passages", "deeper_window")


class Profile(StrEnum):
    """What a turn is composed of: every layer, or the memories alone (the current message is the
    whole window: no last exchange, summary, passages or older history)."""

    FULL = "full"
    MEMORY_ONLY = "memory_only"


PROFILES = tuple(profile.value for profile in Profile)
HISTORY_FETCH = 400  # the newest messages read for the window; more could never fit the ceiling

# The window's messages: the newest HISTORY_FETCH up to the current one, but whole runs of one role
# only (a run is one item of the window: _merge_roles), and of those only the last exchange's three
# and the runs whose newer messages alone hold no more than the ceiling. No other could be shown: the
# deeper window is contiguous with the last exchange, and both fit under the ceiling, so a message
# is shown only when it and every newer one fit together.
_HISTORY = """
WITH newest AS (
    SELECT id, role, content, "order", length(content) AS chars
    FROM {message}
    WHERE team_id = %(team)s AND conversation_id = %(conversation)s AND "order" <= %(order)s AND erased_at IS NULL
    ORDER BY "order" DESC
    LIMIT %(fetch)s
),
marked AS (
    SELECT id, role, content, "order", sum(chars) OVER newer - chars AS newer_chars,
           CASE WHEN role = lag(role) OVER newer THEN 0 ELSE 1 END AS starts_run
    FROM newest
    WINDOW newer AS (ORDER BY "order" DESC)
),
-- What is newer than a run is what is newer than its newest message (newer_chars only grows,
-- newest first): the largest newer_chars of a run's start so far. So both are running windows in
-- the same order as the first, and no row is sorted by its run.
runs AS (
    SELECT id, role, content, "order", sum(starts_run) OVER newer AS run,
           max(CASE WHEN starts_run = 1 THEN newer_chars END) OVER newer AS run_newer_chars
    FROM marked
    WINDOW newer AS (ORDER BY "order" DESC)
)
SELECT id, role, content FROM runs
WHERE run <= 3 OR run_newer_chars <= %(ceiling)s
ORDER BY "order"
"""

MEMORY_UNAVAILABLE_NOTICE = (
    "## Memory\nMemory was unavailable this turn: nothing remembered about this person is shown. "
    "Do not assume there is nothing to remember."
)
OMITTED_LINE = "({count} more relevant notes did not fit this turn.)"


@dataclass
class Block:
    layer: str
    text: str
    flags: list[str] = field(default_factory=list)

    @property
    def chars(self) -> int:
        return len(self.text)


@dataclass
class Composition:
    blocks: list[Block]
    messages: list[dict[str, str]]
    costs: dict[str, int]
    ceiling: int
    degraded: list[str]
    notes_used: list[int]
    passages_used: list[int]
    timings_ms: dict[str, float] = field(default_factory=dict)  # where the time went, per layer
    # The vector of the message's text this turn computed (memory.vectors.embed_query), when it was
    # ready by the end of the turn; None otherwise (no embedder, an empty text, or it failed).
    message_vector: Vector | None = None

    @property
    def prefix_chars(self) -> int:
        return sum(chars for layer, chars in self.costs.items() if layer != "persona")


@dataclass
class _Item:
    """A message as the window sees it: consecutive messages of one role are merged into one."""

    role: str
    content: str
    ids: list[int]


def _merge_roles(messages: Iterable[tuple[int, str, str]]) -> list[_Item]:
    """Messages given as (pk, role, content), oldest first."""
    items: list[_Item] = []
    for pk, role, content in messages:
        if items and items[-1].role == role:
            items[-1].content += "\n\n" + content
            items[-1].ids.append(pk)
        else:
            items.append(_Item(role, content, [pk]))
    return items


def _transcript(items: list[_Item]) -> str:
    return "\n".join(f"{'person' if i.role == Message.Role.USER else 'agent'}: {i.content}" for i in items)


def _note_line(key: str, content: str) -> str:
    # A note stored before today's caps is cut at render (and flagged), never breaking the turn.
    return json_line({"key": key, "content": content[:CONTENT_MAX]})


_NOTE_LINE_FRAME = len(_note_line("", "")) - 2 * len('""')  # the line around its two JSON strings


def _line_chars(note: TurnNote) -> int:
    """len(_note_line(key, content)) from the JSON lengths the database computed (memory.queries
    turn_notes): Postgres' to_json escapes exactly what json.dumps(ensure_ascii=False) does."""
    return _NOTE_LINE_FRAME + note.key_json_chars + note.content_json_chars


def _passage_line(message: Message, query: str, share: int) -> str:
    """One passage: the message whole when its line fits in `share` characters, else the window of
    it that matches the query best (conversations.windows), saying where in the message it is."""
    record: dict[str, Any] = {
        "when": message.created_at.date().isoformat(),
        "who": "person" if message.role == Message.Role.USER else "agent",
        "message": message.pk,
    }
    length = len(message.content)
    if length < share:  # a line is longer than its text: a longer message never fits whole
        whole = json_line({**record, "text": message.content})
        if len(whole) <= share:
            return whole
    # The line around the window's text, its position as long as it can be; JSON's escapes (a line
    # break is two characters) are paid for by a second, smaller window when the first overran.
    frame = len(json_line({**record, "at": Window(length, length, length).position(), "text": ""}))
    size = max(MIN_WINDOW_CHARS, share - frame - 2 * len(ELLIPSIS))
    for _ in range(2):
        window = best_window(message.content, query, size=size, language=message.language)
        line = json_line({**record, "at": window.position(), "text": window.text(message.content)})
        if len(line) <= share or size == MIN_WINDOW_CHARS:
            break
        size = max(MIN_WINDOW_CHARS, size - (len(line) - share))
    return line


class _Composer:
    def __init__(
        self,
        *,
        team: Team,
        agent: Agent,
        person: Person,
        conversation: Conversation,
        message: Message,
        scope: str,
        context: TurnContext | None,
        profile: Profile,
        persona: str | None,
    ) -> None:
        self.team, self.agent, self.person = team, agent, person
        self.conversation, self.message = conversation, message
        self.scope, self.context, self.profile = scope, context, profile
        self.persona = agent.persona if persona is None else persona
        self.ceiling = settings.COMPOSER_CEILING
        self.degraded: list[str] = []
        self.notes_used: list[int] = []
        # Set once a layer could not take what it asked for because of the ceiling: from then
        # on, every layer to its right gets nothing (room is given up from the right).
        self.ceiling_bound = False
        self.passages_bound = False
        self.timings: dict[str, float] = {}  # milliseconds spent on each part of the turn
        self._vector: Future[tuple[Any, str]] | None = None  # the message's, from memory.vectors.embed_query
        self._search: PendingSearch | None = None  # the passages' search, begun (search)
        self._ranked: RankedMessages | None = None  # and ranked (finish_search), when there is one
        self._banks: list[Bank] | None = None  # the notes' banks, when read with the history
        self._muted = MutedMessages()  # what mutes withhold of the conversations, read with the history
        self._clock = time.perf_counter()

    def _lap(self, part: str) -> None:
        """Charge the time since the last lap to `part` (a layer, or the history or the message's
        vector that layers use)."""
        now = time.perf_counter()
        self.timings[part] = self.timings.get(part, 0.0) + (now - self._clock) * 1000
        self._clock = now

    # --- layers ---------------------------------------------------------------------------

    def last_exchange(self, history: list[_Item]) -> tuple[list[_Item], Block]:
        """The previous exchange and the current message, granted before anything else."""
        current = history[-1]
        exchange = [current]
        if self.profile == Profile.FULL and len(history) >= 3 and history[-2].role == Message.Role.ASSISTANT:
            exchange = history[-3:]
        flags: list[str] = []
        # Only a ceiling smaller than one exchange can bind here: cut the oldest part first.
        over = len(_transcript(exchange)) - self.ceiling
        keeps = budget.trim_oldest_first([len(item.content) for item in exchange], over)
        for item, keep in zip(exchange, keeps, strict=True):
            if keep is None:
                continue
            item.content = budget.cut(item.content, keep) if keep else ""
            flags.append("cut")
        exchange = [i for i in exchange if i.content]
        return exchange, Block("last_exchange", _transcript(exchange), flags)

    def summary(self, room: int) -> Block | None:
        text = self.conversation.summary.strip()
        if self.profile != Profile.FULL or not text or room <= 0 or self._muted.withholds_summary(self.conversation):
            return None
        flags = ["stale"] if self.conversation.summary_stale else []
        body = json_line({"summary": text})
        block = f"{SUMMARY_HEADER}\n{body}"
        allowed = budget.allowance(room, settings.SUMMARY_CHARS)
        if len(block) > allowed:
            block = budget.cut(block, allowed)
            flags.append("cut")
            if budget.ceiling_binds(room, settings.SUMMARY_CHARS):
                self.ceiling_bound = True
        return Block("summary", block, flags) if len(block) > len(SUMMARY_HEADER) + 2 else None

    def notes(self, room: int) -> Block | None:
        allowed = budget.allowance(room, settings.NOTES_CHARS)
        if allowed <= 0:
            return None
        embedder = get_embedder()
        lost: list[str] = []

        def message_vector() -> Any:
            """The message's vector, waited for only once the notes are read (turn_notes orders
            them by it): it was started with the turn."""
            if self._vector is None:
                return None
            self._lap("notes")
            vector, ordering_lost = self._vector.result()
            self._lap("message_vector")  # what was left of it
            if ordering_lost:
                lost.append(ordering_lost)
            return vector

        try:
            # Outside a transaction every read is its own; inside the caller's, a savepoint keeps a
            # failing read from poisoning it. (An open transaction may wait on a remote embedder
            # here: only a caller that composes inside one holds it.)
            with transaction.atomic() if connection.in_atomic_block else nullcontext():
                found = turn_notes(
                    team=self.team, person=self.person, agent=self.agent, scope=self.scope, context=self.context,
                    vector=message_vector, model=embedder.model if embedder else "",
                    dim=embedder.dim if embedder else 0, banks=self._banks,
                )  # fmt: skip
                text, digest_cut = budget.fit_lines(found.digest.split("\n"), allowed)
                if digest_cut:
                    self.ceiling_bound = self.ceiling_bound or budget.ceiling_binds(room, settings.NOTES_CHARS)
                    return Block("notes", text, ["digest_cut"])
                if lost:
                    self.degraded.append("ordering")
                return self._full_notes(found.notes, found.contents, text, room, allowed)
        except DatabaseError as exc:
            logger.warning("memory read failed while composing turn for %s: %s", self.person, exc)
            if settings.COMPOSER_MEMORY_FAILURE == "fail":
                raise MemoryUnavailable("The memory store failed; the turn was not composed.") from exc
            self.degraded.append("notes")
            return Block("notes", budget.cut(MEMORY_UNAVAILABLE_NOTICE, allowed), ["memory_unavailable"])

    def _full_notes(
        self, candidates: list[TurnNote], kept: KeptContents, digest: str, room: int, allowed: int
    ) -> Block:
        """The digest, then the full text of the best-ranked notes that fit. Chosen from each note's
        line length alone; only the content of the notes that fit is read (unless kept: `kept`)."""
        flags = [f"over_cap:{c.key}" for c in candidates if c.content_chars > CONTENT_MAX]
        body = f"{digest}\n{NOTES_HEADER}"
        packing = budget.pack_lines(len(body), [_line_chars(c) for c in candidates], allowed)
        chosen = [candidates[index] for index in packing.taken]
        contents = kept.read(team=self.team, ids=[c.pk for c in chosen])
        lines = [_note_line(c.key, contents.get(c.pk, "")) for c in chosen]
        if [len(line) for line in lines] == [_line_chars(c) for c in chosen]:
            kept.keep({c.pk: contents[c.pk] for c in chosen if c.pk in contents})
        else:
            # A length the database computed differs from the line rendered here (a note changed
            # between the two reads): decide again from the lines themselves.
            logger.warning("note line lengths disagreed while composing turn for %s; packing again", self.person)
            contents = note_contents(team=self.team, ids=[c.pk for c in candidates])
            candidates = [c for c in candidates if c.pk in contents]  # deleted meanwhile: gone
            every = [_note_line(c.key, contents[c.pk]) for c in candidates]
            packing = budget.pack_lines(len(body), [len(line) for line in every], allowed)
            chosen = [candidates[index] for index in packing.taken]
            lines = [every[index] for index in packing.taken]
        used = [c.pk for c in chosen]
        body = "\n".join([body, *lines]) if used else digest
        omitted = packing.omitted(len(candidates))
        if omitted:
            notice = OMITTED_LINE.format(count=omitted)
            if len(body) + 1 + len(notice) <= allowed:
                body += "\n" + notice
            flags.append(f"omitted:{omitted}")
            self.ceiling_bound = self.ceiling_bound or budget.ceiling_binds(room, settings.NOTES_CHARS)
        self.notes_used = used
        return Block("notes", body, flags)

    def search(self, room: int) -> None:
        """The passages' search, once a turn, begun before the notes: the pair is read and the words
        half runs while the message's vector is still being computed (the notes' reads follow, then
        finish_search ranks). `room` is what the ceiling has left before the notes: when the
        passages could get nothing even with all of it, nothing is searched."""
        allowed = budget.allowance(room, settings.PASSAGES_CHARS)
        if not self._searches() or allowed <= len(PASSAGES_HEADER) + 1:
            return
        self._search = start_search(
            agent=self.agent,
            person=self.person,
            query=self.message.content,
            now=self.message.created_at,
            leave_out=frozenset({self.message.pk}),
        )

    def _searches(self) -> bool:
        """Whether this turn searches its passages, if the ceiling leaves them room."""
        return self.profile == Profile.FULL and settings.PASSAGES_MAX > 0 and worth_searching(self.message.content)

    def finish_search(self) -> None:
        if self._search is None:
            return
        self._ranked = self._search.finish()
        if self._ranked.degraded:  # found by words alone: the turn says so
            self.degraded.append("passages")

    def passages(self, room: int, hidden: set[int]) -> tuple[Block | None, list[int]]:
        allowed = budget.allowance(room, settings.PASSAGES_CHARS)
        if self._ranked is None or allowed <= len(PASSAGES_HEADER) + 1:
            return None, []
        # hits() leaves out the hidden ones before it counts; the four spare stand in for hits erased
        # since the search, which are not read. Read ahead: a second pass, with the window's
        # messages hidden too, mostly finds what it needs read by the first.
        hits = self._ranked.hits(limit=settings.PASSAGES_MAX + 4, exclude_ids=hidden, read_ahead=True)
        # Each passage's fair share of the layer: a long message shows the window of it that matches,
        # so four passages can carry four pieces of evidence rather than one message's start.
        share = (allowed - len(PASSAGES_HEADER)) // settings.PASSAGES_MAX - 1
        lines = [_passage_line(hit.message, self.message.content, share) for hit in hits]
        plan = budget.plan_passages(len(PASSAGES_HEADER), [len(line) for line in lines], allowed, settings.PASSAGES_MAX)
        if plan.overflowed:
            self.passages_bound = budget.ceiling_binds(room, settings.PASSAGES_CHARS)
        if not plan.count:
            return None, []
        lines = lines[: plan.count]
        flags: list[str] = []
        if plan.first_cut_to is not None:  # one long passage: cut it rather than show none
            lines[0] = budget.cut(lines[0], plan.first_cut_to)
            flags.append("cut")
        used = [hit.message.pk for hit in hits[: plan.count]]
        return Block("passages", "\n".join([PASSAGES_HEADER, *lines]), flags), used

    def deeper_window(self, older: list[_Item], room: int) -> tuple[list[_Item], Block | None]:
        """Whole earlier exchanges, newest first, contiguous, starting with the person's message."""
        pairs: list[list[_Item]] = []  # whole exchanges, newest first, while the roles alternate
        index = len(older)
        while (
            index >= 2
            and older[index - 1].role == Message.Role.ASSISTANT
            and older[index - 2].role == Message.Role.USER
        ):
            pairs.append(older[index - 2 : index])
            index -= 2
        pairs.reverse()
        count = budget.newest_that_fit([len(_transcript(pair)) for pair in pairs], room)
        taken = [item for pair in pairs[len(pairs) - count :] for item in pair]
        if not taken:
            return [], None
        return taken, Block("deeper_window", _transcript(taken))

    # --- the whole turn -------------------------------------------------------------------

    def _history(self) -> list[_Item]:
        """The newest HISTORY_FETCH messages up to the current one, oldest first, as the window sees
        them, without the runs of one role that could never be shown (see _HISTORY) and without
        the messages a mute withholds (but the current one). The notes' banks and the muted
        messages are read in the same round trip (_banks_read, conversations.mutes)."""
        params: dict[str, Any] = {
            "team": self.team.pk,
            "conversation": self.conversation.pk,
            "order": self.message.order,
            "fetch": HISTORY_FETCH,
            "ceiling": self.ceiling,
        }
        # The newest messages are read backwards along the (team, conversation, order) index, never
        # by sorting every message of the conversation, or of the team: Postgres' statistics lag a
        # team's growth (a team too new to them looks empty, and its whole index scanned and sorted
        # cost the large bench person 40-90 ms). enable_sort is off for this read only (and while it
        # is prepared, config.prepared.run_together): the statements go in one round trip, which
        # runs as one transaction of its own outside an atomic block, and inside one, the statement
        # after it gives the setting back (before the banks' read, which sorts nothing).
        statements: list[tuple[str, Any]] = [
            ("SET LOCAL enable_sort = off", None),
            (_HISTORY.format(message=Message._meta.db_table), params),
            ("SET LOCAL enable_sort TO DEFAULT", None),
        ]
        statements.append(muted_messages_statement(agent=self.agent, person=self.person))
        banks = self._banks_read()
        if banks is not None:
            statements.append((banks.sql, banks.params))
        found = run_together(statements)
        self._muted = MutedMessages.from_rows(found[3])
        rows = found[1] or []
        if self._muted.ids:
            rows = [row for row in rows if row[0] not in self._muted.ids or row[0] == self.message.pk]
        if banks is not None:
            self._banks = banks.banks(found[4] or [])
        return _merge_roles(rows)

    def _banks_read(self) -> BanksRead | None:
        """The statement reading the banks the notes layer reads from, sent with the history: the
        banks are read before the notes either way (turn_notes). None when the scope is not valid:
        turn_notes says why, as it did before."""
        try:
            scope = validate_scope(self.scope)
        except DomainError:
            return None
        return banks_read(team=self.team, person=self.person, scope=scope)

    def _search_text_soon(self) -> None:
        """Start embedding what the passages' search embeds when it is not the message itself (a
        message naming a date or a participant: conversations.queries.meaning_text), beside the
        message's: the search asks for it only once the history is read. It then waits on this
        embedding (memory.vectors.embed_query_soon). A search the ceiling leaves no room for has
        had it embedded for nothing."""
        if not self._searches():
            return
        text = self.message.content
        meant = meaning_text(agent=self.agent, person=self.person, query=text, now=self.message.created_at)
        if meant is not None and meant != text:
            vectors.embed_query_soon(meant)

    def _message_vector(self) -> Any:
        """The message's vector if the turn has it already: never waited for here."""
        if self._vector is None or not self._vector.done() or self._vector.exception() is not None:
            return None
        vector, _ = self._vector.result()
        return vector

    def compose(self) -> Composition:
        self._clock = time.perf_counter()
        lap = self._lap
        # The message's vector is computed while the history and the notes are read (the notes are
        # ordered by it, and the passages' search waits on the same embedding: memory.vectors).
        text = self.message.content
        if get_embedder() is not None and text.strip():
            self._vector = vectors.embed_query_soon(text)
            self._search_text_soon()
        if self.profile == Profile.MEMORY_ONLY:  # the current message is the whole window
            history = _merge_roles([(self.message.pk, self.message.role, self.message.content)])
        else:
            history = self._history()
        lap("history")

        blocks: dict[str, Block] = {}
        if self.persona:
            blocks["persona"] = Block("persona", self.persona)

        exchange, exchange_block = self.last_exchange(history)
        blocks["last_exchange"] = exchange_block
        room = self.ceiling - exchange_block.chars
        lap("last_exchange")

        summary = self.summary(room)
        if summary:
            blocks["summary"] = summary
            room -= summary.chars
        if self.ceiling_bound:
            room = 0
        lap("summary")

        self.search(room)  # only the notes come between: they can leave the passages less room, not more
        lap("passages")

        notes = self.notes(room)
        if notes:
            blocks["notes"] = notes
            room -= notes.chars
        if self.ceiling_bound:
            room = 0
        lap("notes")
        self.finish_search()
        lap("passages")

        older = history[: len(history) - len(exchange)] if self.profile == Profile.FULL else []
        visible_ids = {pk for item in exchange for pk in item.ids}
        # Passages are chosen before the window (they rank higher), but a passage already in the
        # final window is dropped: settle the two together.
        hidden = visible_ids | self._muted.ids
        passages_used: list[int] = []
        window: list[_Item] = []
        window_block = None
        for _ in range(3):
            self.passages_bound = False
            passage_block, passages_used = self.passages(room, hidden)
            lap("passages")
            window_room = 0 if self.passages_bound else room - (passage_block.chars if passage_block else 0)
            window, window_block = self.deeper_window(older, window_room)
            lap("deeper_window")
            in_window = {pk for item in window for pk in item.ids}
            if not in_window & set(passages_used):
                break
            hidden |= in_window
        if passage_block:
            blocks["passages"] = passage_block
        if window_block:
            blocks["deeper_window"] = window_block

        messages = [{"role": item.role, "content": item.content} for item in window + exchange]
        ordered_blocks = [blocks[layer] for layer in LAYERS if layer in blocks]
        costs = {layer: (blocks[layer].chars if layer in blocks else 0) for layer in LAYERS}
        composition = Composition(
            blocks=ordered_blocks,
            messages=messages,
            costs=costs,
            ceiling=self.ceiling,
            degraded=self.degraded,
            notes_used=self.notes_used,
            passages_used=passages_used,
            timings_ms={layer: round(ms, 3) for layer, ms in self.timings.items()},
            message_vector=self._message_vector(),
        )
        assert composition.prefix_chars <= self.ceiling, composition.costs
        return composition


def compose(
    *,
    team: Team,
    agent: Agent,
    person: Person,
    conversation: Conversation,
    message: Message,
    scope: str = "",
    context: TurnContext | None = None,
    profile: Profile = Profile.FULL,
    persona: str | None = None,
) -> Composition:
    """Compose one turn. The one place that decides what a turn of an agent sees."""
    started = time.perf_counter()
    composition = _Composer(
        team=team, agent=agent, person=person, conversation=conversation, message=message,
        scope=scope, context=context, profile=profile, persona=persona,
    ).compose()  # fmt: skip
    metrics.observe_turn(seconds=time.perf_counter() - started, layer_chars=composition.costs)
    return composition


def composition_to_json(composition: Composition, *, turn_id: int, conversation_id: int) -> dict[str, Any]:
    return {
        "turn": turn_id,
        "conversation": conversation_id,
        "blocks": [{"layer": b.layer, "text": b.text, "chars": b.chars, "flags": b.flags} for b in composition.blocks],
        "messages": composition.messages,
        "costs": composition.costs,
        "ceiling": composition.ceiling,
        "degraded": composition.degraded,
        "notes_used": composition.notes_used,
    }
