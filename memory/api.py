"""The agent-facing API for memory: the tools, and read endpoints for notes, banks and revisions."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, cast

from django.db.models import Count, QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.generics import ListAPIView
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from accounts.api import PersonDetailApi, PersonOutput
from accounts.authentication import request_api_key
from accounts.models import Agent, ApiKey, Person
from accounts.usage import count_usage
from config import metrics
from config.errors import api_exception_handler
from config.exceptions import DomainError
from config.fields import IdentifierField, IntegerField, TextField
from config.middleware import TracedRequest
from config.parsers import RefusedDocument
from config.schema import error_responses
from config.text import AS_OF_FORMAT, query_as_of, query_id
from memory import as_of, packages, replica_reads, services
from memory.exceptions import InvalidArguments
from memory.models import Bank, Mute, Note, Proposal, Revision
from memory.package_format import MemoryPackage
from memory.serializers import BankOutput, MuteOutput, NoteAsOfOutput, NoteOutput, ProposalOutput, RevisionOutput
from memory.services.mutes import notes_they_may_mute
from memory.tools import REGISTRY, ProposedOut, Tool, ToolContext

NOT_READ = "(the body could not be read; see the reason)"


def request_id(request: Request) -> str:
    """The id RequestIdMiddleware gave the underlying HttpRequest."""
    return cast(TracedRequest, request._request).request_id


def tool_context(request: Request) -> ToolContext:
    key = request_api_key(request)
    return ToolContext(team=key.team, agent=key.agent, api_key=key, request_id=request_id(request))


def error_body_of(exc: exceptions.APIException | DomainError) -> dict[str, Any]:
    """The {"code", "message", "field"?} the API answers for exc."""
    response = api_exception_handler(exc, {})
    return response.data["error"] if response is not None else {"code": "invalid", "message": str(exc)}


def refuse_tool_call(ctx: ToolContext, tool: Tool, arguments: Any, exc: exceptions.APIException | DomainError) -> None:
    """A writing tool's call refused before the write path, logged as Tool.refuse does."""
    error = error_body_of(exc)
    tool.refuse(ctx, arguments, message=error["message"], field=error.get("field"))


def query_flag(request: Request, name: str) -> bool:
    """A true/false query parameter; anything else is refused, not read as false."""
    value = request.query_params.get(name, "false").strip().lower()
    if value not in ("true", "false", "1", "0"):
        raise exceptions.ValidationError({name: [f"{name} must be true or false; got {value!r}."]})
    return value in ("true", "1")


def admin_key(request: Request, message: str) -> ApiKey:
    key = request_api_key(request)
    if not key.can_admin:
        raise exceptions.PermissionDenied(message)
    return key


def admin_actor(request: Request, key: ApiKey) -> services.Actor:
    return services.Actor(Revision.Actor.ADMIN, f"key:{key.prefix}", request_id(request))


def _openai_tool(tool: Tool) -> dict[str, Any]:
    return {"type": "function", "function": tool.json_schema()}


def _anthropic_tool(tool: Tool) -> dict[str, Any]:
    schema = tool.json_schema()
    return {"name": schema["name"], "description": schema["description"], "input_schema": schema["parameters"]}


TOOL_FORMATS: dict[str, Callable[[Tool], dict[str, Any]]] = {
    "mnemo": Tool.json_schema,
    "openai": _openai_tool,
    "anthropic": _anthropic_tool,
}


class _SettingsWithoutFormatOverride:
    URL_FORMAT_OVERRIDE = None

    def __getattr__(self, name: str) -> Any:
        return getattr(api_settings, name)


class ToolListNegotiation(DefaultContentNegotiation):
    """On the tool list, ?format= names the schema style, not a renderer (DRF would answer 404)."""

    # The stubs type `settings` as DRF's api_settings class, with URL_FORMAT_OVERRIDE a str; DRF reads
    # any object with the attributes, and None there turns the override off.
    settings = _SettingsWithoutFormatOverride()  # type: ignore[assignment]


