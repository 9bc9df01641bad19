"""POST /api/v1/tools/<name> and GET /api/v1/tools: the contract agent services call."""

from __future__ import annotations

import pytest
from django.test import override_settings

from memory.models import Bank, Note, OntologyNode, Revision
from memory.tools import REGISTRY

pytestmark = pytest.mark.django_db


def call(tenant, name, **args):
    args.setdefault("person", "ada")
    return tenant.client.post(f"/api/v1/tools/{name}", args, format="json")


def remember(tenant, **args):
    args.setdefault("key", "home-city")
    args.setdefault("description", "Where the person lives")
    args.setdefault("content", "Ada lives in Oslo.")
    return call(tenant, "remember", **args)


def test_tool_list_returns_a_function_schema_per_tool(tenant):
    response = tenant.client.get("/api/v1/tools")
    assert response.status_code == 200
    tools = {tool["name"]: tool for tool in response.json()["tools"]}
    assert set(tools) == {
        "remember", "recall_memories", "forget_memory", "remember_about_user", "remember_about_project",
        "edit_note", "search", "recall",
    } | (set(REGISTRY) - {"remember"})  # fmt: skip
    remember_schema = tools["remember"]["parameters"]
    assert remember_schema["type"] == "object"
    assert set(remember_schema["required"]) == {"person", "key", "description", "content"}
    assert remember_schema["properties"]["bank"]["enum"] == ["private", "shared", "global"]
    assert tools["recall"]["parameters"]["properties"]["budget_chars"]["default"] == 4000


def test_remember_then_recall_memories(tenant):
    created = remember(tenant, key="Home City")
    assert created.status_code == 200
    body = created.json()
    assert body == {"id": body["id"], "bank": "user:ada", "key": "home-city", "action": "created", "evicted": []}
    remember(tenant, key="pet", description="The person's pet", content="A cat named Miso.")
    recalled = call(tenant, "recall_memories", query="where does Ada live?")
    assert recalled.status_code == 200
    results = recalled.json()["results"]
    assert results[0]["key"] == "home-city"
    assert results[0]["content"] == "Ada lives in Oslo."
    assert set(results[0]) == {"id", "bank", "key", "description", "content", "score"}
    assert all(r["key"] != "pet" for r in results)


def test_remember_correction_is_an_update_not_a_second_note(tenant):
    remember(tenant)
    again = remember(tenant, key="home_city", content="Ada moved to Bergen.")
    assert again.json()["action"] == "updated"
    assert Note.objects.count() == 1


def test_revision_records_the_request_id(tenant):
    tenant.client.post(
        "/api/v1/tools/remember",
        {"person": "ada", "key": "k", "description": "d", "content": "c"},
        format="json",
        HTTP_X_REQUEST_ID="trace-123",
    )
    assert Revision.objects.get().request_id == "trace-123"


def test_over_cap_content_is_422_too_long_and_nothing_is_written(tenant):
    response = remember(tenant, content="x" * 2001)
    assert response.status_code == 422
    assert response.json() == {
        "error": {
            "code": "too_long",
            "message": "content is 2001 characters; the limit is 2000. Split or condense it; nothing was written.",
            "field": "content",
        }
    }
    assert not Note.objects.exists()
    assert Revision.objects.get().action == "refused"


def test_unknown_ontology_id_is_422(tenant):
    OntologyNode.objects.create(team=tenant.team, node_id="billing", label="Billing")
    response = remember(tenant, semantics=["bill"])
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "unknown_ontology_id"
    assert "Use an exact ontology id." in response.json()["error"]["message"]


def test_malformed_arguments_are_400_naming_the_field(tenant):
    response = call(tenant, "remember", key="k", description="d")
    assert response.status_code == 400
    assert response.json()["error"] == {"code": "invalid", "message": "content: Field required", "field": "content"}
    unknown = remember(tenant, colour="blue")
    assert unknown.status_code == 400
    assert unknown.json()["error"]["field"] == "colour"
    wrong_type = call(tenant, "recall_memories", query="x", limit="many")
    assert wrong_type.status_code == 400
    assert wrong_type.json()["error"]["field"] == "limit"
    not_an_object = tenant.client.post("/api/v1/tools/remember", [1, 2], format="json")
    assert not_an_object.status_code == 400


