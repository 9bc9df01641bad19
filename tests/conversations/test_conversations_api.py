"""Conversations, messages, turns and the two conversation tools over HTTP; isolation between agents and people."""

from __future__ import annotations

import pytest

from conversations.models import Conversation, Message, Turn
from tests.support.factories import AgentFactory

pytestmark = pytest.mark.django_db


def post_turn(client, person="ada", message="Hello, I just moved to Bergen", **extra):
    return client.post("/api/v1/turns", {"person": person, "message": message, **extra}, format="json")


def test_turns_record_the_message_and_return_the_composition(tenant):
    response = post_turn(tenant.client)
    assert response.status_code == 201
    body = response.json()
    assert set(body) >= {"turn", "conversation", "blocks", "messages", "costs", "ceiling", "degraded"}
    assert set(body["costs"]) == {"persona", "last_exchange", "summary", "notes", "passages", "deeper_window"}
    assert body["messages"] == [{"role": "user", "content": "Hello, I just moved to Bergen"}]
    assert body["ceiling"] == 18_000
    reply = tenant.client.post(f"/api/v1/turns/{body['turn']}/reply", {"content": "Welcome to Bergen!"}, format="json")
    assert reply.status_code == 201
    assert Turn.objects.get().reply.content == "Welcome to Bergen!"
    again = tenant.client.post(f"/api/v1/turns/{body['turn']}/reply", {"content": "twice"}, format="json")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "conflict"
    assert again.json()["error"]["field"] == "turn"
    second = post_turn(tenant.client, message="What did I just tell you?").json()
    assert second["conversation"] == body["conversation"]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]


def test_turn_validation_errors(tenant):
    assert post_turn(tenant.client, profile="everything").status_code == 400
    too_long = post_turn(tenant.client, message="x" * 16_001)
    assert too_long.status_code == 422
    assert too_long.json()["error"]["code"] == "too_long"
    assert post_turn(tenant.client, conversation=999_999).status_code == 404


def test_conversation_and_message_endpoints(tenant):
    created = tenant.client.post("/api/v1/conversations", {"person": "ada"}, format="json")
    assert created.status_code == 201
    conversation_id = created.json()["id"]
    url = f"/api/v1/conversations/{conversation_id}/messages"
    assert tenant.client.post(url, {"role": "user", "content": "Hi"}, format="json").status_code == 201
    assert tenant.client.post(url, {"role": "assistant", "content": "Hello"}, format="json").status_code == 201
    assert tenant.client.post(url, {"role": "robot", "content": "?"}, format="json").status_code == 400
    listed = tenant.client.get(url).json()
    assert [(m["order"], m["role"]) for m in listed["results"]] == [(1, "user"), (2, "assistant")]
    assert tenant.client.get("/api/v1/conversations", {"person": "ada"}).json()["count"] == 1


def test_deleting_a_message_erases_it_from_search_and_clears_the_summary(tenant):
    from conversations.services import update_summary

    conversation_id = tenant.client.post("/api/v1/conversations", {"person": "ada"}, format="json").json()["id"]
    url = f"/api/v1/conversations/{conversation_id}/messages"
    message_id = tenant.client.post(
        url, {"role": "user", "content": "My passport number is K1234"}, format="json"
    ).json()["id"]
    update_summary(conversation=Conversation.objects.get(), summary="Ada shared a passport number.", through_order=1)
    search = {"person": "ada", "query": "passport number"}
    assert tenant.client.post("/api/v1/tools/search_conversation", search, format="json").json()["results"]
    assert tenant.client.delete(f"{url}/{message_id}").status_code == 204
    assert tenant.client.post("/api/v1/tools/search_conversation", search, format="json").json()["results"] == []
    conversation = Conversation.objects.get()
    assert (conversation.summary, conversation.summary_stale) == ("", True)
    listed = tenant.client.get(url).json()["results"]
    assert [(m["order"], m["role"], m["content"], m["erased_at"] is not None) for m in listed] == [
        (1, "user", "", True)
    ]


def test_search_conversation_ranks_messages_matching_any_meaningful_word(tenant):
    conversation_id = tenant.client.post("/api/v1/conversations", {"person": "ada"}, format="json").json()["id"]
    url = f"/api/v1/conversations/{conversation_id}/messages"
    for text in ["I went to the LGBTQ support group yesterday", "The weather was nice", "Support matters a lot to me"]:
        tenant.client.post(url, {"role": "user", "content": text}, format="json")
    response = tenant.client.post(
        "/api/v1/tools/search_conversation",
        {"person": "ada", "query": "When did Caroline go to the support group?"},
        format="json",
    )
    results = response.json()["results"]
    assert next(r["snippet"] for r in results) == "I went to the LGBTQ support group yesterday"
    assert len(results) == 2  # "The weather was nice" shares no meaningful word
    assert set(results[0]) == {"message_id", "conversation", "role", "snippet", "window", "score", "created_at"}
    assert results[0]["window"] == {"start": 0, "end": 43, "length": 43}


