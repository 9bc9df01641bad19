from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memory.models import Bank, Mute, Note, Proposal, Revision


class NoteOutput(serializers.ModelSerializer[Note]):
    bank = serializers.CharField(source="bank.address")
    person = serializers.CharField(source="bank.person.external_id", allow_null=True, default=None)

    class Meta:
        model = Note
        fields = [
            "id", "bank", "person", "key", "description", "content", "kind", "category", "scope_refs",
            "semantics", "source", "repetitions", "created_at", "updated_at", "expires_at",
        ]  # fmt: skip


class NoteAsOfOutput(NoteOutput):
    """A note as it stood at a past moment (GET /api/v1/notes?as_of=, context as_of): what the
    revision log keeps of it, without source or repetitions; created_at is its first logged write,
    updated_at its last rewrite by then."""

    as_of = serializers.SerializerMethodField(help_text="The moment asked about: the note as it stood then.")

    class Meta(NoteOutput.Meta):
        fields = [
            *(name for name in NoteOutput.Meta.fields if name not in ("source", "repetitions")),
            "as_of",
        ]

    @extend_schema_field(OpenApiTypes.DATETIME)
    def get_as_of(self, note: Note) -> str:
        return serializers.DateTimeField().to_representation(self.context["as_of"])


class ConsolidationOutput(serializers.Serializer[Bank]):
    pending = serializers.BooleanField(source="consolidation_pending")
    requested_at = serializers.DateTimeField(source="consolidation_requested_at", allow_null=True)
    last_run_at = serializers.DateTimeField(source="last_consolidation_at", allow_null=True)
    last_outcome = serializers.CharField(source="last_consolidation_outcome")


class BankOutput(serializers.ModelSerializer[Bank]):
    id = serializers.CharField(source="address")
    person = serializers.CharField(source="person.external_id", allow_null=True, default=None)
    count = serializers.IntegerField(source="note_count")
    full = serializers.BooleanField(source="is_full", required=False)
    consolidation = ConsolidationOutput(source="*")

    class Meta:
        model = Bank
        fields = [
            "id", "kind", "person", "scope", "policy", "count", "soft_limit", "hard_limit", "capacity",
            "full", "full_since", "consolidation",
        ]  # fmt: skip


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": True,
        "description": "The note's fields (or the attempted write) on this side of the change; null when there is "
        "none, or when the content was erased.",
    }
)
class NoteStateField(serializers.JSONField):
    pass


class RevisionOutput(serializers.ModelSerializer[Revision]):
    bank = serializers.CharField(source="bank_ref")
    note = serializers.IntegerField(source="note_id", allow_null=True)
    before = NoteStateField(allow_null=True)
    after = NoteStateField(allow_null=True)

    class Meta:
        model = Revision
        fields = [
            "id", "bank", "note", "note_key", "action", "actor", "actor_ref", "before", "after", "reason",
            "request_id", "erased", "created_at",
        ]  # fmt: skip


class MuteOutput(serializers.Serializer[Mute]):
    id = serializers.IntegerField()
    person = serializers.CharField(source="person.external_id")
    agent = serializers.CharField(source="agent.slug")
    category = serializers.CharField(allow_null=True, help_text="The muted category; null for a note's mute.")
    note = serializers.IntegerField(
        source="note_id", allow_null=True, help_text="The muted note; null for a category's."
    )
    created_at = serializers.DateTimeField()

    def to_representation(self, instance: Mute) -> dict[str, Any]:
        data = super().to_representation(instance)
        data["category"] = data["category"] or None
        return data


class ProposalOutput(serializers.Serializer[Proposal]):
    """A write waiting for (or decided on) the person's review. A decided proposal's words are blank:
    a kept one's live in its note (`note`), a declined or expired one's are gone."""

    id = serializers.IntegerField()
    person = serializers.CharField(source="person.external_id")
    agent = serializers.CharField(source="agent.slug", allow_null=True, default=None)
    writer = serializers.CharField(source="actor", help_text="agent (a tool call) or curator.")
    operation = serializers.ChoiceField(choices=Proposal.Operation.choices)
    status = serializers.ChoiceField(choices=Proposal.Status.choices)
    bank = serializers.CharField(source="bank_ref")
    note = serializers.IntegerField(
        source="note_id", allow_null=True, help_text="An edit's note; once kept, the note it wrote."
    )
    key = serializers.CharField()
    description = serializers.CharField()
    content = serializers.CharField()
    find = serializers.CharField(help_text="An edit's text to replace; empty otherwise.")
    kind = serializers.CharField()
    category = serializers.CharField()
    source_messages = serializers.ListField(child=serializers.IntegerField(), help_text="Messages it was learned from.")
    created_at = serializers.DateTimeField()
    expires_at = serializers.SerializerMethodField(help_text="When it expires unkept; null once decided.")
    decided_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_expires_at(self, proposal: Proposal) -> str | None:
        if proposal.status != Proposal.Status.PENDING:
            return None
        expires_at: datetime = proposal.created_at + timedelta(days=settings.PROPOSAL_DAYS)
        return serializers.DateTimeField().to_representation(expires_at)
