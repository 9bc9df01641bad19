"""The history import: conversations with their messages from JSON lines (the API's
`POST /api/v1/conversations/import`, `manage.py import_conversations`, a person's data package),
checked line by line before anything is written, then written in one transaction, idempotently
by external ids."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import transaction
from django.db.models import F, Max
from django.db.models.functions import Coalesce, Greatest

from accounts.models import Agent, Team
from accounts.services import get_or_create_person
from config.text import TextKind, check_text
from conversations.exceptions import ConversationNotFound, InvalidMessage, MessageTooLong
from conversations.indexing import MESSAGES
from conversations.models import Conversation, ConversationImport, Message
from conversations.services import check_content
from memory.language import text_search_config

IMPORT_FIELDS = {"person", "external_id", "started_at", "messages"}
IMPORT_MESSAGE_FIELDS = {"role", "content", "created_at", "external_id"}


@dataclass
class ImportedMessage:
    role: str
    content: str
    created_at: datetime
    external_id: str


@dataclass
class ImportedConversation:
    line: int
    person: str
    external_id: str
    started_at: datetime | None
    messages: list[ImportedMessage]


@dataclass
class ImportReport:
    conversations_created: int = 0
    conversations_matched: int = 0
    messages_created: int = 0
    messages_present: int = 0
    id: int = 0  # the ConversationImport row that follows its embedding (conversations.queries.import_progress)

    def summary(self) -> str:
        return (
            f"{self.messages_created} messages imported ({self.messages_present} already present) in "
            f"{self.conversations_created} new and {self.conversations_matched} existing conversations"
        )


def parse_jsonl(text: str) -> list[object]:
    """The objects of a JSON-lines text, one a line (blank lines skipped, their numbers kept)."""
    items: list[object] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            items.append(None)
            continue
        try:
            items.append(json.loads(raw))
        except ValueError as exc:
            raise InvalidMessage(f"line {number}: not JSON ({exc}). Nothing was imported.", field="line") from exc
    return items


def _timestamp(value: object, *, field: str) -> datetime:
    parsed = None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
    if parsed is None:
        raise InvalidMessage(f"{field} must be an ISO 8601 date and time, like 2023-05-08T13:56:00+00:00.", field=field)
    if parsed.tzinfo is None:
        raise InvalidMessage(f"{field} needs a timezone (like +00:00 or Z).", field=field)
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise InvalidMessage(f"{field} is out of range (years 1 to 9999 in UTC).", field=field) from None


def _identifier(value: object, *, field: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidMessage(f"{field} must be a non-empty string id.", field=field)
    check_text(value, field=field, kind=TextKind.IDENTIFIER, error=InvalidMessage)
    if len(value) > limit:
        raise InvalidMessage(f"{field} is longer than {limit} characters.", field=field)
    return value


def _check_import_line(item: object) -> tuple[str, str, datetime | None, list[ImportedMessage]]:
    if not isinstance(item, dict):
        raise InvalidMessage("must be a JSON object with person, external_id and messages.", field="line")
    unknown = sorted(set(item) - IMPORT_FIELDS)
    if unknown:
        raise InvalidMessage(
            f"unknown field {unknown[0]} (expected {', '.join(sorted(IMPORT_FIELDS))}).", field=unknown[0]
        )
    person = _identifier(item.get("person"), field="person", limit=200).strip()
    external_id = _identifier(item.get("external_id"), field="external_id", limit=100)
    started_at = None if item.get("started_at") is None else _timestamp(item["started_at"], field="started_at")
    raw_messages = item.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise InvalidMessage("messages must be a non-empty list.", field="messages")
    messages: list[ImportedMessage] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_messages):
        where = f"messages[{index}]"
        if not isinstance(raw, dict):
            raise InvalidMessage(f"{where} must be a JSON object.", field=where)
        unknown = sorted(set(raw) - IMPORT_MESSAGE_FIELDS)
        if unknown:
            raise InvalidMessage(f"{where}: unknown field {unknown[0]}.", field=f"{where}.{unknown[0]}")
        role = raw.get("role")
        if role not in Message.Role.values:
            raise InvalidMessage(
                f"{where}.role must be one of {', '.join(Message.Role.values)}.", field=f"{where}.role"
            )
        try:
            content = check_content(raw.get("content"))  # type: ignore[arg-type]  # _check_content checks the type
        except (InvalidMessage, MessageTooLong) as exc:
            raise type(exc)(f"{where}.{exc.message}", field=f"{where}.content") from exc
        created_at = _timestamp(raw.get("created_at"), field=f"{where}.created_at")
        message_id = _identifier(raw.get("external_id"), field=f"{where}.external_id", limit=100)
        if message_id in seen:
            raise InvalidMessage(f"{where}.external_id {message_id!r} appears twice.", field=f"{where}.external_id")
        seen.add(message_id)
        messages.append(ImportedMessage(role=role, content=content, created_at=created_at, external_id=message_id))
    return person, external_id, started_at, messages


def check_import(items: list[object], *, indexed_fields: bool = False) -> list[ImportedConversation]:
    """Every line checked before anything is written: the first bad one is refused with its number
    (1-based; a None item is a blank line and is skipped). With indexed_fields (a JSON array body),
    the field an error names starts with the item's index, as the API's JSON parser names it."""
    conversations: list[ImportedConversation] = []
    first_line: dict[tuple[str, str], int] = {}
    for number, item in enumerate(items, start=1):
        if item is None:
            continue
        try:
            person, external_id, started_at, messages = _check_import_line(item)
        except (InvalidMessage, MessageTooLong) as exc:
            field = f"[{number - 1}].{exc.field}" if indexed_fields and exc.field else exc.field
            raise type(exc)(f"line {number}: {exc.message} Nothing was imported.", field=field) from exc
        if (person, external_id) in first_line:
            raise InvalidMessage(
                f"line {number}: conversation {external_id!r} of {person!r} is also line "
                f"{first_line[person, external_id]}; put its messages on one line. Nothing was imported.",
                field=f"[{number - 1}].external_id" if indexed_fields else "external_id",
            )
        first_line[person, external_id] = number
        conversations.append(ImportedConversation(number, person, external_id, started_at, messages))
    return conversations


def import_conversations(
    *,
    team: Team,
    agent: Agent,
    items: list[object],
    progress: Callable[[int], object] | None = None,
    indexed_fields: bool = False,
) -> ImportReport:
    """Import conversations with their messages (one item per JSON line), idempotently.

    A conversation is matched by (team, agent, person, external_id), a message by (conversation,
    external_id): importing again adds only what is new. Every line is checked first, with the
    checks record_message applies; then everything is written in one transaction, messages in bulk
    with their own created_at, in file order after any already recorded. Embedding is queued in
    batches once the transaction commits. `progress` is called with the number of messages of each
    conversation as it is written.
    """
    if agent.team_id != team.pk:
        raise ConversationNotFound("That agent is not known in this team.", field="agent")
    conversations = check_import(items, indexed_fields=indexed_fields)
    report = ImportReport()
    created_ids: list[int] = []
    with transaction.atomic():
        for entry in conversations:
            person = get_or_create_person(team=team, external_id=entry.person)
            first = entry.messages[0].created_at
            last = max(m.created_at for m in entry.messages)
            conversation = (
                Conversation.objects.select_for_update()
                .filter(team=team, agent=agent, person=person, external_id=entry.external_id)
                .first()
            )
            if conversation is None:
                conversation = Conversation.objects.create(
                    team=team, agent=agent, person=person, external_id=entry.external_id,
                    started_at=entry.started_at or first, ended_at=last,
                )  # fmt: skip
                present: set[str] = set()
                order = 0
                report.conversations_created += 1
            else:
                rows = Message.objects.filter(team_id=team.pk, conversation=conversation)
                present = set(rows.exclude(external_id="").values_list("external_id", flat=True))
                order = rows.aggregate(last=Max("order"))["last"] or 0
                report.conversations_matched += 1
            new = [m for m in entry.messages if m.external_id not in present]
            report.messages_present += len(entry.messages) - len(new)
            messages = [
                Message(
                    team_id=team.pk,
                    conversation=conversation,
                    role=m.role,
                    content=m.content,
                    language=text_search_config(m.content),
                    order=order + position,
                    created_at=m.created_at,
                    external_id=m.external_id,
                )
                for position, m in enumerate(new, start=1)
            ]
            if messages:
                created_ids.extend(row.pk for row in Message.objects.bulk_create(messages, batch_size=1000))
                # Counted for the curator as record_message counts them.
                Conversation.objects.filter(pk=conversation.pk).update(
                    chars_since_curation=F("chars_since_curation") + sum(len(m.content) for m in new),
                    exchanges_since_curation=F("exchanges_since_curation")
                    + sum(m.role == Message.Role.ASSISTANT for m in new),
                    ended_at=Greatest(Coalesce(F("ended_at"), last), last),
                )
            report.messages_created += len(messages)
            if progress is not None:
                progress(len(entry.messages))
        job = ConversationImport.objects.create(
            team=team,
            agent=agent,
            lines=len(conversations),
            conversations_created=report.conversations_created,
            conversations_matched=report.conversations_matched,
            messages_created=report.messages_created,
            messages_present=report.messages_present,
            message_id_runs=id_runs(created_ids),
        )
        report.id = job.pk
        MESSAGES.schedule_many(created_ids)  # embedded after commit, in batches; the reconciler covers a gap
    return report


def id_runs(ids: list[int]) -> list[list[int]]:
    """[first, last] runs of consecutive ids: [1, 2, 3, 7] -> [[1, 3], [7, 7]]."""
    runs: list[list[int]] = []
    for pk in sorted(ids):
        if runs and pk == runs[-1][1] + 1:
            runs[-1][1] = pk
        else:
            runs.append([pk, pk])
    return runs
