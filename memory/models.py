"""Banks, notes, revisions, the ontology and mutes.

Caps and identity are enforced twice: by the write path (which refuses with a clear error and
logs the refusal) and by database constraints (so no other path can ever store what must not be).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Self

from django.contrib.auth.models import User
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Exists, OuterRef
from django.db.models.fields.json import KT
from django.db.models.functions import Length
from pgvector.django import VectorField

from accounts.models import Agent, Membership, Person, Team
from memory.language import ENGLISH, note_config

models.CharField.register_lookup(Length)
models.TextField.register_lookup(Length)

KEY_MAX = 64
DESCRIPTION_MAX = 200
CONTENT_MAX = 2000
KEY_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"


class BankQuerySet(models.QuerySet["Bank"]):
    def about_user(self, user: User) -> Self:
        """Banks that hold memories about the people this login may open the lens of: their private
        and global banks, and the shared banks of the scopes they have a private bank in."""
        own_private_in_scope = Bank.objects.filter(
            team=OuterRef("team"), kind=Bank.Kind.PRIVATE, scope=OuterRef("scope"), person__user=user
        )
        # Team admins see every bank of their team.
        admin_of = Membership.objects.filter(user=user, role=Membership.Role.ADMIN).values("team")
        return self.filter(
            models.Q(person__user=user)
            | (models.Q(kind=Bank.Kind.SHARED, scope__gt="") & Exists(own_private_in_scope))
            | models.Q(team__in=admin_of)
        )


class Bank(models.Model):
    class Kind(models.TextChoices):
        PRIVATE = "private", "Private (this person in this scope)"
        SHARED = "shared", "Shared (everyone in the scope)"
        GLOBAL = "global", "Global (this person everywhere)"

    class Policy(models.TextChoices):
        CURATED = "curated", "Curated (limits, consolidation, FULL latch)"
        BOUNDED = "bounded", "Bounded (fixed capacity, decay, scored eviction)"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="banks")
    address = models.CharField(max_length=500, help_text="user:<person>:<scope>, scope:<scope> or user:<person>.")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    person = models.ForeignKey(Person, on_delete=models.CASCADE, null=True, blank=True, related_name="banks")
    scope = models.CharField(max_length=200, blank=True)
    policy = models.CharField(max_length=16, choices=Policy.choices, default=Policy.CURATED)
    soft_limit = models.PositiveIntegerField()
    hard_limit = models.PositiveIntegerField()
    capacity = models.PositiveIntegerField()
    is_full = models.BooleanField(default=False)
    full_since = models.DateTimeField(null=True, blank=True)
    consolidation_pending = models.BooleanField(default=False)
    consolidation_requested_at = models.DateTimeField(null=True, blank=True)
    last_consolidation_at = models.DateTimeField(null=True, blank=True)
    last_consolidation_outcome = models.CharField(max_length=500, blank=True)
    # Raised by every change the revision log records (a note written, removed or erased, a latch,
    # new settings) and by a mute of someone who reads the bank, in the same transaction: what a
    # process keeps of the bank (memory.queries' turn notes and digest) is valid for one version.
    version = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = BankQuerySet.as_manager()

    class Meta:
        # By the team's id, not the team: ordering by a related model joins its row into every
        # query that keeps the default ordering, and into the lock of every select_for_update
        # without of= (a bank's lock then held the whole team's writes).
        ordering = ["team_id", "address"]
        constraints = [
            models.UniqueConstraint(fields=["team", "address"], name="bank_unique_id_per_team"),
            models.CheckConstraint(
                condition=models.Q(hard_limit__gte=models.F("soft_limit")), name="bank_hard_limit_at_least_soft"
            ),
            models.CheckConstraint(condition=models.Q(capacity__gte=1), name="bank_capacity_positive"),
            models.CheckConstraint(
                condition=(
                    models.Q(kind="shared", person__isnull=True)
                    | models.Q(kind__in=["private", "global"], person__isnull=False)
                ),
                name="bank_person_matches_kind",
            ),
        ]
        indexes = [models.Index(fields=["team", "person"], name="bank_team_person")]

    def __str__(self) -> str:
        return self.address

    @property
    def limit(self) -> int:
        """The number a person compares the count with: capacity when bounded, else the soft limit."""
        return self.capacity if self.policy == self.Policy.BOUNDED else self.soft_limit


class NoteQuerySet(models.QuerySet["Note"]):
    def for_team(self, team: Team) -> Self:
        return self.filter(team=team)

    def live(self, now: object) -> Self:
        """Notes that still apply: no expiry, or an expiry in the future."""
        return self.filter(models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now))

    def about_user(self, user: User) -> Self:
        """Notes in the banks this login may see in its Memory lens (see BankQuerySet.about_user)."""
        return self.filter(bank__in=Bank.objects.about_user(user))

    def changeable_by(self, user: User) -> Self:
        """Notes this login may edit or delete, and whose earlier versions it may read, in the lens:
        those about its people, except that a shared bank's notes (everyone in the scope wrote them)
        are a team admin's to change."""
        admin_of = Membership.objects.filter(user=user, role=Membership.Role.ADMIN).values("team")
        return self.about_user(user).filter(~models.Q(bank__kind=Bank.Kind.SHARED) | models.Q(team__in=admin_of))

    def unmuted_for(self, agent: Agent, *, person: Person | None = None) -> Self:
        """Notes this agent may read: every read made for an agent goes through here.

        A note is hidden when the person its bank is about muted it (its category, or the note
        itself) for this agent; with `person` (a read on that person's behalf, e.g. a turn), also
        when that person muted it, which is how a mute reaches the shared banks of their scopes.
        """
        mutes = Mute.objects.filter(team=OuterRef("team"), agent=agent).filter(
            models.Q(note=OuterRef("pk")) | models.Q(note__isnull=True, category=OuterRef("category"))
        )
        hidden = Exists(mutes.filter(person=OuterRef("bank__person")))
        if person is None:
            return self.exclude(hidden)
        return self.exclude(hidden | Exists(mutes.filter(person=person)))