@override_settings(MEMORY_SOFT_LIMIT=1, MEMORY_HARD_LIMIT=5)
def test_full_bank_is_409_bank_full(tenant, mocker):
    mocker.patch("memory.services.capacity._enqueue_consolidation")
    remember(tenant, key="a")
    from memory.services import Actor, latch_full

    latch_full(bank=Bank.objects.get(), actor=Actor("admin", "test"), reason="test")
    response = remember(tenant, key="b")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "bank_full"
    assert remember(tenant, key="a", content="still correctable").json()["action"] == "updated"


def test_bounded_bank_refusal_is_409_refused_naming_the_weakest(tenant):
    from memory.services import Actor, update_bank_settings

    # Seven identities and one preference, written in the middle: the preference is the weakest by
    # worth, though neither the oldest nor the newest note, so only the policy can pick it.
    for i in range(8):
        if i == 3:
            remember(tenant, key="likes-tea", kind="preference", content="Likes tea.")
        else:
            remember(tenant, key=f"name-{i}", kind="identity")
    bank = Bank.objects.get()
    update_bank_settings(bank=bank, actor=Actor("admin", "test"), changes={"policy": "bounded", "capacity": 8})
    response = remember(tenant, key="on-the-train", kind="ephemeral", content="On the train.")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "refused"
    assert "'likes-tea' (preference" in error["message"]
    assert "'name-" not in error["message"]
    assert Note.objects.count() == 8
    assert not Note.objects.filter(key="on-the-train").exists()


def test_bounded_bank_eviction_is_reported_in_the_result(tenant):
    from memory.services import Actor, update_bank_settings

    for i in range(8):
        remember(tenant, key=f"mood-{i}", kind="ephemeral")
    bank = Bank.objects.get()
    update_bank_settings(bank=bank, actor=Actor("admin", "test"), changes={"policy": "bounded", "capacity": 8})
    response = remember(tenant, key="name", kind="identity", content="Ada Lovelace")
    assert response.status_code == 200
    body = response.json()
    assert body["action"] == "created"
    assert len(body["evicted"]) == 1
    assert body["evicted"][0]["key"].startswith("mood-")
    assert Note.objects.count() == 8


def test_forget_memory(tenant):
    created = remember(tenant).json()
    response = call(tenant, "forget_memory", key="home city", reason="moved")
    assert response.status_code == 200
    assert response.json() == {
        "id": created["id"],
        "bank": "user:ada",
        "key": "home-city",
        "action": "deleted",
        "evicted": [],
    }
    assert not Note.objects.exists()
    missing = call(tenant, "forget_memory", key="home-city")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


def test_remember_about_user_and_project(tenant):
    first = call(tenant, "remember_about_user", observation="Prefers replies in Norwegian.", category="preferences")
    assert first.json()["bank"] == "user:ada"
    call(
        tenant,
        "remember_about_user",
        observation="Likes short answers.",
        category="Preferences",
        summary="Norwegian, short",
    )
    note = Note.objects.get(bank__address="user:ada")
    assert note.content == "Prefers replies in Norwegian.\nLikes short answers."
    assert note.description == "Norwegian, short"
    project = call(
        tenant,
        "remember_about_project",
        project="apollo",
        observation="Deadline moved to September.",
        category="deadlines",
    )
    assert project.json()["bank"] == "scope:project:apollo"
    assert project.json()["action"] == "created"


def test_edit_note_by_id(tenant):
    created = remember(tenant, content="Ada lives in Oslo. Ada likes tea.").json()
    response = call(tenant, "edit_note", id=created["id"], mode="find_replace", find=" Ada likes tea.", content="")
    assert response.status_code == 200
    assert response.json()["action"] == "updated"
    assert Note.objects.get().content == "Ada lives in Oslo."
    mismatch = call(tenant, "edit_note", id=created["id"], mode="find_replace", find="Paris", content="x")
    assert mismatch.status_code == 422
    other_person = call(tenant, "edit_note", person="bob", id=created["id"], mode="replace", content="hijacked")
    assert other_person.status_code == 404
    assert Note.objects.get().content == "Ada lives in Oslo."


