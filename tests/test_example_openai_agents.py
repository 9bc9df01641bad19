"""examples/openai_agents.py: the OpenAI Agents SDK with Mnemo's tools, against a local scripted model server."""

from __future__ import annotations

import json

import pytest

from conversations.models import Message, Turn
from examples import openai_agents
from memory.models import Note
from memory.tools import REGISTRY
from tests.curator.chat_server import Script, chat_server
from tests.support.fixtures import in_own_thread


def tool_call(call_id: str, name: str, arguments: dict) -> dict:
    return {
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        ]
    }


def run(argv: list[str], env: dict[str, str]) -> tuple[int, list[str]]:
    printed: list[str] = []

    def main() -> int:
        return openai_agents.main(
            argv, input_fn=lambda p: "", print_fn=lambda *a, **kw: printed.append(" ".join(a)), env=env
        )

    return in_own_thread(main), printed  # it runs asyncio.run()


@pytest.mark.django_db(transaction=True)
def test_the_agent_remembers_through_mnemos_tools_and_the_reply_is_recorded(live_server, tenant):
    # The model writes a person of its own choosing: the code's person wins.
    remember = {
        "person": "mallory",
        "key": "home city",
        "description": "Where Ada lives",
        "content": "Ada lives in Bergen.",
    }
    too_long = {"key": "life", "description": "Ada's life", "content": "x" * 2001}
    script = Script(
        replies=[
            (200, tool_call("call_1", "remember", remember)),
            (200, tool_call("call_2", "remember", too_long)),
            (200, "Noted: you live in Bergen now."),
        ]
    )
    with chat_server(script) as llm_url:
        env = {"MNEMO_URL": live_server.url, "MNEMO_KEY": tenant.key.plaintext, "LLM_BASE_URL": llm_url,
               "LLM_MODEL": "test-model"}  # fmt: skip
        code, printed = run(["--person", "ada", "--once", "I moved to Bergen last week."], env)

    assert code == 0, printed
    assert printed == ["agent> Noted: you live in Bergen now."]
    note = Note.objects.get(team=tenant.team)
    assert (note.bank.address, note.key, note.content) == ("user:ada", "home-city", "Ada lives in Bergen.")

    first, second, third = script.requests
    assert first["model"] == "test-model"
    declared = {tool["function"]["name"]: tool["function"]["parameters"] for tool in first["tools"]}
    assert set(declared) == set(REGISTRY)
    assert all("person" not in schema["properties"] for schema in declared.values())
    assert first["messages"][0]["role"] == "system"
    assert openai_agents.PERSONA in first["messages"][0]["content"]  # Mnemo composed the instructions
    assert first["messages"][-1] == {"role": "user", "content": "I moved to Bergen last week."}
    created = json.loads(second["messages"][-1]["content"])
    assert (second["messages"][-1]["tool_call_id"], created["action"], created["bank"]) == (
        "call_1",
        "created",
        "user:ada",
    )
    refused = json.loads(third["messages"][-1]["content"])
    assert (refused["error"]["code"], refused["error"]["field"]) == ("too_long", "content")

    turn = Turn.objects.get(conversation__team=tenant.team)
    assert list(Message.objects.filter(conversation=turn.conversation).values_list("role", "content")) == [
        ("user", "I moved to Bergen last week."),
        ("assistant", "Noted: you live in Bergen now."),
    ]


def test_without_a_model_it_says_what_to_set():
    code, printed = run(["--person", "ada", "--once", "hi"], {"MNEMO_URL": "http://127.0.0.1:9", "MNEMO_KEY": "k"})
    assert code == 2
    assert printed == ["Set LLM_BASE_URL, LLM_MODEL (see the docstring of examples/openai_agents.py)."]