class Note(models.Model):
    class Kind(models.TextChoices):
        IDENTITY = "identity", "Identity"
        PREFERENCE = "preference", "Preference"
        FACT = "fact", "Fact"
        EPHEMERAL = "ephemeral", "Ephemeral"
        PAGE = "page", "Page"
        DAILY = "daily", "Daily"

    class Source(models.TextChoices):
        IMPORT = "import", "Import"
        REMEMBER = "remember", "Remember tool"
        CURATOR = "curator", "Curator"
        CONSOLIDATION = "consolidation", "Consolidation"
        OWNER = "owner", "Owner"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="notes")
    bank = models.ForeignKey(Bank, on_delete=models.CASCADE, related_name="notes")
    key = models.CharField(max_length=KEY_MAX)
    description = models.CharField(max_length=DESCRIPTION_MAX)
    content = models.TextField()
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.FACT)
    category = models.CharField(max_length=64, blank=True)
    scope_refs = models.JSONField(default=dict, blank=True)
    semantics = models.JSONField(default=list, blank=True)
    source = models.CharField(max_length=16, choices=Source.choices)
    repetitions = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField(help_text="Moves only when the note is rewritten, never on read.")
    expires_at = models.DateTimeField(null=True, blank=True)
    language = models.CharField(
        max_length=32,
        default=ENGLISH,
        help_text="The text-search configuration recall reads its words with (memory.language.note_config).",
    )

    objects = NoteQuerySet.as_manager()

    class Meta:
        # Joins the bank (sorted by its address): the write path's lookups by a unique key order by pk.
        ordering = ["bank", "key"]
        constraints = [
            models.UniqueConstraint(fields=["team", "bank", "key"], name="note_unique_key_per_bank"),
            models.CheckConstraint(condition=models.Q(key__regex=KEY_PATTERN), name="note_key_is_slug"),
            models.CheckConstraint(condition=models.Q(key__length__lte=KEY_MAX), name="note_key_cap"),
            models.CheckConstraint(
                condition=models.Q(description__length__lte=DESCRIPTION_MAX), name="note_description_cap"
            ),
            models.CheckConstraint(condition=models.Q(content__length__lte=CONTENT_MAX), name="note_content_cap"),
            models.CheckConstraint(condition=models.Q(repetitions__gte=1), name="note_repetitions_positive"),
        ]
        indexes = [
            models.Index(fields=["team", "bank", "updated_at"], name="note_team_bank_updated"),
            models.Index(
                fields=["team", "expires_at"], name="note_team_expiry", condition=models.Q(expires_at__isnull=False)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.bank.address}:{self.key}"

    def save(self, **kwargs: Any) -> None:
        """Every write of a note's text also reads its language anew (recall reads its words in it)."""
        update_fields = kwargs.get("update_fields")
        if update_fields is None or {"description", "content"} & set(update_fields):
            self.language = note_config(f"{self.description}\n{self.content}")
            if update_fields is not None:
                kwargs["update_fields"] = {*update_fields, "language"}
        super().save(**kwargs)

    @property
    def identity(self) -> str:
        return f"{self.bank.address}:{self.key}"

    @classmethod
    def from_snapshot(
        cls,
        snapshot: dict[str, Any],
        *,
        note_id: int,
        team_id: int,
        bank: Bank,
        created_at: datetime,
        updated_at: datetime,
    ) -> Note:
        """The note a revision's snapshot describes, unsaved and never to be saved: a past state
        (memory.as_of). Source and repetitions are not in a snapshot, so they are left empty."""
        expires_at = snapshot.get("expires_at")
        return cls(
            pk=note_id,
            team_id=team_id,
            bank=bank,
            key=snapshot.get("key") or "",
            description=snapshot.get("description") or "",
            content=snapshot.get("content") or "",
            kind=snapshot.get("kind") or cls.Kind.FACT,
            category=snapshot.get("category") or "",
            scope_refs=snapshot.get("scope_refs") or {},
            semantics=snapshot.get("semantics") or [],
            source="",
            created_at=created_at,
            updated_at=updated_at,
            expires_at=datetime.fromisoformat(expires_at) if isinstance(expires_at, str) else None,
        )

    def snapshot(self) -> dict[str, object]:
        """What a revision keeps of this note."""
        return {
            "key": self.key,
            "description": self.description,
            "content": self.content,
            "kind": self.kind,
            "category": self.category,
            "scope_refs": self.scope_refs,
            "semantics": self.semantics,
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
        }


class RevisionQuerySet(models.QuerySet["Revision"]):
    def unmuted_for(self, agent: Agent) -> Self:
        """Revisions this agent may read: none of a note the revision's person muted for this agent
        (the note itself, or its category before or after the change), so the log does not leak
        what a mute hides."""
        mutes = Mute.objects.filter(team=OuterRef("team"), person=OuterRef("person"), agent=agent)
        return (
            self.alias(category_before=KT("before__category"), category_after=KT("after__category"))
            .exclude(Exists(mutes.filter(note__isnull=True, category=OuterRef("category_before"))))
            .exclude(Exists(mutes.filter(note__isnull=True, category=OuterRef("category_after"))))
            .exclude(Exists(mutes.filter(note_id=OuterRef("note_id"))))
        )


class Revision(models.Model):
    class Action(models.TextChoices):
        CREATE = "create", "Created"
        UPDATE = "update", "Updated"
        APPEND = "append", "Appended"
        DELETE = "delete", "Deleted"
        MERGE = "merge", "Merged"
        EVICT = "evict", "Evicted"
        REFUSED = "refused", "Refused"
        LATCH = "latch", "Bank state"
        PROPOSE = "propose", "Proposed for review"
        KEEP = "keep", "Kept on review"
        REJECT = "reject", "Not kept on review"

    class Actor(models.TextChoices):
        AGENT = "agent", "Agent"
        CURATOR = "curator", "Curator"
        CONSOLIDATION = "consolidation", "Consolidation"
        OWNER = "owner", "Owner"
        IMPORT = "import", "Import"
        POLICY = "policy", "Bank policy"
        EXPIRY = "expiry", "Expiry"
        ADMIN = "admin", "Admin"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="revisions")
    bank = models.ForeignKey(Bank, on_delete=models.SET_NULL, null=True, blank=True, related_name="revisions")
    bank_ref = models.CharField(max_length=500, help_text="The bank id, kept even if the bank goes.")
    person = models.ForeignKey(Person, on_delete=models.CASCADE, null=True, blank=True, related_name="revisions")
    note_key = models.CharField(max_length=200, blank=True)
    note_id = models.BigIntegerField(null=True, blank=True, help_text="The note's id; it may no longer exist.")
    action = models.CharField(max_length=16, choices=Action.choices)
    actor = models.CharField(max_length=16, choices=Actor.choices)
    actor_ref = models.CharField(max_length=200, blank=True, help_text="Which agent, user or task.")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True)
    request_id = models.CharField(max_length=100, blank=True)
    erased = models.BooleanField(default=False, help_text="The content was erased on the person's request.")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = RevisionQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["team", "note_id", "-created_at"], name="revision_team_note"),
            models.Index(fields=["team", "bank", "-created_at"], name="revision_team_bank"),
            models.Index(fields=["team", "person", "-created_at"], name="revision_team_person"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.bank_ref}:{self.note_key} by {self.actor}"


