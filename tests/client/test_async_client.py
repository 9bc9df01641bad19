"""mnemo_client.AsyncMnemo: the same surface as Mnemo, awaited, against the live server."""

from __future__ import annotations

import inspect

import pytest
from mnemo_client import AsyncMnemo, BankFull, Conflict, Invalid, Mnemo, NotFound, TooLong

from memory.models import Bank, Note
from memory.services import Actor, latch_full
from tests.support.fixtures import run_async


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def test_the_async_client_has_the_sync_clients_methods_with_the_same_signatures():
    sync, asynchronous = public_methods(Mnemo), public_methods(AsyncMnemo)
    assert sync.keys() == asynchronous.keys()
    for name, signature in sync.items():
        other = asynchronous[name]
        assert list(signature.parameters.values())[1:] == list(other.parameters.values())[1:], name
        if name.startswith("iter_"):  # an iterator of pages either way; the async one is used with `async for`
            assert other.return_annotation == signature.return_annotation.replace("Iterator", "AsyncIterator")
            continue
        assert inspect.iscoroutinefunction(getattr(AsyncMnemo, name)), name
        assert other.return_annotation == signature.return_annotation, name


@pytest.mark.django_db(transaction=True)
def test_async_tools_turns_notes_banks_and_packages(web_server, tenant):
    async def scenario() -> None:
        async with AsyncMnemo(web_server, api_key=tenant.key.plaintext) as mnemo:
            assert (await mnemo.me())["agent"] == tenant.agent.slug
            created = await mnemo.remember(person="ada", key="pet", description="Ada's pet", content="A cat, Pus.")
            assert (created["bank"], created["action"]) == ("user:ada", "created")
            recalled = await mnemo.recall_memories(person="ada", query="what pet does Ada have?")
            assert [hit["id"] for hit in recalled["results"]] == [created["id"]]
            assert (await mnemo.search(person="ada", query="cat"))["results"][0]["key"] == "pet"
            assert (await mnemo.recall(person="ada", query="cat"))["items"][0]["content"] == "A cat, Pus."
            note_id = created["id"]
            assert note_id is not None
            await mnemo.edit_note(person="ada", id=note_id, mode="replace", content="A cat called Pus.")
            await mnemo.remember_about_user(person="ada", category="food", observation="Likes figs.")
            await mnemo.remember_about_project(person="ada", project="x", category="notes", observation="Kick-off.")

            turn = await mnemo.take_turn(person="ada", message="Pus caught a mouse today.")
            await mnemo.reply(turn["turn"], "Good cat.")
            with pytest.raises(Conflict):
                await mnemo.reply(turn["turn"], "Again.")
            recent = await mnemo.recent_messages(person="ada")
            assert [m["content"] for m in recent["messages"]] == ["Pus caught a mouse today.", "Good cat."]
            hits = await mnemo.search_conversation(person="ada", query="mouse caught")
            assert hits["results"][0]["role"] == "user"

            conversation = await mnemo.start_conversation("ada")
            await mnemo.add_message(conversation["id"], role="user", content="Hello.")
            assert [m["content"] async for m in mnemo.iter_messages(conversation["id"], page_size=1)] == ["Hello."]
            assert (await mnemo.list_messages(conversation["id"]))["count"] == 1
            assert len([c async for c in mnemo.iter_conversations(person="ada", page_size=1)]) == 2
            assert (await mnemo.end_conversation(conversation["id"]))["ended_at"] is not None
            await mnemo.delete_conversation(conversation["id"])
            with pytest.raises(NotFound):
                await mnemo.get_conversation(conversation["id"])

            keys = [note["key"] async for note in mnemo.iter_notes(person="ada", page_size=1)]
            assert keys == ["pet", "food"]
            assert (await mnemo.get_note(note_id))["content"] == "A cat called Pus."
            assert [bank["id"] async for bank in mnemo.iter_banks(page_size=1)] == ["scope:project:x", "user:ada"]
            assert (await mnemo.get_bank("user:ada"))["count"] == 2
            assert [r["action"] async for r in mnemo.iter_revisions(note=created["id"])] == ["update", "create"]

            package = await mnemo.export_memories("ada")
            # Her two notes, and the project note written about her in the shared bank.
            assert (await mnemo.import_memories(package))["unchanged"] == 3
            assert [c["messages"][0]["content"] for c in package["conversations"]] == ["Pus caught a mouse today."]
            assert (await mnemo.forget_memory(person="ada", key="pet"))["action"] == "deleted"
            assert (await mnemo.delete_note((await mnemo.list_notes(person="ada"))["results"][0]["id"]))[
                "key"
            ] == "food"

    run_async(scenario)
    assert not Note.objects.filter(team=tenant.team, bank__address="user:ada").exists()


@pytest.mark.django_db(transaction=True)
def test_async_errors_are_the_same_types(web_server, tenant):
    def client() -> AsyncMnemo:
        return AsyncMnemo(web_server, api_key=tenant.key.plaintext)

    async def refusals() -> None:
        async with client() as mnemo:
            with pytest.raises(TooLong) as too_long:
                await mnemo.remember(person="ada", key="k" * 65, description="d", content="c")
            assert (too_long.value.status, too_long.value.field) == (422, "key")
            with pytest.raises(Invalid) as invalid:
                await mnemo.list_notes(limit=10_000)
            assert invalid.value.field == "limit"
            await mnemo.remember(person="ada", key="a", description="A", content="A.")

    async def full_bank() -> None:
        async with client() as mnemo:
            with pytest.raises(BankFull):
                await mnemo.remember(person="ada", key="b", description="B", content="B.")

    run_async(refusals)
    latch_full(bank=Bank.objects.get(team=tenant.team, address="user:ada"), actor=Actor("admin", "test"), reason="t")
    run_async(full_bank)