def test_search_returns_ranked_snippets(tenant):
    remember(tenant, key="diet", description="Food constraints", content="Vegetarian. " + "Eats lots of lentils. " * 20)
    remember(tenant, key="city", description="Home", content="Lives in Oslo.")
    response = call(tenant, "search", query="lentils")
    results = response.json()["results"]
    assert [r["key"] for r in results] == ["diet"]
    assert set(results[0]) == {"id", "bank", "key", "snippet", "score"}
    assert "lentils" in results[0]["snippet"]
    assert len(results[0]["snippet"]) <= 162


def test_recall_follows_links_within_the_budget(tenant):
    remember(
        tenant,
        key="project-x",
        description="Project X",
        content="Project X ships in September, after the review. See [[team-lead]].",
    )
    remember(tenant, key="team-lead", description="Lead", content="The lead of it is Grace. See [[grace-prefs]].")
    remember(tenant, key="grace-prefs", description="Grace", content="Grace wants weekly updates.")
    one_hop = call(tenant, "recall", query="project x september", depth=1).json()
    assert [(i["key"], i["via"]) for i in one_hop["items"]] == [("project-x", "match"), ("team-lead", "link:project-x")]
    assert one_hop["used_chars"] == sum(len(i["content"]) for i in one_hop["items"])
    two_hops = call(tenant, "recall", query="project x september", depth=2).json()
    assert [i["key"] for i in two_hops["items"]] == ["project-x", "team-lead", "grace-prefs"]
    tight = call(tenant, "recall", query="project x september", depth=2, budget_chars=100, max_per_source=50).json()
    assert tight["used_chars"] <= 100
    assert all(len(i["content"]) <= 50 for i in tight["items"])
    assert tight["items"][0]["truncated"] is True
    assert tight["omitted"], "what did not fit is listed, not dropped silently"


def test_scope_walls_hold_in_recall(tenant):
    remember(tenant, scope="project:apollo", key="secret-plan", description="Plan", content="Launch on Mars.")
    same_scope = call(tenant, "recall_memories", scope="project:apollo", query="launch plan").json()["results"]
    assert [r["key"] for r in same_scope] == ["secret-plan"]
    other_scope = call(tenant, "recall_memories", scope="project:zeus", query="launch plan").json()["results"]
    assert other_scope == []
    other_person = call(tenant, "recall_memories", person="bob", scope="project:apollo", query="launch plan").json()
    assert other_person["results"] == []


def test_remember_with_an_expiry(tenant):
    from datetime import timedelta

    from django.utils import timezone

    soon = (timezone.now() + timedelta(hours=2)).isoformat()
    assert remember(tenant, key="on-the-train", expires_at=soon).status_code == 200
    assert Note.objects.get().expires_at is not None
    past = remember(tenant, key="yesterday", expires_at="2020-01-01T00:00:00Z")
    assert past.status_code == 400
    assert past.json()["error"]["field"] == "expires_at"
    assert remember(tenant, key="garbage", expires_at="not a date").status_code == 400
    naive = remember(tenant, key="naive", expires_at="2099-01-01T00:00:00")
    assert naive.status_code == 400
    assert "timezone" in naive.json()["error"]["message"]


def test_tool_list_in_openai_format_declares_functions(tenant):
    plain = {tool["name"]: tool for tool in tenant.client.get("/api/v1/tools").json()["tools"]}
    response = tenant.client.get("/api/v1/tools?format=openai")
    assert response.status_code == 200
    tools = response.json()["tools"]
    assert [tool["type"] for tool in tools] == ["function"] * len(REGISTRY)
    assert {tool["function"]["name"]: tool["function"] for tool in tools} == plain


def test_tool_list_in_anthropic_format_has_input_schemas(tenant):
    plain = {tool["name"]: tool for tool in tenant.client.get("/api/v1/tools").json()["tools"]}
    response = tenant.client.get("/api/v1/tools?format=anthropic")
    assert response.status_code == 200
    tools = response.json()["tools"]
    assert all(set(tool) == {"name", "description", "input_schema"} for tool in tools)
    assert {tool["name"]: tool["input_schema"] for tool in tools} == {
        name: tool["parameters"] for name, tool in plain.items()
    }


def test_tool_list_in_an_unknown_format_is_400(tenant):
    response = tenant.client.get("/api/v1/tools?format=gemini")
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "code": "invalid",
            "message": "format: Use one of mnemo, openai, anthropic; got 'gemini'.",
            "field": "format",
        }
    }