class OntologyNode(models.Model):
    class Kind(models.TextChoices):
        DOMAIN = "domain", "Domain"
        RELATIONSHIP = "relationship", "Relationship"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="ontology")
    node_id = models.CharField(max_length=100, help_text="The exact id notes and turns use.")
    label = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.DOMAIN)
    parent = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True, related_name="children")
    source = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="+", help_text="Relationship endpoint."
    )
    target = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="+", help_text="Relationship endpoint."
    )
    glossary = models.TextField(blank=True, help_text="Words recall should associate with this tag.")

    class Meta:
        ordering = ["team", "node_id"]
        verbose_name = "ontology node"
        constraints = [
            models.UniqueConstraint(fields=["team", "node_id"], name="ontology_unique_id_per_team"),
            models.CheckConstraint(
                condition=models.Q(kind="domain", source__isnull=True, target__isnull=True)
                | models.Q(kind="relationship", source__isnull=False, target__isnull=False),
                name="ontology_endpoints_only_on_relationships",
            ),
        ]

    def __str__(self) -> str:
        return self.node_id


class Mute(models.Model):
    """A person's choice that one agent stops using one category, or one note, of what it knows
    about them: the notes, the messages they were learned from and the summaries built from those."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    person = models.ForeignKey(Person, on_delete=models.CASCADE, related_name="mutes")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="mutes")
    category = models.CharField(max_length=64, blank=True)
    # A deleted note takes its mutes with it: there is nothing left to withhold but its sources,
    # which then are no note's sources.
    note = models.ForeignKey("Note", on_delete=models.CASCADE, null=True, blank=True, related_name="mutes")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(note__isnull=True) & ~models.Q(category=""))
                | (models.Q(note__isnull=False) & models.Q(category="")),
                name="mute_category_xor_note",
            ),
            models.UniqueConstraint(
                fields=["team", "person", "agent", "category"],
                condition=models.Q(note__isnull=True),
                name="mute_unique_per_agent_category",
            ),
            models.UniqueConstraint(
                fields=["team", "person", "agent", "note"],
                condition=models.Q(note__isnull=False),
                name="mute_unique_per_agent_note",
            ),
        ]
        indexes = [models.Index(fields=["team", "agent"], name="mute_team_agent")]

    def __str__(self) -> str:
        return f"{self.person} muted {self.category or f'note {self.note_id}'} for {self.agent}"


class NoteVector(models.Model):
    """A note's embedding under one model. Matched only when namespace, model and width all agree.

    The column has no fixed width, so vectors of different models can coexist while a model
    change is being reindexed; queries always filter on model and dim, so they never mix.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    note = models.ForeignKey(Note, on_delete=models.CASCADE, related_name="vectors")
    namespace = models.CharField(max_length=64, help_text="The tenant the vector belongs to (team:<id>).")
    model = models.CharField(max_length=200)
    dim = models.PositiveIntegerField()
    text_hash = models.CharField(max_length=64, help_text="sha256 of the text that was embedded.")
    embedding = VectorField()
    # When the vector was (re)computed: every store sets it, so it is not a creation time.
    embedded_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "note", "model"], name="notevector_one_per_note_and_model"),
        ]
        indexes = [models.Index(fields=["team", "namespace", "model", "dim"], name="notevector_lookup")]

    def __str__(self) -> str:
        return f"{self.note_id} @ {self.model}"


