"""The MCP server: the REST tool registry over stdio and streamable HTTP, driven by the SDK's client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import CallToolResult

from accounts.services import revoke_api_key
from config.mcp import build_server
from memory.models import Note
from memory.tools import REGISTRY
from tests.support.fixtures import ROOT, WORKER_DEADLINE, run_async, subprocess_env

HOME = {"person": "ada", "key": "home-city", "description": "Where Ada lives", "content": "Ada lives in Oslo."}


def rest_tools(tenant) -> dict[str, dict[str, Any]]:
    response = tenant.client.get("/api/v1/tools")
    assert response.status_code == 200
    return {tool["name"]: tool for tool in response.json()["tools"]}


def body(result) -> dict[str, Any]:
    return json.loads(result.content[0].text)


def structured(result: CallToolResult) -> dict[str, Any]:
    assert result.structuredContent is not None
    return result.structuredContent


async def assert_lists_the_rest_tools(session: ClientSession, rest: dict[str, dict[str, Any]]) -> None:
    listed = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(listed) == set(rest) == set(REGISTRY)
    for name, tool in listed.items():
        assert tool.inputSchema == rest[name]["parameters"], name
        assert tool.description == rest[name]["description"]


async def remember_recall_forget(session: ClientSession) -> int:
    created = await session.call_tool("remember", HOME)
    assert not created.isError
    assert created.structuredContent == {
        "id": structured(created)["id"], "bank": "user:ada", "key": "home-city", "action": "created",
        "evicted": [],
    }  # fmt: skip
    assert body(created) == created.structuredContent
    note_id = structured(created)["id"]

    recalled = await session.call_tool("recall_memories", {"person": "ada", "query": "where does Ada live?"})
    assert not recalled.isError
    assert [(r["id"], r["content"]) for r in structured(recalled)["results"]] == [(note_id, "Ada lives in Oslo.")]

    forgotten = await session.call_tool("forget_memory", {"person": "ada", "key": "home-city", "reason": "asked to"})
    assert forgotten.structuredContent == {
        "id": note_id, "bank": "user:ada", "key": "home-city", "action": "deleted", "evicted": []
    }  # fmt: skip
    gone = await session.call_tool("forget_memory", {"person": "ada", "key": "home-city"})
    assert gone.isError
    assert body(gone)["error"]["code"] == "not_found"
    return note_id


# --- in process -------------------------------------------------------------------------------


def test_mcp_exposes_exactly_the_rest_registry(tenant):
    rest = rest_tools(tenant)

    async def scenario() -> None:
        async with create_connected_server_and_client_session(build_server()) as session:
            await assert_lists_the_rest_tools(session, rest)
            listed = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert listed["remember"].outputSchema == REGISTRY["remember"].result.model_json_schema(
                mode="serialization"
            )

    run_async(scenario)


# Each request of a client session gets an answer within this, or the test fails instead of hanging.
SESSION_DEADLINE = timedelta(seconds=WORKER_DEADLINE)


# --- stdio ------------------------------------------------------------------------------------


@asynccontextmanager
async def stdio_session(key: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp", "--agent-key", key], env=subprocess_env(), cwd=str(ROOT)
    )
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, read_timeout_seconds=SESSION_DEADLINE) as session,
        ):
            await session.initialize()
            yield session


@pytest.mark.django_db(transaction=True)
def test_stdio_server_lists_the_tools_remembers_recalls_and_forgets(tenant):
    rest = rest_tools(tenant)
    bad_call = {"person": "ada", "key": "home-city", "content": "no description"}
    rest_error = tenant.client.post("/api/v1/tools/remember", bad_call, format="json").json()

    async def scenario() -> None:
        async with stdio_session(tenant.key.plaintext) as session:
            await assert_lists_the_rest_tools(session, rest)
            await remember_recall_forget(session)

            refused = await session.call_tool("remember", bad_call)
            assert refused.isError
            assert (
                body(refused)
                == rest_error
                == {"error": {"code": "invalid", "message": "description: Field required", "field": "description"}}
            )
            too_long = await session.call_tool("remember", {**HOME, "content": "x" * 2001})
            assert body(too_long)["error"]["code"] == "too_long"

            await session.call_tool("remember", {**HOME, "key": "pet", "content": "A cat named Miso."})
            query = {"person": "ada", "query": "cat"}
            same = await session.call_tool("search", query)
            assert same.structuredContent == tenant.client.post("/api/v1/tools/search", query, format="json").json()

    run_async(scenario)
    assert list(Note.objects.filter(team=tenant.team).values_list("key", flat=True)) == ["pet"]


@pytest.mark.django_db(transaction=True)
def test_stdio_server_refuses_a_revoked_key(tenant):
    revoke_api_key(api_key=tenant.key.api_key)
    result = subprocess.run(
        [sys.executable, "manage.py", "mcp", "--agent-key", tenant.key.plaintext],
        cwd=ROOT, env=subprocess_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "The agent key is unknown or revoked" in result.stderr
    assert result.stdout == ""


# --- streamable HTTP --------------------------------------------------------------------------


@asynccontextmanager
async def http_session(url: str, key: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=WORKER_DEADLINE) as client,
        streamable_http_client(f"{url}/mcp", http_client=client) as (read, write, _),
        ClientSession(read, write, read_timeout_seconds=SESSION_DEADLINE) as session,
    ):
        await session.initialize()
        yield session


@pytest.mark.django_db(transaction=True)
def test_http_server_lists_the_tools_remembers_recalls_and_forgets(web_server, tenant):
    rest = rest_tools(tenant)

    async def scenario() -> None:
        async with http_session(web_server, tenant.key.plaintext) as session:
            await assert_lists_the_rest_tools(session, rest)
            await remember_recall_forget(session)
            talked = await session.call_tool("search_conversation", {"person": "ada", "query": "Oslo"})
            assert talked.structuredContent == {"results": []}

    run_async(scenario)
    assert not Note.objects.filter(team=tenant.team).exists()


@pytest.mark.django_db(transaction=True)
def test_http_server_keeps_teams_apart(web_server, tenant, other_tenant):
    async def scenario() -> None:
        async with http_session(web_server, tenant.key.plaintext) as session:
            created = await session.call_tool("remember", HOME)
        note_id = structured(created)["id"]
        async with http_session(web_server, other_tenant.key.plaintext) as session:
            edit = {"person": "ada", "id": note_id, "mode": "replace", "content": "Ada lives in Rome."}
            refused = await session.call_tool("edit_note", edit)
            assert refused.isError
            assert body(refused) == {
                "error": {
                    "code": "not_found",
                    "message": f"No note {note_id} is reachable for this person and scope.",
                    "field": "id",
                }
            }
            found = await session.call_tool("recall_memories", {"person": "ada", "query": "where does Ada live?"})
            assert structured(found)["results"] == []

    run_async(scenario)
    assert Note.objects.get(team=tenant.team).content == "Ada lives in Oslo."


@pytest.mark.django_db(transaction=True)
def test_http_server_refuses_requests_without_a_valid_key(web_server, tenant):
    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream"}
    missing = httpx.post(f"{web_server}/mcp", json=initialize, headers=headers)
    assert missing.status_code == 401
    assert missing.json()["error"]["code"] == "not_authenticated"
    assert missing.headers["WWW-Authenticate"] == 'Bearer realm="mnemo"'
    wrong = httpx.post(f"{web_server}/mcp", json=initialize, headers={**headers, "Authorization": "Bearer mnemo_x_y"})
    assert wrong.status_code == 401
    revoke_api_key(api_key=tenant.key.api_key)
    revoked = httpx.post(
        f"{web_server}/mcp", json=initialize, headers={**headers, "Authorization": f"Bearer {tenant.key.plaintext}"}
    )
    assert revoked.status_code == 401
    assert revoked.json() == {"error": {"code": "not_authenticated", "message": "The API key is unknown or revoked."}}
