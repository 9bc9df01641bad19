import uuid
from unittest import mock

import httpx
import pytest
from django.db import connection
from rest_framework.test import APIClient

from accounts import keycache
from accounts.models import ApiKey
from accounts.services import hash_secret, issue_api_key, revoke_api_key
from config.redis import cache_redis
from tests.support.factories import AgentFactory

pytestmark = pytest.mark.django_db


def test_issued_key_is_stored_only_as_a_hash(tenant):
    row = ApiKey.objects.get(pk=tenant.key.api_key.pk)
    secret = tenant.key.plaintext.split("_")[2]
    assert row.secret_hash == hash_secret(secret)
    assert secret not in {row.prefix, row.name, row.secret_hash}


def test_valid_key_authenticates_as_its_agent(tenant):
    response = tenant.client.get("/api/v1/me")
    assert response.status_code == 200
    assert response.json() == {
        "team": tenant.team.slug,
        "agent": tenant.agent.slug,
        "agent_name": tenant.agent.name,
        "key_prefix": tenant.key.api_key.prefix,
        "can_admin": False,
    }
    tenant.key.api_key.refresh_from_db()
    assert tenant.key.api_key.last_used_at is not None


def test_revoked_key_gets_401(tenant):
    revoke_api_key(api_key=tenant.key.api_key)
    response = tenant.client.get("/api/v1/me")
    assert response.status_code == 401
    assert response.json() == {"error": {"code": "not_authenticated", "message": "The API key is unknown or revoked."}}
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_unknown_key_gets_401(tenant):
    prefix = tenant.key.api_key.prefix
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer mnemo_{prefix}_not-the-secret")
    response = client.get("/api/v1/me")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


@pytest.mark.parametrize("header", ["Bearer", "Token abc", "Bearer mnemo_only-two", "Basic dXNlcjpwYXNz"])
def test_malformed_credentials_get_401(db, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/v1/me")
    assert response.status_code == 401
    assert set(response.json()["error"]) == {"code", "message"}


def test_missing_key_gets_401(db):
    response = APIClient().get("/api/v1/me")
    assert response.status_code == 401
    assert response.json() == {
        "error": {"code": "not_authenticated", "message": "Authentication credentials were not provided."}
    }


def test_a_key_of_one_agent_never_authenticates_another(tenant):
    other = issue_api_key(agent=AgentFactory(team=tenant.team))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {other.plaintext}")
    assert client.get("/api/v1/me").json()["agent"] == other.api_key.agent.slug
    # The two keys act as their own agents, never as each other, even within one team.
    assert tenant.client.get("/api/v1/me").json()["agent"] == tenant.agent.slug
    assert other.api_key.agent != tenant.agent
    # A key with its secret swapped for the other key's secret (same prefix) is refused.
    scheme, prefix, _secret = tenant.key.plaintext.split("_", 2)
    forged = f"{scheme}_{prefix}_{other.plaintext.split('_', 2)[2]}"
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {forged}")
    assert client.get("/api/v1/me").status_code == 401


def test_a_verified_key_is_not_looked_up_again_until_accounts_change(tenant, django_assert_num_queries):
    assert tenant.client.get("/api/v1/me").status_code == 200  # looked up (and last_used_at written)
    with django_assert_num_queries(0):
        assert tenant.client.get("/api/v1/me").json()["agent_name"] == tenant.agent.name
    tenant.agent.name = "Renamed"
    tenant.agent.save()
    with django_assert_num_queries(1):  # the agent changed: the key is looked up again, and the change seen
        assert tenant.client.get("/api/v1/me").json()["agent_name"] == "Renamed"
    with django_assert_num_queries(0):
        tenant.client.get("/api/v1/me")


def test_accounts_written_in_another_database_leave_this_ones_remembered_keys_trusted(
    tenant, django_assert_num_queries
):
    # Another deployment on the same Redis (or a parallel test process, with a test database of its
    # own) renews its own mark, as its process does after any write to a key, an agent or a team.
    assert tenant.client.get("/api/v1/me").status_code == 200
    with mock.patch.dict(connection.settings_dict, {"NAME": "another_mnemo"}):
        other_mark = keycache.mark_key()
    assert other_mark != keycache.mark_key()
    cache_redis().set(other_mark, uuid.uuid4().hex)
    with django_assert_num_queries(0):
        assert tenant.client.get("/api/v1/me").status_code == 200
    cache_redis().set(keycache.mark_key(), uuid.uuid4().hex)  # this database's: looked up again
    with django_assert_num_queries(1):
        assert tenant.client.get("/api/v1/me").status_code == 200


def test_a_revoked_key_is_refused_at_once_even_after_it_was_verified(tenant):
    assert tenant.client.get("/api/v1/me").status_code == 200
    assert tenant.client.get("/api/v1/me").status_code == 200
    revoke_api_key(api_key=tenant.key.api_key)
    assert tenant.client.get("/api/v1/me").status_code == 401


def test_with_key_caching_off_every_request_looks_its_key_up(tenant, settings, django_assert_num_queries):
    settings.KEY_CACHE_SECONDS = 0
    tenant.client.get("/api/v1/me")
    with django_assert_num_queries(1):
        tenant.client.get("/api/v1/me")


def test_a_remembered_key_is_not_trusted_for_another_prefix(tenant):
    assert tenant.client.get("/api/v1/me").status_code == 200
    _, prefix, secret = tenant.key.plaintext.split("_")
    forged = APIClient()
    forged.credentials(HTTP_AUTHORIZATION=f"Bearer mnemo_{'0' * len(prefix)}_{secret}")
    assert forged.get("/api/v1/me").status_code == 401


@pytest.mark.django_db(transaction=True)
def test_a_key_revoked_elsewhere_is_refused_by_a_server_that_verified_it(tenant, web_server):
    headers = {"Authorization": f"Bearer {tenant.key.plaintext}"}
    assert httpx.get(f"{web_server}/api/v1/me", headers=headers).status_code == 200
    assert httpx.get(f"{web_server}/api/v1/me", headers=headers).status_code == 200  # remembered there now
    revoke_api_key(api_key=tenant.key.api_key)  # in this process: the server learns it through Redis
    assert httpx.get(f"{web_server}/api/v1/me", headers=headers).status_code == 401
