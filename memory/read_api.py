"""`GET /api/v1/reads`: the retrieval audit, for a team admin's key (memory.read_queries)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.authentication import request_api_key
from accounts.models import Agent, Person
from config.schema import error_responses
from memory.exceptions import InvalidArguments
from memory.models import Read
from memory.read_queries import ReadFilter, parse_time, read_out, read_tools, reads_of_team

NEEDS_ADMIN = "Listing what agents read needs an admin-capable API key (the audit spans every agent of the team)."


class RankedNoteOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    rank = serializers.IntegerField(help_text="1 for the best-ranked result.")


class RankedMessageOutput(RankedNoteOutput):
    conversation = serializers.IntegerField(help_text="The message's conversation; 0 if it was erased meanwhile.")


class ReadOutput(serializers.Serializer[Read]):
    id = serializers.IntegerField()
    tool = serializers.CharField(help_text="The read tool called, or turn for a composed turn.")
    agent = serializers.CharField(help_text="The slug of the agent that read.")
    person = serializers.CharField(help_text="The person's id.")
    query = serializers.CharField(help_text="The query as sent; empty for a turn, and once blanked by an erasure.")
    query_erased = serializers.BooleanField(help_text="The query was blanked: it returned something erased since.")
    turn = serializers.IntegerField(allow_null=True, help_text="The turn's id, for a turn.")
    as_of = serializers.DateTimeField(
        allow_null=True, help_text="The past moment a read asked about (its as_of argument); null for the present."
    )
    notes = RankedNoteOutput(many=True, help_text="Notes returned (a turn: whose content it was given), by rank.")
    messages = RankedMessageOutput(many=True, help_text="Messages returned (a turn: its passages), by rank.")
    note_count = serializers.IntegerField()
    message_count = serializers.IntegerField()
    degraded = serializers.ListField(child=serializers.CharField())
    latency_ms = serializers.FloatField()
    created_at = serializers.DateTimeField()

    def to_representation(self, instance: Read) -> dict[str, Any]:
        return read_out(instance)


class ReadListApi(ListAPIView[Read]):
    """What agents looked up about people, and what came back: ids and counts, never content."""

    serializer_class = ReadOutput

    @extend_schema(
        operation_id="reads_list",
        summary="The retrieval audit: every read about a person, newest first",
        parameters=[
            OpenApiParameter("person", OpenApiTypes.STR, description="The person's id."),
            OpenApiParameter("agent", OpenApiTypes.STR, description="The agent's slug."),
            OpenApiParameter("tool", OpenApiTypes.STR, description="A read tool's name, or turn."),
            OpenApiParameter("since", OpenApiTypes.DATETIME, description="Reads made at or after this time."),
            OpenApiParameter("until", OpenApiTypes.DATETIME, description="Reads made before this time."),
        ],
        responses={200: ReadOutput(many=True), **error_responses(403, 404)},
    )
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        if not request_api_key(request).can_admin:
            raise exceptions.PermissionDenied(NEEDS_ADMIN)
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Read]:
        team = request_api_key(self.request).team
        params = self.request.query_params
        person = agent = None
        if (external_id := params.get("person")) is not None:
            person = get_object_or_404(Person.objects.for_team(team), external_id=external_id)
        if (slug := params.get("agent")) is not None:
            agent = get_object_or_404(Agent.objects.for_team(team), slug=slug)
        tool = params.get("tool")
        if tool is not None and tool not in read_tools():
            raise InvalidArguments(f"tool must be one of {', '.join(read_tools())}.", field="tool")
        since = parse_time(raw, field="since") if (raw := params.get("since")) is not None else None
        until = parse_time(raw, field="until") if (raw := params.get("until")) is not None else None
        return reads_of_team(team, ReadFilter(person=person, agent=agent, tool=tool, since=since, until=until))
