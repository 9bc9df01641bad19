"""The chat of record: conversations, their messages in order, and the turns composed over them."""

from __future__ import annotations

from typing import Self

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Case, When
from pgvector.django import VectorField

from accounts.models import Agent, Person, Team
from memory.language import CONFIGS, ENGLISH, NEUTRAL
from memory.models import Note

SEARCH_CONFIGS = sorted(set(CONFIGS.values()))


class ConversationQuerySet(models.QuerySet["Conversation"]):
    def between(self, agent: Agent, person: Person) -> Self:
        """The conversations of this agent with this person, in their team only."""
        return self.filter(team_id=agent.team_id, agent=agent, person=person)


class Conversation(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="conversations")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="conversations")
    person = models.ForeignKey(Person, on_delete=models.CASCADE, related_name="conversations")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    summary = models.TextField(blank=True)
    summary_updated_at = models.DateTimeField(null=True, blank=True)
    summary_stale = models.BooleanField(
        default=False,
        help_text="A message the summary was built from was erased: the summary was cleared until it is rebuilt.",
    )
    # The curator's watermark: the last message order it has read, and what accrued since.
    curated_through = models.PositiveIntegerField(default=0)
    exchanges_since_curation = models.PositiveIntegerField(default=0)
    chars_since_curation = models.PositiveIntegerField(default=0)
    curation_pending = models.BooleanField(default=False)
    curation_requested_at = models.DateTimeField(null=True, blank=True)
    last_curated_at = models.DateTimeField(null=True, blank=True)
    last_curation_outcome = models.CharField(max_length=500, blank=True)
    external_id = models.CharField(
        max_length=100, blank=True, help_text="The caller's id for an imported conversation, if any."
    )
    # Raised by every erasure of its messages (conversations.services.erase_messages): a process
    # that keeps the conversation's words and vectors for search (conversations.kept_pairs) reads
    # it again when this changed. Appends need no counter: each takes the next order.
    erasures = models.PositiveIntegerField(default=0, db_default=0)  # db_default: see migration 0011

    objects = ConversationQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "agent", "person", "external_id"],
                condition=~models.Q(external_id=""),
                name="conversation_unique_external_id",
            ),
        ]
        indexes = [models.Index(fields=["team", "agent", "person", "-started_at"], name="conversation_participants")]

    def __str__(self) -> str:
        return f"{self.agent} with {self.person} ({self.started_at:%Y-%m-%d})"


class MessageQuerySet(models.QuerySet["Message"]):
    def not_erased(self) -> Self:
        """Messages that still say something: every read that shows or searches text uses this."""
        return self.filter(erased_at__isnull=True)


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user", "Person"
        ASSISTANT = "assistant", "Agent"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField()
    order = models.PositiveIntegerField()
    created_at = models.DateTimeField()
    external_id = models.CharField(max_length=100, blank=True, help_text="The caller's id for the message, if any.")
    # A tombstone: the content is blanked (and its vector dropped); the order and role stay.
    erased_at = models.DateTimeField(null=True, blank=True)
    language = models.CharField(
        max_length=32,
        default=ENGLISH,
        help_text="The text-search configuration its words are read with (memory.language.text_search_config).",
    )
    # Its words in its own language's configuration ('simple' for one Postgres cannot stem, or unclear).
    search = models.GeneratedField(
        expression=Case(
            *(When(language=config, then=SearchVector("content", config=config)) for config in SEARCH_CONFIGS),
            default=SearchVector("content", config=NEUTRAL),
        ),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    objects = MessageQuerySet.as_manager()

    class Meta:
        ordering = ["conversation", "order"]
        constraints = [
            models.UniqueConstraint(fields=["team", "conversation", "order"], name="message_unique_order"),
            models.CheckConstraint(
                condition=~models.Q(content="") | models.Q(erased_at__isnull=False), name="message_content_not_empty"
            ),
            models.CheckConstraint(
                condition=models.Q(erased_at__isnull=True) | models.Q(content=""), name="message_erased_is_blank"
            ),
        ]
        indexes = [
            GinIndex(fields=["search"], name="message_search_gin"),
            models.Index(fields=["team", "conversation", "-order"], name="message_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.role} #{self.order}: {'(erased)' if self.is_erased else self.content[:40]}"

    @property
    def is_erased(self) -> bool:
        return self.erased_at is not None


class MessageVector(models.Model):
    """A message's embedding under one model, for the meaning half of the conversation search.

    Mirrors memory.NoteVector: the column has no fixed width, and reads always filter on
    namespace, model and width, so vectors of different models never mix.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="vectors")
    namespace = models.CharField(max_length=64, help_text="The tenant the vector belongs to (team:<id>).")
    model = models.CharField(max_length=200)
    dim = models.PositiveIntegerField()
    embedding = VectorField()
    # When the vector was (re)computed: every store sets it, so it is not a creation time.
    embedded_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "message", "model"], name="messagevector_one_per_message_and_model"
            ),
        ]
        indexes = [models.Index(fields=["team", "namespace", "model", "dim"], name="messagevector_lookup")]

    def __str__(self) -> str:
        return f"{self.message_id} @ {self.model}"


class MessagePassage(models.Model):
    """The vector of one window of a long message (conversations.passages), under one model.

    A small model reads only the head of a 3,000-character message; each window is embedded on
    its own, and the meaning half scores the message by its closest window (or its head vector,
    a MessageVector). Stored before the message's own vector, in the same embedding task, so a
    message with a current MessageVector has its windows too. Dropped with the message's vector
    when it is erased, and with the message.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="passages")
    start = models.PositiveIntegerField(help_text="The window's first character in the message.")
    end = models.PositiveIntegerField(help_text="Just after its last character.")
    namespace = models.CharField(max_length=64, help_text="The tenant the vector belongs to (team:<id>).")
    model = models.CharField(max_length=200)
    dim = models.PositiveIntegerField()
    embedding = VectorField()
    embedded_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["message", "model", "start"], name="messagepassage_one_per_window"),
        ]

    def __str__(self) -> str:
        return f"{self.message_id} [{self.start}:{self.end}] @ {self.model}"


