"""The agent-facing API for conversations and turns. Every view is the calling agent's only."""

from __future__ import annotations

from django.conf import settings
from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import request_api_key
from accounts.models import Person
from accounts.services import get_or_create_person
from accounts.usage import count_usage
from config.exceptions import DomainError
from config.fields import IdentifierField, IntegerField, TextField
from config.schema import error_responses
from conversations import history_import, queries, replica_reads, services
from conversations.composer import PROFILES, Profile, composition_to_json
from conversations.exceptions import InvalidMessage
from conversations.models import Conversation, ConversationImport, Message
from memory.queries import TurnContext


class ConversationOutput(serializers.ModelSerializer[Conversation]):
    person = serializers.CharField(source="person.external_id")
    agent = serializers.CharField(source="agent.slug")

    class Meta:
        model = Conversation
        fields = [
            "id", "person", "agent", "started_at", "ended_at", "summary", "summary_updated_at", "summary_stale",
            "curation_pending", "last_curated_at", "last_curation_outcome", "external_id",
        ]  # fmt: skip


class MessageOutput(serializers.ModelSerializer[Message]):
    class Meta:
        model = Message
        fields = ["id", "conversation", "role", "content", "order", "created_at", "external_id", "erased_at"]


@extend_schema_field({"type": "string", "maxLength": settings.MESSAGE_MAX_CHARS})
class MessageText(TextField):
    """A message's text. record_message enforces the cap (422 too_long); the schema shows it."""


def _conversations(request: Request) -> QuerySet[Conversation]:
    key = request_api_key(request)
    return Conversation.objects.filter(team=key.team, agent=key.agent).select_related("person", "agent")


class ConversationListCreateApi(ListAPIView[Conversation]):
    serializer_class = ConversationOutput

    class ConversationCreateInput(serializers.Serializer[None]):
        person = IdentifierField(max_length=200)

    def get_queryset(self) -> QuerySet[Conversation]:
        conversations = _conversations(self.request).order_by("-started_at", "-pk")
        if external_id := self.request.query_params.get("person"):
            person = get_object_or_404(
                Person.objects.for_team(request_api_key(self.request).team), external_id=external_id
            )
            conversations = conversations.filter(person=person)
        return conversations

    @extend_schema(
        operation_id="conversations_list",
        parameters=[OpenApiParameter("person", OpenApiTypes.STR)],
        responses={200: ConversationOutput(many=True), **error_responses(404)},
    )
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        operation_id="conversations_create",
        request=ConversationCreateInput,
        responses={201: ConversationOutput, **error_responses(404, 422)},
    )
    def post(self, request: Request) -> Response:
        data = self.ConversationCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        key = request_api_key(request)
        person = get_or_create_person(team=key.team, external_id=data.validated_data["person"])
        conversation = services.start_conversation(team=key.team, agent=key.agent, person=person)
        return Response(ConversationOutput(conversation).data, status=status.HTTP_201_CREATED)