class ToolListApi(APIView):
    """The agent tools with their JSON schemas, in function-calling form."""

    content_negotiation_class = ToolListNegotiation

    @extend_schema(
        operation_id="tools_list",
        tags=["tools"],
        parameters=[
            OpenApiParameter(
                "format",
                OpenApiTypes.STR,
                enum=list(TOOL_FORMATS),
                description=(
                    "How each tool is rendered: mnemo (default) {name, description, parameters}; openai "
                    "{type: function, function: {...}}, ready for Chat Completions' tools; anthropic "
                    "{name, description, input_schema}, ready for the Messages API's tools."
                ),
            )
        ],
        responses=inline_serializer("ToolList", {"tools": serializers.ListField(child=serializers.DictField())}),
    )
    def get(self, request: Request) -> Response:
        name = request.query_params.get("format", "mnemo")
        render = TOOL_FORMATS.get(name)
        if render is None:
            raise exceptions.ValidationError({"format": [f"Use one of {', '.join(TOOL_FORMATS)}; got {name!r}."]})
        return Response({"tools": [render(tool) for tool in REGISTRY.values()]})


class ToolCallApi(APIView):
    tool: Tool

    def post(self, request: Request) -> Response:
        context = tool_context(request)
        count_usage(team_id=context.team.pk, agent_id=context.agent.pk, tool_calls=1)
        data: Any = NOT_READ
        with metrics.tool_call(self.tool.name):
            try:
                data = request.data
                args = self.tool.parse(data)
            except (exceptions.APIException, InvalidArguments) as exc:  # a body that is not JSON, or bad arguments
                refuse_tool_call(context, self.tool, exc.document if isinstance(exc, RefusedDocument) else data, exc)
                raise
            result = self.tool.run(context, args)
        # Accepted, not done: the write waits for the person's review (memory.services.proposals).
        return Response(result, status=202 if result.get("status") == "proposed" else 200)


def tool_view(tool: Tool) -> type[ToolCallApi]:
    """One view class per tool, so the OpenAPI schema documents each tool's own arguments."""

    def post(self: ToolCallApi, request: Request) -> Response:
        return ToolCallApi.post(self, request)

    documented = extend_schema(
        operation_id=f"tool_{tool.name}",
        summary=tool.description,
        tags=["tools"],
        request=tool.args,
        responses={
            200: tool.result,
            **({202: ProposedOut} if tool.proposes else {}),
            **error_responses(*tool.errors),
        },
    )(post)
    view = type(f"{tool.name.title().replace('_', '')}ToolApi", (ToolCallApi,), {"tool": tool, "post": documented})
    return view


# --- resources --------------------------------------------------------------------------------


def _person_filter(request: Request) -> Person | None:
    external_id = request.query_params.get("person")
    if external_id is None:
        return None
    return get_object_or_404(Person.objects.for_team(request_api_key(request).team), external_id=external_id)


class NoteListApi(ListAPIView[Note]):
    serializer_class = NoteOutput
    person: Person | None = None  # the ?person= of the request, found by get()

    @extend_schema(
        operation_id="notes_list",
        responses={
            200: PolymorphicProxySerializer(
                "NoteOrNoteAsOf", serializers=[NoteOutput, NoteAsOfOutput], resource_type_field_name=None, many=True
            ),
            **error_responses(404),
        },
        parameters=[
            OpenApiParameter("person", OpenApiTypes.STR, description="The person's id."),
            OpenApiParameter("bank", OpenApiTypes.STR, description="A bank id, e.g. user:ada:project:apollo."),
            OpenApiParameter("category", OpenApiTypes.STR),
            OpenApiParameter(
                "as_of",
                OpenApiTypes.STR,
                description=(
                    f"The notes as they stood at this past moment, rebuilt from the revision log: {AS_OF_FORMAT}. "
                    "A date means the end of that day (UTC); a time without a timezone is read as UTC; a moment in "
                    "the future is refused. Notes created later are absent, notes deleted since are present with "
                    "what they said then, erased notes never appear. Each note has no source or repetitions then "
                    "(the log keeps neither): see NoteAsOf."
                ),
            ),
        ],
    )
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        moment = query_as_of(request.query_params)
        if moment is not None:  # the past: a separate path, never taken by a present-time list
            notes = self.notes_as_of(moment)
            page = self.paginate_queryset(notes)
            assert page is not None  # every list is paginated (config.settings)
            return self.get_paginated_response(NoteAsOfOutput(page, many=True, context={"as_of": moment}).data)
        self.person = _person_filter(request)
        if self.person is None:  # the whole team's: the primary answers
            return super().get(request, *args, **kwargs)
        with replica_reads.reading_for(self.person):  # a replica fresh for the person, or the primary
            return super().get(request, *args, **kwargs)

    def notes_as_of(self, moment: datetime) -> list[Note]:
        """The notes the present list would show (the same filters and mutes), as they stood then."""
        key = request_api_key(self.request)
        person = _person_filter(self.request)
        banks = Bank.objects.filter(team=key.team).select_related("person")
        if person is not None:
            banks = banks.filter(person=person)
        if address := self.request.query_params.get("bank"):
            banks = banks.filter(address=address)
        notes = as_of.withhold_muted(
            as_of.notes_as_of(moment=moment, banks=list(banks)), agent=key.agent, person=person
        )
        if category := self.request.query_params.get("category"):
            notes = [note for note in notes if note.category == category]
        return sorted(notes, key=lambda note: note.pk)

    def get_queryset(self) -> QuerySet[Note]:
        key = request_api_key(self.request)
        person = self.person  # found by get()
        notes = (
            Note.objects.for_team(key.team)
            .unmuted_for(key.agent, person=person)
            .select_related("bank", "bank__person")
            .order_by("id")
        )
        if person is not None:
            notes = notes.filter(bank__person=person)
        if address := self.request.query_params.get("bank"):
            notes = notes.filter(bank__address=address)
        if category := self.request.query_params.get("category"):
            notes = notes.filter(category=category)
        return notes


