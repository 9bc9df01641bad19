from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from accounts.models import Agent, ApiKey
from accounts.services import authenticate_key


def request_api_key(request: Request) -> ApiKey:
    """The key an API request authenticated with (request.auth, typed).

    Every API view requires authentication (DEFAULT_PERMISSION_CLASSES), so a view always has one;
    the check is for a view that opted out of authentication and called this anyway.
    """
    if not isinstance(request.auth, ApiKey):
        raise exceptions.NotAuthenticated()
    return request.auth


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer mnemo_<prefix>_<secret>`: request.user is the agent, request.auth the key."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Agent, ApiKey] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != self.keyword.lower() or not raw.strip():
            raise exceptions.AuthenticationFailed("Send the API key as `Authorization: Bearer <key>`.")
        api_key = authenticate_key(raw.strip())
        if api_key is None:
            raise exceptions.AuthenticationFailed("The API key is unknown or revoked.")
        return api_key.agent, api_key

    def authenticate_header(self, request: Request) -> str:
        # Returning a challenge makes DRF answer 401 (not 403) when credentials are missing or bad.
        return f'{self.keyword} realm="mnemo"'


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.ApiKeyAuthentication"
    name = "agentKey"

    def get_security_definition(self, auto_schema: object) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "A per-agent API key: mnemo_<prefix>_<secret>."}
