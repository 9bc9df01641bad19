"""mnemo_client.Mnemo against the live server: every endpoint family, and each error as its own type."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from mnemo_client import (
    TOOL_NAMES,
    AuthenticationError,
    BankFull,
    Conflict,
    ConnectionFailed,
    Invalid,
    Mnemo,
    MnemoError,
    NotFound,
    PermissionDenied,
    Refused,
    RetryPolicy,
    TooLarge,
    TooLong,
    Unprocessable,
)

from conversations.models import Message
from memory.models import Bank, Note, Revision
from memory.services import Actor, latch_full
from memory.tools import REGISTRY
from tests.support.fixtures import free_port

pytestmark = pytest.mark.django_db(transaction=True)

HOME = {"person": "ada", "key": "Home City", "description": "Where Ada lives", "content": "Ada lives in Oslo."}


def test_me_and_people(mnemo, tenant):
    assert mnemo.me() == {
        "team": tenant.team.slug, "agent": tenant.agent.slug, "agent_name": tenant.agent.name,
        "key_prefix": tenant.key.api_key.prefix, "can_admin": False,
    }  # fmt: skip
    created = mnemo.register_person("ada", display_name="Ada")
    assert (created["person"], created["display_name"]) == ("ada", "Ada")
    assert mnemo.register_person("ada", display_name="Ada L.")["display_name"] == "Ada L."
    assert mnemo.get_person("ada")["display_name"] == "Ada L."
    mnemo.register_person("auth0|42/x")
    assert mnemo.get_person("auth0|42/x")["person"] == "auth0|42/x"  # escaped in the path

    with pytest.raises(NotFound) as missing:
        mnemo.get_person("nobody")
    assert (missing.value.status, missing.value.code) == (404, "not_found")


def test_the_ten_tools_have_typed_methods_that_reach_the_server(mnemo, tenant):
    assert [tool["name"] for tool in mnemo.tools()] == list(TOOL_NAMES) == list(REGISTRY)
    assert {tool["function"]["name"] for tool in mnemo.tools("openai")} == set(TOOL_NAMES)
    assert all("input_schema" in tool for tool in mnemo.tools("anthropic"))

    expires = datetime.now(UTC) + timedelta(days=30)
    created = mnemo.remember(**HOME, kind="identity", expires_at=expires)
    assert created == {"id": created["id"], "bank": "user:ada", "key": "home-city", "action": "created", "evicted": []}
    note = Note.objects.get(pk=created["id"], team=tenant.team)
    assert (note.kind, note.expires_at) == ("identity", expires)
    assert mnemo.remember(**{**HOME, "content": "Ada lives in Bergen."})["action"] == "updated"

    recalled = mnemo.recall_memories(person="ada", query="where does Ada live?")
    assert [(hit["key"], hit["content"]) for hit in recalled["results"]] == [("home-city", "Ada lives in Bergen.")]
    searched = mnemo.search(person="ada", query="Bergen", limit=3)
    assert [hit["id"] for hit in searched["results"]] == [created["id"]]
    assert "Bergen" in searched["results"][0]["snippet"]
    bundle = mnemo.recall(person="ada", query="Bergen", budget_chars=500)
    assert [item["key"] for item in bundle["items"]] == ["home-city"]
    assert bundle["used_chars"] == len("Ada lives in Bergen.")

    edited = mnemo.edit_note(person="ada", id=created["id"], mode="find_replace", find="Bergen", content="Tromsø")
    assert edited["action"] == "updated"
    assert Note.objects.get(pk=created["id"]).content == "Ada lives in Tromsø."

    about_user = mnemo.remember_about_user(person="ada", category="food", observation="Likes brunost.")
    assert (about_user["bank"], about_user["key"]) == ("user:ada", "food")
    about_project = mnemo.remember_about_project(
        person="ada", project="apollo", category="decisions", observation="Ships on Fridays.", summary="Decisions"
    )
    assert (about_project["bank"], about_project["key"]) == ("scope:project:apollo", "decisions")

    forgotten = mnemo.forget_memory(person="ada", key="home city", reason="asked to")
    assert (forgotten["id"], forgotten["action"]) == (created["id"], "deleted")
    assert not Note.objects.filter(pk=created["id"]).exists()

    # The conversation tools, and call_tool for arguments a model wrote.
    turn = mnemo.take_turn(person="ada", message="My sister Ingrid visits in June.")
    mnemo.reply(turn["turn"], "How nice!")
    recent = mnemo.recent_messages(person="ada", conversation=turn["conversation"])
    assert [(m["role"], m["content"]) for m in recent["messages"]] == [
        ("user", "My sister Ingrid visits in June."),
        ("assistant", "How nice!"),
    ]
    found = mnemo.call_tool("search_conversation", {"person": "ada", "query": "Ingrid sister"})
    assert found == mnemo.search_conversation(person="ada", query="Ingrid sister")
    assert found["results"][0]["conversation"] == turn["conversation"]


def test_turns_conversations_and_messages(mnemo, tenant):
    turn = mnemo.take_turn(person="ada", message="I moved to Bergen last week.", profile="full", persona="Be brief.")
    assert turn["messages"][-1] == {"role": "user", "content": "I moved to Bergen last week."}
    assert {block["layer"] for block in turn["blocks"]} >= {"persona"}
    assert turn["ceiling"] > 0
    reply = mnemo.reply(turn["turn"], "Welcome to Bergen!")
    assert (reply["role"], reply["conversation"]) == ("assistant", turn["conversation"])
    with pytest.raises(Conflict) as twice:
        mnemo.reply(turn["turn"], "Again?")
    assert (twice.value.status, twice.value.code, type(twice.value)) == (409, "conflict", Conflict)

    second = mnemo.take_turn(person="ada", message="Any tips?", conversation=turn["conversation"])
    assert second["conversation"] == turn["conversation"]
    assert [m["content"] for m in second["messages"]][-1] == "Any tips?"

    started = mnemo.start_conversation("ada")
    assert (started["person"], started["agent"], started["ended_at"]) == ("ada", tenant.agent.slug, None)
    first = mnemo.add_message(started["id"], role="user", content="First.", external_id="ext-1")
    mnemo.add_message(started["id"], role="assistant", content="Second.")
    mnemo.add_message(started["id"], role="user", content="Third.")
    page = mnemo.list_messages(started["id"], limit=2)
    assert (page["count"], [m["content"] for m in page["results"]]) == (3, ["First.", "Second."])
    assert [m["content"] for m in mnemo.iter_messages(started["id"], page_size=2)] == ["First.", "Second.", "Third."]
    assert first["external_id"] == "ext-1"

    listed = mnemo.list_conversations(person="ada")
    assert listed["count"] == 2
    assert [c["id"] for c in mnemo.iter_conversations(person="ada", page_size=1)] == [
        started["id"],
        turn["conversation"],
    ]
    assert mnemo.get_conversation(started["id"])["id"] == started["id"]
    assert mnemo.end_conversation(started["id"])["ended_at"] is not None

    mnemo.delete_message(started["id"], first["id"])
    assert "First." not in [m["content"] for m in mnemo.iter_messages(started["id"])]
    assert not Message.objects.filter(content="First.").exists()
    mnemo.delete_conversation(started["id"])
    with pytest.raises(NotFound):
        mnemo.get_conversation(started["id"])


def test_notes_page_by_page_get_delete_and_their_revisions(mnemo, tenant, other_tenant, web_server):
    ids = [
        mnemo.remember(person="ada", key=f"fact-{i}", description=f"Fact {i}", content=f"Fact number {i}.")["id"]
        for i in range(5)
    ]
    page = mnemo.list_notes(person="ada", limit=2, offset=1)
    assert (page["count"], [n["id"] for n in page["results"]]) == (5, ids[1:3])
    assert [n["id"] for n in mnemo.iter_notes(person="ada", page_size=2)] == ids
    assert [n["key"] for n in mnemo.iter_notes(bank="user:ada", page_size=3)] == [f"fact-{i}" for i in range(5)]

    note = mnemo.get_note(ids[0])
    assert (note["key"], note["bank"], note["person"], note["content"]) == (
        "fact-0",
        "user:ada",
        "ada",
        "Fact number 0.",
    )
    with Mnemo(web_server, api_key=other_tenant.key.plaintext) as stranger, pytest.raises(NotFound):
        stranger.get_note(ids[0])  # another team's note is not found, not forbidden

    assert mnemo.delete_note(ids[0]) == {"id": ids[0], "bank": "user:ada", "key": "fact-0", "action": "deleted"}
    with pytest.raises(NotFound):
        mnemo.get_note(ids[0])
    revisions = mnemo.list_revisions(note=ids[0])
    assert [r["action"] for r in revisions["results"]] == ["delete", "create"]  # newest first
    assert (
        len(list(mnemo.iter_revisions(person="ada", page_size=2))) == Revision.objects.filter(team=tenant.team).count()
    )


def test_banks_are_listed_read_and_changed_with_an_admin_key(web_server, tenant, admin_tenant):
    with Mnemo(web_server, api_key=admin_tenant.key.plaintext) as admin:
        admin.remember(person="ada", scope="project:apollo", key="role", description="Role", content="Ada leads.")
        banks = admin.list_banks(person="ada")
        assert [bank["id"] for bank in banks["results"]] == ["user:ada:project:apollo"]
        assert [bank["id"] for bank in admin.iter_banks(page_size=1)] == ["user:ada:project:apollo"]
        bank = admin.get_bank("user:ada:project:apollo")  # colons are escaped in the path
        assert (bank["kind"], bank["person"], bank["scope"], bank["count"]) == ("private", "ada", "project:apollo", 1)

        changed = admin.update_bank("user:ada:project:apollo", policy="bounded", capacity=1)
        assert (changed["policy"], changed["capacity"]) == ("bounded", 1)
        assert Bank.objects.get(team=admin_tenant.team, address="user:ada:project:apollo").capacity == 1

        # The bank is at capacity with a durable note; a passing state is worth less and is refused.
        with pytest.raises(Refused) as refused:
            admin.remember(person="ada", scope="project:apollo", key="mood", description="Mood", content="Tired.",
                           kind="ephemeral")  # fmt: skip
        assert (refused.value.status, refused.value.code) == (409, "refused")
        assert "role" in refused.value.message
        assert isinstance(refused.value, Conflict)

        with pytest.raises(Invalid) as invalid:
            admin.update_bank("user:ada:project:apollo", policy="forgetful")
        assert invalid.value.field == "policy"

    with Mnemo(web_server, api_key=tenant.key.plaintext) as agent:
        agent.remember(person="ada", key="x", description="X", content="X.")
        with pytest.raises(PermissionDenied) as denied:
            agent.update_bank("user:ada", capacity=3)
        assert (denied.value.status, denied.value.code) == (403, "permission_denied")


def test_a_package_exported_from_one_team_imports_into_another_once(mnemo, web_server, other_tenant):
    mnemo.remember(**HOME)
    mnemo.remember_about_user(person="ada", category="food", observation="Likes brunost.")
    package = mnemo.export_memories("ada")
    assert package["format"] == "mnemo.memory-package"
    assert sorted(n["key"] for bank in package["banks"] for n in bank["notes"]) == ["food", "home-city"]

    with Mnemo(web_server, api_key=other_tenant.key.plaintext) as other:
        report = other.import_memories(package)
        assert (report["created"], report["refused"]) == (2, 0)
        assert other.import_memories(package)["unchanged"] == 2  # idempotent by key
        assert sorted(n["key"] for n in other.iter_notes(person="ada")) == ["food", "home-city"]
    with pytest.raises(NotFound):
        mnemo.export_memories("nobody")


def test_errors_carry_their_status_code_field_and_message(mnemo, tenant, web_server):
    with pytest.raises(TooLong) as too_long:
        mnemo.remember(**{**HOME, "content": "x" * 2001})
    error = too_long.value
    assert (error.status, error.code, error.field) == (422, "too_long", "content")
    assert error.message == "content is 2001 characters; the limit is 2000. Split or condense it; nothing was written."
    assert error.request_id
    assert isinstance(error, Unprocessable)
    assert not Note.objects.filter(team=tenant.team).exists()  # refused, not trimmed

    with pytest.raises(Unprocessable) as unknown_tag:
        mnemo.remember(**HOME, semantics=["no-such-tag"])
    assert (unknown_tag.value.code, type(unknown_tag.value)) == ("unknown_ontology_id", Unprocessable)
    assert "Use an exact ontology id." in unknown_tag.value.message

    with pytest.raises(Invalid) as invalid:
        mnemo.search(person="ada", query="x", limit=0)
    assert (invalid.value.status, invalid.value.code, invalid.value.field) == (400, "invalid", "limit")
    with pytest.raises(Invalid) as unknown_argument:
        mnemo.call_tool("remember", {**HOME, "colour": "blue"})
    assert unknown_argument.value.field == "colour"

    with pytest.raises(NotFound) as missing:
        mnemo.get_note(10**9)
    assert str(missing.value).startswith("404 not_found: ")

    mnemo.remember(**HOME)
    latch_full(bank=Bank.objects.get(team=tenant.team), actor=Actor("admin", "test"), reason="test")
    with pytest.raises(BankFull) as full:
        mnemo.remember(person="ada", key="new", description="New", content="Something new.")
    assert (full.value.status, full.value.code) == (409, "bank_full")
    assert mnemo.remember(**{**HOME, "content": "Ada lives in Oslo again."})["action"] == "updated"

    with pytest.raises(TooLarge) as too_large:
        mnemo.remember(**{**HOME, "content": "x" * 1_100_000})
    assert too_large.value.status == 413

    with Mnemo(web_server, api_key="mnemo_nope_nope") as stranger, pytest.raises(AuthenticationError) as unknown_key:
        stranger.me()
    assert (unknown_key.value.status, unknown_key.value.code) == (401, "not_authenticated")

    nowhere = Mnemo(f"http://127.0.0.1:{free_port()}", api_key="k", retry=RetryPolicy(max_retries=0))
    with nowhere, pytest.raises(ConnectionFailed) as unreachable:
        nowhere.me()
    assert unreachable.value.status is None
    assert isinstance(unreachable.value.__cause__, httpx.ConnectError)
    assert all(issubclass(cls, MnemoError) for cls in (TooLong, Invalid, NotFound, BankFull, ConnectionFailed))


def test_the_key_and_url_come_from_the_environment(monkeypatch, web_server, tenant):
    monkeypatch.setenv("MNEMO_URL", web_server + "/")
    monkeypatch.setenv("MNEMO_KEY", tenant.key.plaintext)
    with Mnemo() as mnemo:
        assert mnemo.base_url == web_server
        assert mnemo.me()["team"] == tenant.team.slug
    monkeypatch.delenv("MNEMO_KEY")
    with pytest.raises(ValueError, match="MNEMO_KEY"):
        Mnemo()


def test_an_admin_key_erases_a_note_and_a_person_and_an_ordinary_key_may_not(web_server, tenant, admin_tenant):
    with Mnemo(web_server, api_key=admin_tenant.key.plaintext) as admin:
        note = admin.remember(person="ada", key="home-city", description="Home", content="Cnrytown.")
        admin.remember(person="ada", key="pet", description="Pet", content="A cat.")
        admin.remember_about_user(person="bob", observation="Bob likes tea.", category="drinks")
        erased = admin.delete_note(note["id"], erase=True)
        assert erased["action"] == "erased"
        assert not Revision.objects.filter(team=admin_tenant.team, note_key="home-city").exists()
        report = admin.erase_person("ada")
        assert report["erased"]["notes"] == 1
        assert report["person_row"] == "tombstone"
        assert admin.erase_person("bob", hard=True)["person_row"] == "deleted"
        with pytest.raises(NotFound):
            admin.get_person("bob")
    with Mnemo(web_server, api_key=tenant.key.plaintext) as agent:
        agent.remember(person="ada", key="pet", description="Pet", content="A dog.")
        with pytest.raises(PermissionDenied) as refused:
            agent.erase_person("ada")
        assert (refused.value.status, refused.value.code) == (403, "permission_denied")


def test_an_admin_key_mutes_a_note_and_a_category_lists_and_unmutes_them(web_server, tenant, admin_tenant):
    with Mnemo(web_server, api_key=admin_tenant.key.plaintext) as admin:
        home = admin.remember(person="ada", key="home-city", description="Home", content="Ada lives in Oslo.")
        admin.remember(person="ada", key="allergy", description="Allergy", content="Peanuts.", category="health")
        (of_note,) = admin.mute("ada", note=home["id"], agent=admin_tenant.agent.slug)
        (of_category,) = admin.mute("ada", category="health")  # every agent of the team: this one
        assert (of_note["note"], of_note["category"]) == (home["id"], None)
        assert (of_category["note"], of_category["category"]) == (None, "health")
        assert [m["id"] for m in admin.list_mutes(person="ada")["results"]] == [of_note["id"], of_category["id"]]
        assert admin.recall_memories(person="ada", query="Oslo peanuts")["results"] == []
        with pytest.raises(Invalid):
            admin.mute("ada", note=home["id"], category="health")
        with pytest.raises(NotFound):
            admin.mute("ada", note=home["id"] + 10_000)
        admin.unmute(of_note["id"])
        assert [m["id"] for m in admin.list_mutes()["results"]] == [of_category["id"]]
        assert [r["key"] for r in admin.recall_memories(person="ada", query="Oslo")["results"]] == ["home-city"]
    with Mnemo(web_server, api_key=tenant.key.plaintext) as agent, pytest.raises(PermissionDenied):
        agent.list_mutes()


def test_history_import_and_its_job(mnemo, tenant):
    line = {
        "person": "ada",
        "external_id": "c-1",
        "messages": [
            {"role": "user", "content": "I adopted a greyhound", "created_at": "2023-05-08T13:56:00Z", "external_id": "m1"},
            {"role": "assistant", "content": "Lovely!", "created_at": "2023-05-08T13:57:00Z", "external_id": "m2"},
        ],
    }  # fmt: skip
    job = mnemo.import_conversations([line])
    assert (job["messages_created"], job["messages_present"], job["status"]) == (2, 0, "embedding")
    assert mnemo.get_conversation_import(job["id"])["messages_created"] == 2
    again = mnemo.import_conversations([line])
    assert (again["messages_created"], again["messages_present"]) == (0, 2)
    with pytest.raises(Invalid) as bad:
        mnemo.import_conversations([line, {"person": "ada", "external_id": "c-2", "messages": []}])
    assert bad.value.message.startswith("line 2:")
    assert bad.value.field == "[1].messages"
    with pytest.raises(NotFound):
        mnemo.get_conversation_import(job["id"] + 1000)