class NoteDetailApi(APIView):
    def _note(self, request: Request, note_id: int) -> Note:
        # A note muted for this agent is one it does not know: 404, like another team's.
        key = request_api_key(request)
        notes = Note.objects.for_team(key.team).unmuted_for(key.agent)
        return get_object_or_404(notes.select_related("bank", "bank__person"), pk=note_id)

    @extend_schema(operation_id="notes_retrieve", responses=NoteOutput)
    def get(self, request: Request, note_id: int) -> Response:
        return Response(NoteOutput(self._note(request, note_id)).data)

    @extend_schema(
        operation_id="notes_destroy",
        description=(
            "Deletes the note; the revision log keeps what it said (a logged delete). With erase=true and an "
            "admin-capable key, erases it instead, as the lens and every other erasure do: the note and its vector "
            "go, its content leaves every revision of its bank and key (refused attempts included) and its key is "
            "replaced there by erased-<id>; the messages it was learned from become tombstones and the "
            "conversation summaries they fed are cleared (rebuilt from what is left); the events stay. `erased` "
            "counts what went (present only when erased)."
        ),
        parameters=[
            OpenApiParameter("erase", OpenApiTypes.BOOL, description="Erase (admin-capable key only); default false."),
        ],
        responses={
            200: inline_serializer(
            "NoteDeleted",
            {"id": serializers.IntegerField(), "bank": serializers.CharField(), "key": serializers.CharField(),
             "action": serializers.ChoiceField(choices=["deleted", "erased"]),
             "erased": inline_serializer(
                 "NoteErased",
                 {"revisions": serializers.IntegerField(help_text="Revisions whose content was blanked."),
                  "messages": serializers.IntegerField(help_text="Messages it was learned from, now tombstones."),
                  "summaries": serializers.IntegerField(help_text="Conversation summaries cleared, to be rebuilt.")},
                 required=False,
             )},
            ),
            **error_responses(403),
        },
    )  # fmt: skip
    def delete(self, request: Request, note_id: int) -> Response:
        note = self._note(request, note_id)
        if query_flag(request, "erase"):
            key = admin_key(request, "Erasing a note needs an admin-capable API key; without erase=true it is deleted.")
            bank, note_key = note.bank.address, note.key
            erased = services.erase_note(note=note, actor=admin_actor(request, key))
            return Response(
                {"id": note_id, "bank": bank, "key": note_key, "action": "erased", "erased": erased.as_dict()}
            )
        result = services.delete_note(note=note, actor=tool_context(request).actor, reason="deleted through the API")
        return Response({"id": note_id, "bank": result.bank.address, "key": result.key, "action": "deleted"})