def test_a_long_messages_hit_shows_the_sentences_that_match_and_where_they_are(tenant):
    conversation_id = tenant.client.post("/api/v1/conversations", {"person": "ada"}, format="json").json()["id"]
    url = f"/api/v1/conversations/{conversation_id}/messages"
    filler = "Here is the plan for each day of the trip, with trains and hotels. " * 40
    fact = "Your locker code at the Porto station is 4471."
    content = filler + fact + " " + filler
    tenant.client.post(url, {"role": "assistant", "content": content}, format="json")
    tenant.client.post(url, {"role": "user", "content": "Thanks, what about the hotel?"}, format="json")
    found = tenant.client.post(
        "/api/v1/tools/search_conversation", {"person": "ada", "query": "locker code Porto station"}, format="json"
    ).json()["results"][0]
    assert fact in found["snippet"]
    assert len(found["snippet"]) <= 402  # 400 and an ellipsis on each side
    window = found["window"]
    assert window["length"] == len(content)
    assert window["start"] <= content.index(fact) < content.index(fact) + len(fact) <= window["end"]
    assert found["snippet"].strip("…") == content[window["start"] : window["end"]].strip()


def test_around_reads_a_hits_neighbours_whole_and_only_the_callers(tenant):
    conversation_id = tenant.client.post("/api/v1/conversations", {"person": "ada"}, format="json").json()["id"]
    url = f"/api/v1/conversations/{conversation_id}/messages"
    ids = [
        tenant.client.post(
            url, {"role": ("user", "assistant")[i % 2], "content": f"message {i}"}, format="json"
        ).json()["id"]
        for i in range(9)
    ]
    tenant.client.delete(f"{url}/{ids[3]}")  # erased: a tombstone says nothing
    search = "/api/v1/tools/search_conversation"
    body = tenant.client.post(search, {"person": "ada", "around": ids[4], "limit": 2}, format="json").json()
    assert body["results"] == []
    assert [m["content"] for m in body["around"]] == ["message 2", "message 4", "message 5", "message 6"]
    assert [m["id"] for m in body["around"]] == [ids[2], ids[4], ids[5], ids[6]]
    both = tenant.client.post(
        search, {"person": "ada", "query": "message", "around": ids[0], "limit": 1}, format="json"
    ).json()
    assert both["results"]
    assert [m["content"] for m in both["around"]] == ["message 0", "message 1"]
    # Another person's, an erased one, or none at all: the same 404, naming the field.
    for person, message in (("bob", ids[4]), ("ada", ids[3]), ("ada", ids[-1] + 1000)):
        refused = tenant.client.post(search, {"person": person, "around": message}, format="json")
        assert refused.status_code == 404
        assert refused.json()["error"]["field"] == "around"
    neither = tenant.client.post(search, {"person": "ada"}, format="json")
    assert neither.status_code == 400


def test_recent_messages_returns_the_latest_oldest_first(tenant):
    conversation_id = tenant.client.post("/api/v1/conversations", {"person": "ada"}, format="json").json()["id"]
    url = f"/api/v1/conversations/{conversation_id}/messages"
    for i in range(5):
        tenant.client.post(url, {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}, format="json")
    response = tenant.client.post("/api/v1/tools/recent_messages", {"person": "ada", "limit": 3}, format="json")
    assert [m["content"] for m in response.json()["messages"]] == ["m2", "m3", "m4"]


def test_conversation_tools_never_reach_another_person_or_agent(tenant, other_tenant):
    from rest_framework.test import APIClient

    from accounts.services import issue_api_key

    post_turn(tenant.client, person="ada", message="My secret island is Utvaer")
    post_turn(tenant.client, person="bob", message="Bob's secret island is Lofoten")
    second_agent = AgentFactory(team=tenant.team)
    other_agent_client = APIClient()
    other_agent_client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_api_key(agent=second_agent).plaintext}")

    def search(client, person):
        return client.post(
            "/api/v1/tools/search_conversation", {"person": person, "query": "secret island"}, format="json"
        ).json()["results"]

    def recent(client, person):
        return client.post("/api/v1/tools/recent_messages", {"person": person}, format="json").json()["messages"]

    assert [r["snippet"] for r in search(tenant.client, "ada")] == ["My secret island is Utvaer"]
    assert [m["content"] for m in recent(tenant.client, "bob")] == ["Bob's secret island is Lofoten"]
    assert search(other_agent_client, "ada") == []  # same team, another agent
    assert recent(other_agent_client, "ada") == []
    assert search(other_tenant.client, "ada") == []  # another team
    assert recent(other_tenant.client, "ada") == []
    ada_conversation = Conversation.objects.get(person__external_id="ada", team=tenant.team)
    named = other_agent_client.post(
        "/api/v1/tools/recent_messages", {"person": "ada", "conversation": ada_conversation.pk}, format="json"
    )
    assert named.status_code == 404
    assert other_tenant.client.get(f"/api/v1/conversations/{ada_conversation.pk}/messages").status_code == 404
    assert other_agent_client.get(f"/api/v1/conversations/{ada_conversation.pk}").status_code == 404
    turn = Turn.objects.filter(conversation=ada_conversation).first()
    assert other_agent_client.post(f"/api/v1/turns/{turn.pk}/reply", {"content": "x"}, format="json").status_code == 404
    assert Message.objects.filter(conversation=ada_conversation).count() == 1


def test_a_failing_memory_read_is_a_503_when_the_operator_wants_it(tenant, settings, mocker):
    from django.db import OperationalError

    settings.COMPOSER_MEMORY_FAILURE = "fail"
    mocker.patch("conversations.composer.turn_notes", side_effect=OperationalError("down"))
    response = post_turn(tenant.client)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "memory_unavailable"
    settings.COMPOSER_MEMORY_FAILURE = "degrade"
    degraded = post_turn(tenant.client, message="Another message here")
    assert degraded.status_code == 201
    assert degraded.json()["degraded"] == ["notes"]