class ReadQuerySet(models.QuerySet["Read"]):
    def for_team(self, team: Team) -> Self:
        return self.filter(team=team)

    def returning_notes(self, note_ids: list[int]) -> Self:
        """Reads that returned (or gave a turn) any of these notes."""
        return self.filter(notes__overlap=note_ids)

    def returning_messages(self, message_ids: list[int]) -> Self:
        """Reads that returned (or gave a turn as passages) any of these messages."""
        return self.filter(messages__overlap=message_ids)


class Read(models.Model):
    """One read about a person: a read tool's call, or a composed turn (the retrieval audit).

    It keeps what was asked and which notes and messages came back, in rank order (the first id
    ranked first), never what they said: the content stays in the notes and messages, so erasing
    them erases it here too. A turn's query is the person's message itself, so a turn keeps its
    id (`turn_id`), not its text. See memory.services.reads for how rows are written.
    """

    TURN = "turn"  # the tool name of a composed turn

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    person = models.ForeignKey(Person, on_delete=models.CASCADE, related_name="+")
    tool = models.CharField(max_length=64, help_text="The read tool called, or turn.")
    query = models.TextField(blank=True, help_text="The query as the agent sent it; blank for a turn.")
    query_erased = models.BooleanField(
        default=False, help_text="The query was blanked: it returned a note or message that was erased since."
    )
    turn_id = models.BigIntegerField(null=True, blank=True, help_text="The composed turn's id; it may no longer exist.")
    as_of = models.DateTimeField(
        null=True, blank=True, help_text="The past moment the read asked about (as_of); null for the present."
    )
    notes = ArrayField(models.BigIntegerField(), default=list, blank=True, help_text="Note ids returned, best first.")
    messages = ArrayField(
        models.BigIntegerField(), default=list, blank=True, help_text="Message ids returned, best first."
    )
    conversations = ArrayField(
        models.BigIntegerField(), default=list, blank=True, help_text="The conversation of each message, in order."
    )
    note_count = models.PositiveIntegerField(default=0)
    message_count = models.PositiveIntegerField(default=0)
    degraded = ArrayField(models.CharField(max_length=32), default=list, blank=True)
    latency_ms = models.FloatField(help_text="How long the read took, in milliseconds.")
    request_id = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(help_text="When the read was made (not when this row was written).")

    objects = ReadQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["team", "person", "-created_at"], name="read_team_person"),
            models.Index(fields=["team", "agent", "-created_at"], name="read_team_agent"),
            models.Index(fields=["team", "-created_at"], name="read_team_time"),
            # The retention sweep deletes by age across teams.
            models.Index(fields=["created_at"], name="read_age"),
            # Erasing a note or message finds the reads that returned it.
            GinIndex(fields=["notes"], name="read_notes_gin"),
            GinIndex(fields=["messages"], name="read_messages_gin"),
        ]

    def __str__(self) -> str:
        return f"{self.tool} by {self.agent_id} about {self.person_id} at {self.created_at:%Y-%m-%d %H:%M}"