def _banks(request: Request) -> QuerySet[Bank]:
    return (
        Bank.objects.filter(team=request_api_key(request).team)
        .select_related("person")
        .annotate(note_count=Count("notes"))
        .order_by("address")
    )


class BankListApi(ListAPIView[Bank]):
    serializer_class = BankOutput

    @extend_schema(
        operation_id="banks_list",
        parameters=[OpenApiParameter("person", OpenApiTypes.STR)],
        responses={200: BankOutput(many=True), **error_responses(404)},
    )
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Bank]:
        banks = _banks(self.request)
        person = _person_filter(self.request)
        if person is not None:
            banks = banks.filter(person=person)
        return banks


class BankDetailApi(APIView):
    class PatchInput(serializers.Serializer[None]):
        policy = serializers.ChoiceField(choices=Bank.Policy.choices, required=False)
        soft_limit = IntegerField(min_value=1, max_value=100_000, required=False)
        hard_limit = IntegerField(min_value=1, max_value=100_000, required=False)
        capacity = IntegerField(min_value=1, max_value=100_000, required=False)

    @extend_schema(operation_id="banks_retrieve", responses=BankOutput)
    def get(self, request: Request, bank_id: str) -> Response:
        return Response(BankOutput(get_object_or_404(_banks(request), address=bank_id)).data)

    @extend_schema(
        operation_id="banks_partial_update", request=PatchInput, responses={200: BankOutput, **error_responses(403)}
    )
    def patch(self, request: Request, bank_id: str) -> Response:
        bank = get_object_or_404(_banks(request), address=bank_id)
        key = request_api_key(request)
        if not key.can_admin:
            raise exceptions.PermissionDenied("Changing a bank's policy or limits needs an admin-capable API key.")
        data = self.PatchInput(data=request.data)
        data.is_valid(raise_exception=True)
        if not data.validated_data:
            raise exceptions.ValidationError(
                {"non_field_errors": ["Send at least one of policy, soft_limit, hard_limit, capacity."]}
            )
        actor = services.Actor(Revision.Actor.ADMIN, f"key:{key.prefix}", request_id(request))
        services.update_bank_settings(bank=bank, actor=actor, changes=data.validated_data)
        return Response(BankOutput(get_object_or_404(_banks(request), address=bank_id)).data)


class RevisionListApi(ListAPIView[Revision]):
    serializer_class = RevisionOutput

    @extend_schema(
        operation_id="revisions_list",
        responses={200: RevisionOutput(many=True), **error_responses(404)},
        parameters=[
            OpenApiParameter("note", OpenApiTypes.INT),
            OpenApiParameter("person", OpenApiTypes.STR),
            OpenApiParameter("bank", OpenApiTypes.STR),
        ],
    )
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Revision]:
        key = request_api_key(self.request)
        revisions = Revision.objects.filter(team=key.team).unmuted_for(key.agent)
        if (note_id := query_id(self.request.query_params, "note")) is not None:
            revisions = revisions.filter(note_id=note_id)
        person = _person_filter(self.request)
        if person is not None:
            revisions = revisions.filter(person=person)
        if bank_id := self.request.query_params.get("bank"):
            revisions = revisions.filter(bank_ref=bank_id)
        return revisions


# --- memory packages --------------------------------------------------------------------------


class ImportApi(APIView):
    @extend_schema(
        operation_id="imports_create",
        summary="Import a memory package",
        description=(
            "Every note goes through the write path with source and actor import; a refused note is reported "
            "and the others still import. Idempotent by key. The body may also be a JSON array: the JSONL "
            "form's header object followed by one note object per element, each with bank_kind, person, scope. "
            "With an ordinary key, every conversation must be its own agent's (403 naming the field, nothing "
            "imported, otherwise); an admin-capable key may import any agent's of its team."
        ),
        request=MemoryPackage,
        responses={200: inline_serializer(
            "ImportReport",
            {
                "created": serializers.IntegerField(),
                "updated": serializers.IntegerField(),
                "unchanged": serializers.IntegerField(),
                "refused": serializers.IntegerField(),
                "refusals": inline_serializer(
                    "ImportRefusal",
                    {"bank": serializers.CharField(), "key": serializers.CharField(), "code": serializers.CharField(),
                     "message": serializers.CharField()},
                    many=True,
                ),
                "evicted": serializers.ListField(child=serializers.DictField()),
            },
        ), **error_responses(403)},
    )  # fmt: skip
    def post(self, request: Request) -> Response:
        key = request_api_key(request)
        actor = services.Actor(Revision.Actor.IMPORT, key.agent.slug, request_id(request))
        try:
            data = request.data
        except exceptions.APIException as exc:  # not JSON, or text no field can take: refused whole, and logged
            error = error_body_of(exc)
            attempted = packages.package_summary(exc.document) if isinstance(exc, RefusedDocument) else NOT_READ
            services.record_refused_call(
                team=key.team, actor=actor, operation="import", arguments={"package": attempted},
                message=error["message"], field=error.get("field"),
            )  # fmt: skip
            raise
        agent = None if key.can_admin else key.agent  # as for an export: an ordinary key's own conversations only
        report = packages.import_package(team=key.team, data=data, actor=actor, agent=agent)
        return Response(report.as_dict())


