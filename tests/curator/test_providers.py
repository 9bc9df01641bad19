"""The openai provider against a local server that speaks the protocol, and the rules extractor."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from curator.providers import ChatLine, CurationRequest, KnownNote, OpenAIProvider, ProviderError, RulesProvider
from curator.schemas import CuratorPlan, EditOp, RememberOp
from tests.curator.chat_server import Script, chat_server


def request(*texts: str, summary: str = "") -> CurationRequest:
    return CurationRequest(
        messages=[ChatLine("person", t, datetime(2026, 11, 30, 9, 0)) for t in texts],
        digest="## Memory\nNothing is remembered yet.",
        summary=summary,
        today="2026-11-30",
    )


PLAN = {
    "operations": [
        {
            "op": "remember",
            "key": "home-city",
            "description": "Where they live",
            "content": "Lives in Oslo.",
            "kind": "fact",
        }
    ],
    "summary": "Ada said she lives in Oslo.",
}


# A local server that must answer gets a generous deadline; the timeout test sets its own short one.
def provider(url: str, timeout: float = 30.0, retries: int = 2) -> OpenAIProvider:
    return OpenAIProvider(base_url=url, api_key="sk-test", model="test-model", timeout=timeout, max_retries=retries)


def test_openai_provider_returns_a_validated_plan_and_its_cost():
    script = Script(replies=[(200, json.dumps(PLAN))])
    with chat_server(script) as url:
        plan, usage = provider(url).curate(request("I live in Oslo"))
    assert plan.operations[0] == RememberOp(**PLAN["operations"][0])
    assert (usage.tokens_in, usage.tokens_out, usage.provider) == (120, 30, "openai")
    assert usage.chars_in > 0
    sent = script.requests[0]
    assert sent["model"] == "test-model"
    assert sent["response_format"]["type"] == "json_schema"
    user_prompt = sent["messages"][1]["content"]
    assert '"text": "I live in Oslo"' in user_prompt  # the messages travel as JSON data
    assert "untrusted" in sent["messages"][0]["content"]


def test_openai_provider_retries_a_429_then_succeeds():
    script = Script(replies=[(429, "slow down"), (200, json.dumps(PLAN))])
    with chat_server(script) as url:
        plan, _ = provider(url).curate(request("I live in Oslo"))
    assert len(script.requests) == 2
    assert plan.summary == "Ada said she lives in Oslo."


def test_openai_provider_times_out():
    script = Script(replies=[("sleep", 2.0)])
    with chat_server(script) as url, pytest.raises(ProviderError, match="timed out"):
        provider(url, timeout=0.3, retries=0).curate(request("I live in Oslo"))


@pytest.mark.parametrize("content", ["{not json", json.dumps({"operations": [{"op": "launch_missiles"}]}), ""])
def test_openai_provider_refuses_malformed_answers(content):
    with (
        chat_server(Script(replies=[(200, content)])) as url,
        pytest.raises(ProviderError, match="not a valid CuratorPlan"),
    ):
        provider(url).curate(request("I live in Oslo"))


def test_openai_provider_gives_up_after_repeated_server_errors():
    with chat_server(Script(replies=[(500, "boom")] * 3)) as url, pytest.raises(ProviderError, match="failed with 500"):
        provider(url, retries=2).curate(request("I live in Oslo"))


@pytest.mark.parametrize(
    ("said", "key", "content"),
    [
        ("Hi, I'm Ada.", "name", "Their name is Ada."),
        ("My name is Ada Lovelace", "name", "Their name is Ada Lovelace."),
        ("I live in Oslo and I love it", "home-city", "Lives in Oslo."),
        ("I moved to Bergen last week!", "home-city", "Lives in Bergen (moved there)."),
        ("I work at Acme Corp.", "employer", "Works at Acme Corp."),
        ("I left Acme Corp.", "employer", "Left Acme Corp; no current employer known."),
        ("I'm allergic to peanuts and shellfish", "allergy-peanuts", "Allergic to peanuts."),
        ("I\u2019m vegetarian", "diet", "Is vegetarian."),  # a typographic apostrophe
        ("I have a dog named Pixel", "pet-pixel", "Has a dog named Pixel."),
        ("I really love sailing", "preference-sailing", "Likes sailing."),
        ("I hate mornings", "preference-mornings", "Dislikes mornings."),
        ("I'm on the train right now", "current-state", "Is on the train."),
        ("I moved from Oslo to Bergen.", "home-city", "Lives in Bergen (moved there)."),
        ("I'm working at Globex now", "employer", "Works at Globex."),
        ("I left Acme and now work at Globex.", "employer", "Works at Globex."),
    ],
)
def test_rules_provider_extracts_common_personal_facts(said, key, content):
    plan, usage = RulesProvider().curate(request(said))
    assert {op.key: op.content for op in plan.operations}[key] == content
    assert usage.provider == "rules"


def test_rules_provider_kinds_and_expiry():
    plan, _ = RulesProvider().curate(request("Hi, I'm Ada. I'm allergic to peanuts. I'm on the train."))
    kinds = {op.key: op.kind for op in plan.operations}
    assert kinds == {"name": "identity", "allergy-peanuts": "identity", "current-state": "ephemeral"}
    state = next(op for op in plan.operations if op.key == "current-state")
    assert state.expires_in_hours == 6


def test_rules_provider_ignores_the_agent_and_small_talk():
    plan, _ = RulesProvider().curate(
        CurationRequest(
            messages=[
                ChatLine("agent", "I live in Paris, by the way.", datetime(2026, 11, 30)),
                ChatLine("person", "thanks, ok cool", datetime(2026, 11, 30)),
            ],
            digest="",
            summary="",
            today="2026-11-30",
        )
    )
    assert plan == CuratorPlan(operations=[], summary=None)


def test_rules_provider_states_no_liking_for_one_taken_back():
    plan, _ = RulesProvider().curate(request("I don't like sushi anymore", "I don't like olives"))
    assert {op.key: op.content for op in plan.operations} == {"preference-olives": "Dislikes olives."}


def test_rules_provider_reads_no_job_change_into_a_question():
    plan, _ = RulesProvider().curate(request("Should I quit Acme?", "Should I work at Globex?"))
    assert plan.operations == []


@pytest.mark.parametrize(
    ("said", "left"),
    [
        ("I stopped drinking coffee.", ["Likes coffee.", "Runs a bakery.", "Eats meat at weekends."]),
        ("I don't eat meat anymore.", ["Drinks coffee every morning.", "Likes coffee.", "Runs a bakery."]),
        (
            "I stopped running.",
            ["Drinks coffee every morning.", "Likes coffee.", "Runs a bakery.", "Eats meat at weekends."],
        ),
        (
            "I stopped eating.",
            ["Drinks coffee every morning.", "Likes coffee.", "Runs a bakery.", "Eats meat at weekends."],
        ),
    ],
)
def test_rules_provider_takes_back_only_the_lines_that_state_the_habit(said, left):
    lines = ["Drinks coffee every morning.", "Likes coffee.", "Runs a bakery.", "Eats meat at weekends."]
    known = request(said)
    known.notes = [KnownNote("habits", "\n".join(lines), "fact")]
    plan, _ = RulesProvider().curate(known)
    edits = [op for op in plan.operations if isinstance(op, EditOp)]
    assert [op.content.splitlines() for op in edits] == ([left] if left != lines else [])
