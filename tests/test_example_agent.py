"""examples/agent.py against a running Mnemo, with a local OpenAI-compatible server as the model."""

from __future__ import annotations

import json
import socket

import pytest

from conversations.models import Message, Turn
from examples import agent
from memory.models import Note
from memory.tools import REGISTRY
from tests.curator.chat_server import Script, chat_server

pytestmark = pytest.mark.django_db(transaction=True)

REMEMBER_CALL = {
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {
                "name": "remember",
                "arguments": json.dumps(
                    {"key": "home-city", "description": "Where Ada lives", "content": "Ada lives in Oslo."}
                ),
            },
        }
    ]
}


def run(argv: list[str], env: dict[str, str]) -> tuple[int, list[str]]:
    printed: list[str] = []
    code = agent.main(argv, input_fn=lambda prompt: "", print_fn=lambda *a, **kw: printed.append(" ".join(a)), env=env)
    return code, printed


def test_one_turn_runs_the_models_tool_call_and_records_the_reply(live_server, tenant):
    script = Script(replies=[(200, REMEMBER_CALL), (200, "Noted: you live in Oslo.")])
    with chat_server(script) as llm_url:
        env = {"MNEMO_URL": live_server.url, "MNEMO_KEY": tenant.key.plaintext, "LLM_BASE_URL": llm_url,
               "LLM_MODEL": "test-model"}  # fmt: skip
        code, printed = run(["--person", "ada", "--once", "I live in Oslo now."], env)

    assert code == 0, printed
    assert printed[-1] == "agent> Noted: you live in Oslo."
    note = Note.objects.get(team=tenant.team, key="home-city")
    assert (note.content, note.bank.address) == ("Ada lives in Oslo.", "user:ada")  # the agent added the person

    first, second = script.requests
    assert first["model"] == "test-model"
    assert {tool["function"]["name"] for tool in first["tools"]} == set(REGISTRY)
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][-1] == {"role": "user", "content": "I live in Oslo now."}
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["tool_call_id"] == "call_1"
    assert json.loads(tool_message["content"])["action"] == "created"

    turn = Turn.objects.get(conversation__team=tenant.team)
    assert turn.reply.content == "Noted: you live in Oslo."
    assert list(Message.objects.filter(conversation=turn.conversation).values_list("role", "content")) == [
        ("user", "I live in Oslo now."),
        ("assistant", "Noted: you live in Oslo."),
    ]


def test_without_a_model_the_reply_is_canned_and_the_memories_used_are_shown(live_server, tenant):
    env = {"MNEMO_URL": live_server.url, "MNEMO_KEY": tenant.key.plaintext}
    tenant.client.post(
        "/api/v1/tools/remember",
        {"person": "ada", "key": "home-city", "description": "Where Ada lives", "content": "Ada lives in Oslo."},
        format="json",
    )
    note = Note.objects.get(team=tenant.team)

    code, printed = run(["--person", "ada", "--once", "Where do I live?"], env)

    assert code == 0, printed
    assert f"  [memory] notes used: #{note.pk} home-city" in printed
    assert printed[-1].startswith("agent> (no model configured)")
    turn = Turn.objects.get(conversation__team=tenant.team)
    assert turn.notes_used == [note.pk]
    assert turn.reply.content.startswith("(no model configured)")


def test_a_bad_key_stops_with_mnemos_message(live_server, tenant):
    code, printed = run(["--person", "ada", "--once", "hi"], {"MNEMO_URL": live_server.url, "MNEMO_KEY": "mnemo_x_y"})
    assert code == 1
    assert printed == ["Stopped: 401 not_authenticated: The API key is unknown or revoked."]


def test_a_refused_tool_call_goes_back_to_the_model_which_answers(live_server, tenant):
    too_long = {"key": "life-story", "description": "Ada's life", "content": "x" * 2001}
    calls = {
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "remember", "arguments": json.dumps(too_long)}},
            {"id": "call_2", "type": "function", "function": {"name": "drop_tables", "arguments": "{}"}},
        ]
    }
    script = Script(replies=[(200, calls), (200, "That was too long to remember.")])
    with chat_server(script) as llm_url:
        env = {"MNEMO_URL": live_server.url, "MNEMO_KEY": tenant.key.plaintext, "LLM_BASE_URL": llm_url,
               "LLM_MODEL": "test-model"}  # fmt: skip
        code, printed = run(["--person", "ada", "--once", "Remember my whole life story."], env)

    assert code == 0, printed
    assert "  [tool] remember → too_long" in printed
    assert printed[-1] == "agent> That was too long to remember."
    refused, unknown = [json.loads(m["content"]) for m in script.requests[1]["messages"] if m["role"] == "tool"]
    assert (refused["error"]["code"], refused["error"]["field"]) == ("too_long", "content")
    assert unknown["error"]["code"] == "invalid"
    assert not Note.objects.filter(team=tenant.team).exists()


def test_an_unreachable_mnemo_is_named_by_its_url(tenant):
    with socket.socket() as sock:  # a port nothing listens on: bound, never accepting
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        code, printed = run(["--person", "ada", "--once", "hi"], {"MNEMO_URL": url, "MNEMO_KEY": "mnemo_x_y"})
    assert code == 1
    assert printed[0].startswith(f"Stopped: could not reach Mnemo at {url} ("), printed
    assert "MNEMO_URL" in printed[0]