class ExportApi(APIView):
    @extend_schema(
        operation_id="exports_retrieve",
        summary="Export everything held about one person",
        description=(
            "Their banks, the notes shared banks hold about them, their revisions and mutes, and their "
            "conversations with messages, summaries and turns. With an ordinary key: the categories the person "
            "muted for its agent are withheld (and named), and only its agent's conversations and reads are "
            "included. With an admin-capable key (a data-subject request): everything."
        ),
        parameters=[OpenApiParameter("person", OpenApiTypes.STR, required=True, description="The person's id.")],
        responses={200: MemoryPackage, **error_responses(404)},
    )
    def get(self, request: Request) -> Response:
        external_id = request.query_params.get("person")
        if not external_id:
            raise exceptions.ValidationError({"person": ["Name the person to export, e.g. ?person=ada."]})
        key = request_api_key(request)
        person = get_object_or_404(Person.objects.for_team(key.team), external_id=external_id)
        agent = None if key.can_admin else key.agent
        return Response(packages.export_person(team=key.team, person=person, agent=agent))


class PersonApi(PersonDetailApi):
    """A person: read them (accounts), turn review on or off, or erase everything held about them (a
    data-subject request)."""

    class ReviewInput(serializers.Serializer[None]):
        review_writes = serializers.BooleanField(
            help_text="true: what agents learn about the person waits for their approval, as proposals."
        )

    @extend_schema(
        operation_id="people_update",
        summary="Turn review on or off for a person",
        description=(
            "Needs an admin-capable key. With review_writes true, every write an agent or the curator makes "
            "about the person (remember, remember_about_user, remember_about_project, edit_note, the curator's "
            "notes) becomes a proposal that waits for approval (GET /api/v1/proposals). Turning it off keeps "
            "what waits."
        ),
        request=ReviewInput,
        responses={200: PersonOutput, **error_responses(403, 404)},
    )
    def patch(self, request: Request, external_id: str) -> Response:
        team = request_api_key(request).team
        person = get_object_or_404(Person.objects.for_team(team), external_id=external_id)
        admin_key(request, "Changing how a person's memories are kept needs an admin-capable API key.")
        data = self.ReviewInput(data=request.data)
        data.is_valid(raise_exception=True)
        person = services.set_review_writes(person=person, review=data.validated_data["review_writes"])
        return Response(PersonOutput(person).data)

    @extend_schema(
        operation_id="people_destroy",
        summary="Erase everything held about one person",
        description=(
            "Needs an admin-capable key. In one transaction: their notes, what shared banks say of them, the "
            "content of their revisions (the events stay), their mutes, proposals and banks, and their "
            "conversations with messages, summaries and turns. The person row stays as a tombstone unless hard=true. Export first "
            "(GET /api/v1/exports?person=) if they asked for a copy."
        ),
        parameters=[
            OpenApiParameter("hard", OpenApiTypes.BOOL, description="Delete the person row too; default false."),
        ],
        responses={
            200: inline_serializer(
            "PersonErased",
            {"person": serializers.CharField(), "erased": serializers.DictField(child=serializers.IntegerField()),
             "person_row": serializers.ChoiceField(choices=["tombstone", "deleted"])},
            ),
            **error_responses(403),
        },
    )  # fmt: skip
    def delete(self, request: Request, external_id: str) -> Response:
        team = request_api_key(request).team
        person = get_object_or_404(Person.objects.for_team(team), external_id=external_id)
        key = admin_key(request, "Erasing a person needs an admin-capable API key.")
        hard = query_flag(request, "hard")
        report = services.erase_person(team=team, person=person, actor=admin_actor(request, key), hard=hard)
        return Response(report.as_dict())


