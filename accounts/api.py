from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import request_api_key
from accounts.models import Person
from accounts.services import register_person
from config.fields import IdentifierField, LineField
from config.schema import error_responses


class WhoAmIOutput(serializers.Serializer[dict[str, Any]]):
    team = serializers.CharField()
    agent = serializers.CharField()
    agent_name = serializers.CharField()
    key_prefix = serializers.CharField()
    can_admin = serializers.BooleanField()


class WhoAmIApi(APIView):
    """The agent and team the presented API key acts as."""

    @extend_schema(responses=WhoAmIOutput, operation_id="whoami")
    def get(self, request: Request) -> Response:
        key = request_api_key(request)
        data = {
            "team": key.team.slug,
            "agent": key.agent.slug,
            "agent_name": key.agent.name,
            "key_prefix": key.prefix,
            "can_admin": key.can_admin,
        }
        return Response(WhoAmIOutput(data).data)


class PersonOutput(serializers.Serializer[Person]):
    person = serializers.CharField(source="external_id")
    display_name = serializers.CharField()
    review_writes = serializers.BooleanField(
        help_text="What agents learn about this person waits for their approval (proposals)."
    )
    created_at = serializers.DateTimeField()


class PersonRegisterApi(APIView):
    """Make a person known ahead of their first conversation (tools also create people on first sight)."""

    class PersonRegisterInput(serializers.Serializer[None]):
        person = IdentifierField(max_length=200, help_text="The agent platform's id for the person.")
        display_name = LineField(max_length=200, required=False, allow_blank=True)

    @extend_schema(
        request=PersonRegisterInput,
        responses={200: PersonOutput, 201: PersonOutput, **error_responses(422)},
        operation_id="people_register",
    )
    def post(self, request: Request) -> Response:
        data = self.PersonRegisterInput(data=request.data)
        data.is_valid(raise_exception=True)
        person, created = register_person(
            team=request_api_key(request).team,
            external_id=data.validated_data["person"],
            display_name=data.validated_data.get("display_name"),
        )
        return Response(PersonOutput(person).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class PersonDetailApi(APIView):
    @extend_schema(responses=PersonOutput, operation_id="people_retrieve")
    def get(self, request: Request, external_id: str) -> Response:
        person = get_object_or_404(Person.objects.for_team(request_api_key(request).team), external_id=external_id)
        return Response(PersonOutput(person).data)