class Turn(models.Model):
    """One composed turn: the person's message, what the composer gave, and the agent's reply."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns")
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="+")
    reply = models.ForeignKey(Message, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    profile = models.CharField(max_length=16)
    costs = models.JSONField(default=dict)
    degraded = models.JSONField(default=list)
    notes_used = models.JSONField(default=list, help_text="Ids of the notes whose content was given.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["team", "conversation", "-created_at"], name="turn_recent")]

    def __str__(self) -> str:
        return f"turn {self.pk} of {self.conversation_id}"


class NoteSource(models.Model):
    """Where a note came from: a message it was learned from, or the turn it was written during.

    Erasing the note (memory.services.erase_note, by whichever path) erases its source messages too;
    a message's erasure leaves the row (it points at the tombstone). Deleting the note or the message
    takes the row with it.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    note = models.ForeignKey(Note, on_delete=models.CASCADE, related_name="sources")
    message = models.ForeignKey(Message, on_delete=models.CASCADE, null=True, blank=True, related_name="derived")
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, null=True, blank=True, related_name="derived")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(message__isnull=False) | models.Q(turn__isnull=False),
                name="notesource_names_a_message_or_turn",
            ),
            models.UniqueConstraint(
                fields=["team", "note", "message"],
                condition=models.Q(message__isnull=False),
                name="notesource_unique_message",
            ),
            models.UniqueConstraint(
                fields=["team", "note", "turn"], condition=models.Q(turn__isnull=False), name="notesource_unique_turn"
            ),
        ]
        indexes = [models.Index(fields=["team", "message"], name="notesource_team_message")]

    def __str__(self) -> str:
        return f"note {self.note_id} from message {self.message_id} / turn {self.turn_id}"


class ConversationImport(models.Model):
    """One accepted history import: what it recorded, for the job resource that shows embedding progress.

    The messages it created are kept as runs of consecutive ids ([first, last] pairs), which is
    compact for a bulk insert and exact: every id inside a run is one this import wrote. Nothing
    of the messages' content is kept here.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    lines = models.PositiveIntegerField(default=0)
    conversations_created = models.PositiveIntegerField(default=0)
    conversations_matched = models.PositiveIntegerField(default=0)
    messages_created = models.PositiveIntegerField(default=0)
    messages_present = models.PositiveIntegerField(default=0)
    message_id_runs = models.JSONField(default=list, help_text="[first, last] runs of the ids of the messages created.")

    class Meta:
        indexes = [models.Index(fields=["team", "agent", "-created_at"], name="conversationimport_recent")]

    def __str__(self) -> str:
        return f"import {self.pk}: {self.messages_created} messages"