# --- mutes ------------------------------------------------------------------------------------------

MUTES_NEED_ADMIN = (
    "Mutes are a person's choices about every agent: listing, adding or removing one needs an admin-capable API key."
)


def _mutes(key: ApiKey) -> QuerySet[Mute]:
    return Mute.objects.filter(team=key.team).select_related("person", "agent").order_by("created_at", "id")


class MuteListApi(ListAPIView[Mute]):
    serializer_class = MuteOutput

    class CreateInput(serializers.Serializer[None]):
        person = IdentifierField(max_length=200, help_text="The person's id.")
        category = IdentifierField(max_length=200, required=False, help_text="A category to mute; or name a note.")
        note = IntegerField(
            min_value=1, required=False, help_text="A note about the person to mute (its id), categorised or not."
        )
        agent = serializers.SlugField(
            max_length=64, required=False, help_text="An agent of the team (slug); default: every agent of the team."
        )

    @extend_schema(
        operation_id="mutes_list",
        description="The team's mutes, oldest first; an admin-capable key only.",
        parameters=[
            OpenApiParameter("person", OpenApiTypes.STR, description="Only this person's."),
            OpenApiParameter("agent", OpenApiTypes.STR, description="Only this agent's (slug)."),
        ],
        responses={200: MuteOutput(many=True), **error_responses(403, 404)},
    )
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Mute]:
        key = admin_key(self.request, MUTES_NEED_ADMIN)
        mutes = _mutes(key)
        person = _person_filter(self.request)
        if person is not None:
            mutes = mutes.filter(person=person)
        if (slug := self.request.query_params.get("agent")) is not None:
            mutes = mutes.filter(agent=get_object_or_404(Agent.objects.for_team(key.team), slug=slug))
        return mutes

    @extend_schema(
        operation_id="mutes_create",
        description=(
            "Mutes a category, or one note, of what is known about a person for one agent, or for every agent "
            "of the team when no agent is named. Until the mute is removed, that agent is not given the muted "
            "notes, the messages they were learned from, or a conversation summary built from those messages, "
            "in its turns, recall, search, search_conversation and recent_messages; nothing is deleted. Name "
            "exactly one of category and note. Answers the mutes, one per agent (one already there is kept)."
        ),
        request=CreateInput,
        responses={
            201: inline_serializer("MutesCreated", {"mutes": MuteOutput(many=True)}),
            **error_responses(403, 404),
        },
    )
    def post(self, request: Request) -> Response:
        key = admin_key(request, MUTES_NEED_ADMIN)
        data = self.CreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        if "note" in fields and "category" in fields:
            raise exceptions.ValidationError({"note": ["Name a category or a note to mute, not both."]})
        if "note" not in fields and not fields.get("category"):
            raise exceptions.ValidationError({"category": ["Name the category to mute, or a note (its id)."]})
        person = get_object_or_404(Person.objects.for_team(key.team), external_id=fields["person"])
        note = None
        if "note" in fields:
            note = get_object_or_404(Note.objects.filter(notes_they_may_mute(person)), pk=fields["note"])
        if "agent" in fields:
            agents = [get_object_or_404(Agent.objects.for_team(key.team), slug=fields["agent"])]
        else:
            agents = list(Agent.objects.for_team(key.team).order_by("slug"))
        mutes = services.mute_for_agents(person=person, agents=agents, category=fields.get("category"), note=note)
        return Response({"mutes": [MuteOutput(mute).data for mute in mutes]}, status=201)


class MuteDetailApi(APIView):
    @extend_schema(
        operation_id="mutes_destroy",
        description=(
            "Removes a mute: the agent is given the muted notes, the messages they were learned from and the "
            "summaries built from them again. An admin-capable key only."
        ),
        responses={204: None, **error_responses(403, 404)},
    )
    def delete(self, request: Request, mute_id: int) -> Response:
        key = admin_key(request, MUTES_NEED_ADMIN)
        services.remove_mute(mute=get_object_or_404(_mutes(key), pk=mute_id))
        return Response(status=204)