class ProposalQuerySet(models.QuerySet["Proposal"]):
    def for_team(self, team: Team) -> Self:
        return self.filter(team=team)

    def pending(self) -> Self:
        return self.filter(status=Proposal.Status.PENDING)


class Proposal(models.Model):
    """A write an agent or the curator made about a person who asked to review what is kept.

    It holds the write's arguments, not a note: no read (turns, recall, search, the digest, exports)
    looks at this table. Keeping it runs the write through the one write path; not keeping it (or
    its expiry) blanks every text it held and keeps the row as the decision's tombstone. A kept one
    is blanked too: its words now live in the note, whose erasure must not miss a copy here.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for review"
        KEPT = "kept", "Kept"
        REJECTED = "rejected", "Not kept"
        EXPIRED = "expired", "Expired unkept"

    class Operation(models.TextChoices):
        REMEMBER = "remember", "Remember a note"
        APPEND = "append", "Add to a category's note"
        EDIT = "edit", "Change a note"
        DAILY = "daily", "Add to the day's note"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    person = models.ForeignKey(Person, on_delete=models.CASCADE, related_name="proposals")
    agent = models.ForeignKey(Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    actor = models.CharField(max_length=16, choices=Revision.Actor.choices, help_text="Who wrote: agent or curator.")
    actor_ref = models.CharField(max_length=200, blank=True)
    operation = models.CharField(max_length=16, choices=Operation.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    bank = models.CharField(max_length=16, choices=Bank.Kind.choices, help_text="The bank the writer chose.")
    bank_ref = models.CharField(max_length=500, help_text="The id of the bank it would go to.")
    scope = models.CharField(max_length=200, blank=True)
    note_id = models.BigIntegerField(
        null=True, blank=True, help_text="An edit's note; once kept, the note it wrote. It may no longer exist."
    )
    key = models.CharField(max_length=KEY_MAX, blank=True)
    description = models.CharField(max_length=DESCRIPTION_MAX, blank=True)
    content = models.TextField(blank=True, help_text="The note's content, the observation, or an edit's new text.")
    find = models.TextField(blank=True, help_text="An edit's text to replace (find_replace); empty for replace.")
    kind = models.CharField(max_length=16, choices=Note.Kind.choices, default=Note.Kind.FACT)
    category = models.CharField(max_length=64, blank=True)
    details = models.JSONField(
        default=dict, blank=True, help_text="The rest of the write: scope_refs, semantics, expires_at, edit mode."
    )
    source_messages = ArrayField(
        models.BigIntegerField(), default=list, blank=True, help_text="Ids of the messages it was learned from."
    )
    turn_id = models.BigIntegerField(null=True, blank=True, help_text="The turn it was written during.")
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.CharField(max_length=200, blank=True, help_text="Who kept or declined it; expiry for expiry.")

    objects = ProposalQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status="pending", decided_at__isnull=True)
                | (~models.Q(status="pending") & models.Q(decided_at__isnull=False)),
                name="proposal_decided_unless_pending",
            ),
            models.CheckConstraint(
                condition=models.Q(status="pending")
                | models.Q(key="", description="", content="", find="", category="", details={}),
                name="proposal_blank_once_decided",
            ),
        ]
        indexes = [
            models.Index(fields=["team", "person", "status", "created_at"], name="proposal_team_person"),
            models.Index(fields=["created_at"], name="proposal_pending_age", condition=models.Q(status="pending")),
        ]

    def __str__(self) -> str:
        return f"proposal {self.pk} ({self.status}) about {self.person_id}"