class ConversationDetailApi(APIView):
    @extend_schema(operation_id="conversations_retrieve", responses=ConversationOutput)
    def get(self, request: Request, conversation_id: int) -> Response:
        return Response(ConversationOutput(get_object_or_404(_conversations(request), pk=conversation_id)).data)

    @extend_schema(operation_id="conversations_destroy", responses={204: None})
    def delete(self, request: Request, conversation_id: int) -> Response:
        services.delete_conversation(conversation=get_object_or_404(_conversations(request), pk=conversation_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConversationEndApi(APIView):
    """Close the conversation; the curator reads whatever it has not read yet."""

    @extend_schema(operation_id="conversations_end", request=None, responses=ConversationOutput)
    def post(self, request: Request, conversation_id: int) -> Response:
        conversation = services.end_conversation(
            conversation=get_object_or_404(_conversations(request), pk=conversation_id)
        )
        return Response(ConversationOutput(conversation).data)


class MessageListCreateApi(ListAPIView[Message]):
    serializer_class = MessageOutput

    class MessageCreateInput(serializers.Serializer[None]):
        role = serializers.ChoiceField(choices=Message.Role.choices)
        content = MessageText()
        external_id = IdentifierField(max_length=100, required=False, allow_blank=True)

    conversation: Conversation

    def get_queryset(self) -> QuerySet[Message]:
        return Message.objects.filter(team=request_api_key(self.request).team, conversation=self.conversation).order_by(
            "order"
        )

    @extend_schema(operation_id="conversations_messages_list")
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        # Found on the primary (with its person, in the same query), then the page read from a
        # replica fresh for the person, or from the primary (conversations.replica_reads).
        self.conversation = get_object_or_404(
            _conversations(request).select_related("person"), pk=kwargs["conversation_id"]
        )
        with replica_reads.reading_for(self.conversation.person):
            return super().get(request, *args, **kwargs)

    @extend_schema(
        operation_id="conversations_messages_create",
        request=MessageCreateInput,
        responses={201: MessageOutput, **error_responses(422)},
    )
    def post(self, request: Request, conversation_id: int) -> Response:
        key = request_api_key(request)
        data = self.MessageCreateInput(data=request.data)
        try:
            data.is_valid(raise_exception=True)
            # Found and written in one round trip: no lookup of the conversation first.
            message = services.record_agent_message(
                team=key.team, agent=key.agent, conversation_id=conversation_id, **data.validated_data
            )
        except (serializers.ValidationError, DomainError):
            get_object_or_404(_conversations(request), pk=conversation_id)  # an unknown conversation is 404 first
            raise
        if message is None:
            raise Http404("No Conversation matches the given query.")  # as get_object_or_404 words it
        return Response(MessageOutput(message).data, status=status.HTTP_201_CREATED)


class MessageDetailApi(APIView):
    """Deleting a message erases it: a tombstone keeps its order and role; its text, vector and the
    summary it fed are gone."""

    @extend_schema(operation_id="conversations_messages_destroy", responses={204: None})
    def delete(self, request: Request, conversation_id: int, message_id: int) -> Response:
        conversation = get_object_or_404(_conversations(request), pk=conversation_id)
        message = get_object_or_404(
            Message.objects.filter(team=request_api_key(request).team, conversation=conversation), pk=message_id
        )
        services.erase_message(message=message)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ContextInput(serializers.Serializer[None]):
    refs = serializers.DictField(child=serializers.ListField(child=IdentifierField()), required=False)
    tags = serializers.ListField(child=IdentifierField(), required=False)


TurnOutput = inline_serializer(
    "TurnComposition",
    {
        "turn": serializers.IntegerField(),
        "conversation": serializers.IntegerField(),
        "blocks": serializers.ListField(child=serializers.DictField()),
        "messages": serializers.ListField(child=serializers.DictField()),
        "costs": serializers.DictField(child=serializers.IntegerField()),
        "ceiling": serializers.IntegerField(),
        "degraded": serializers.ListField(child=serializers.CharField()),
        "notes_used": serializers.ListField(child=serializers.IntegerField()),
    },
)


class TurnCreateApi(APIView):
    """Record the person's message and compose what the agent is given for this turn."""

    class TurnCreateInput(serializers.Serializer[None]):
        person = IdentifierField(max_length=200)
        message = MessageText()
        conversation = IntegerField(required=False, min_value=1)
        scope = IdentifierField(max_length=200, required=False, allow_blank=True)
        # Not Field.context: DRF's serializer metaclass takes declared fields off the class.
        context = ContextInput(required=False)  # type: ignore[assignment]  # the stubs cannot model that
        profile = serializers.ChoiceField(choices=PROFILES, default=Profile.FULL.value)
        persona = TextField(required=False, allow_blank=True)

    @extend_schema(
        operation_id="turns_create",
        request=TurnCreateInput,
        responses={201: TurnOutput, **error_responses(404, 422, 503)},
    )
    def post(self, request: Request) -> Response:
        data = self.TurnCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        context = values.get("context") or {}
        key = request_api_key(request)
        result = services.take_turn(
            team=key.team,
            agent=key.agent,
            person=get_or_create_person(team=key.team, external_id=values["person"]),
            message=values["message"],
            conversation_id=values.get("conversation"),
            scope=values.get("scope", ""),
            context=TurnContext(refs=context.get("refs", {}), tags=context.get("tags", [])),
            profile=values["profile"],
            persona=values.get("persona"),
        )
        count_usage(team_id=key.team_id, agent_id=key.agent_id, turns=1)
        body = composition_to_json(
            result.composition, turn_id=result.turn.pk, conversation_id=result.turn.conversation_id
        )
        return Response(body, status=status.HTTP_201_CREATED)


class TurnReplyApi(APIView):
    class TurnReplyInput(serializers.Serializer[None]):
        content = MessageText()

    @extend_schema(
        operation_id="turns_reply",
        request=TurnReplyInput,
        responses={201: MessageOutput, **error_responses(409, 422)},
    )
    def post(self, request: Request, turn_id: int) -> Response:
        key = request_api_key(request)
        turn = queries.agents_turn(team_id=key.team_id, agent=key.agent, turn_id=turn_id)
        if turn is None:
            raise Http404("No such turn of this agent's.")
        data = self.TurnReplyInput(data=request.data)
        data.is_valid(raise_exception=True)
        reply = services.record_reply(turn=turn, content=data.validated_data["content"])
        return Response(MessageOutput(reply).data, status=status.HTTP_201_CREATED)


class ImportJobOutput(serializers.Serializer[queries.ImportProgress]):
    """A history import: what it recorded, what it skipped, and how far embedding has come."""

    id = serializers.IntegerField(source="job.pk")
    url = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField(source="job.created_at")
    status = serializers.ChoiceField(choices=["embedding", "done", "not_embedding"])
    lines = serializers.IntegerField(source="job.lines")
    conversations_created = serializers.IntegerField(source="job.conversations_created")
    conversations_matched = serializers.IntegerField(source="job.conversations_matched")
    messages_created = serializers.IntegerField(source="job.messages_created")
    messages_present = serializers.IntegerField(source="job.messages_present")
    messages_embedded = serializers.IntegerField()
    passages_embedded = serializers.IntegerField()
    messages_waiting = serializers.IntegerField()
    messages_deleted = serializers.IntegerField()
    embedder = serializers.CharField()

    def get_url(self, progress: queries.ImportProgress) -> str:
        return reverse("conversations-import-detail", kwargs={"import_id": progress.job.pk})


class ConversationImportApi(APIView):
    """Import conversation history: the JSON-lines objects as a JSON array, idempotent by external id."""

    ImportMessage = inline_serializer(
        "ConversationImportMessage",
        {
            "role": serializers.ChoiceField(choices=Message.Role.choices),
            "content": MessageText(),
            "created_at": serializers.DateTimeField(),
            "external_id": IdentifierField(max_length=100),
        },
    )
    ImportLines = inline_serializer(
        "ConversationImportLine",
        {
            "person": IdentifierField(max_length=200),
            "external_id": IdentifierField(max_length=100),
            "started_at": serializers.DateTimeField(required=False),
            "messages": serializers.ListField(child=ImportMessage, min_length=1),
        },
        many=True,
    )

    @extend_schema(
        operation_id="conversations_import",
        request=ImportLines,
        responses={201: ImportJobOutput, **error_responses(422)},
    )
    def post(self, request: Request) -> Response:
        if not isinstance(request.data, list):
            raise InvalidMessage("The body must be a JSON array of conversations, one per line of the file.")
        key = request_api_key(request)
        report = history_import.import_conversations(
            team=key.team, agent=key.agent, items=list(request.data), indexed_fields=True
        )
        job = ConversationImport.objects.get(team=key.team, pk=report.id)
        location = reverse("conversations-import-detail", kwargs={"import_id": job.pk})
        return Response(
            ImportJobOutput(queries.import_progress(job)).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": location},
        )


class ConversationImportDetailApi(APIView):
    """One history import of the calling agent: its counts, and how far embedding has come."""

    @extend_schema(operation_id="conversations_import_detail", responses={200: ImportJobOutput, **error_responses()})
    def get(self, request: Request, import_id: int) -> Response:
        key = request_api_key(request)
        job = get_object_or_404(ConversationImport.objects.filter(team=key.team, agent=key.agent), pk=import_id)
        return Response(ImportJobOutput(queries.import_progress(job)).data)