# --- proposals (review) -----------------------------------------------------------------------------

PROPOSALS_NEED_ADMIN = (
    "Proposals wait for a person's approval: listing, keeping or declining them needs an admin-capable API key."
)


def _proposals(key: ApiKey) -> QuerySet[Proposal]:
    return Proposal.objects.for_team(key.team).select_related("person", "agent").order_by("created_at", "id")


def _proposal(request: Request, proposal_id: int) -> Proposal:
    key = admin_key(request, PROPOSALS_NEED_ADMIN)
    return get_object_or_404(_proposals(key), pk=proposal_id)


class ProposalListApi(ListAPIView[Proposal]):
    serializer_class = ProposalOutput

    @extend_schema(
        operation_id="proposals_list",
        description=(
            "What agents and the curator proposed to keep about people who review what is kept, oldest first; "
            "an admin-capable key only. A decided proposal's words are blank."
        ),
        parameters=[
            OpenApiParameter("person", OpenApiTypes.STR, description="Only this person's."),
            OpenApiParameter(
                "status", OpenApiTypes.STR, enum=Proposal.Status.values, description="Only those in this state."
            ),
        ],
        responses={200: ProposalOutput(many=True), **error_responses(403, 404)},
    )
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Proposal]:
        key = admin_key(self.request, PROPOSALS_NEED_ADMIN)
        proposals = _proposals(key)
        person = _person_filter(self.request)
        if person is not None:
            proposals = proposals.filter(person=person)
        if (wanted := self.request.query_params.get("status")) is not None:
            if wanted not in Proposal.Status.values:
                raise exceptions.ValidationError(
                    {"status": [f"status must be one of {', '.join(Proposal.Status.values)}; got {wanted!r}."]}
                )
            proposals = proposals.filter(status=wanted)
        return proposals


class ProposalApproveApi(APIView):
    class InputSerializer(serializers.Serializer[None]):
        # No cap here: the write path refuses an over-cap text (422 too_long) and logs it, as for any write.
        content = TextField(
            required=False,
            help_text="Keep it with this text instead of the proposed one (the person's edit).",
        )

    @extend_schema(
        operation_id="proposals_approve",
        description=(
            "Keeps the proposal: its write runs through the write path as the agent or curator that proposed it "
            "(caps, the FULL latch, the revision log, the vector, the messages it was learned from), with "
            "`content` instead of the proposed text when given. A refusal there answers as the write would "
            "(409 bank_full, 422 too_long...) and leaves the proposal waiting; 409 conflict when it was "
            "already decided."
        ),
        request=InputSerializer,
        responses={
            200: inline_serializer(
                "ProposalKept",
                {"proposal": ProposalOutput(), "note": serializers.IntegerField(allow_null=True),
                 "bank": serializers.CharField(), "key": serializers.CharField(),
                 "action": serializers.CharField()},
            ),
            **error_responses(403, 404, 409, 422),
        },
    )  # fmt: skip
    def post(self, request: Request, proposal_id: int) -> Response:
        admin_key(request, PROPOSALS_NEED_ADMIN)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        proposal = _proposal(request, proposal_id)
        key = request_api_key(request)
        result = services.keep_proposal(
            proposal=proposal, decider=admin_actor(request, key), content=data.validated_data.get("content")
        )
        proposal.refresh_from_db()
        return Response(
            {
                "proposal": ProposalOutput(proposal).data,
                "note": result.note.pk if result.note is not None else None,
                "bank": result.bank.address,
                "key": result.key,
                "action": result.action,
            }
        )


class ProposalRejectApi(APIView):
    @extend_schema(
        operation_id="proposals_reject",
        description=(
            "Declines the proposal: nothing is kept, and its words are blanked (the proposal stays as the "
            "decision, with no text). 409 conflict when it was already decided."
        ),
        request=None,
        responses={200: ProposalOutput, **error_responses(403, 404, 409)},
    )
    def post(self, request: Request, proposal_id: int) -> Response:
        proposal = _proposal(request, proposal_id)
        key = request_api_key(request)
        declined = services.reject_proposal(proposal=proposal, decider=admin_actor(request, key))
        return Response(ProposalOutput(declined).data)
