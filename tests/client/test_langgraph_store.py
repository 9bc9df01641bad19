"""mnemo_client.langgraph.MnemoStore: LangGraph's BaseStore on Mnemo banks and notes, with the real langgraph."""

from __future__ import annotations

import json
from typing import TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, ListNamespacesOp, PutOp, SearchOp
from mnemo_client import AsyncMnemo, Mnemo, TooLong
from mnemo_client.langgraph import MnemoStore, note_key

from memory.models import Note
from tests.support.fixtures import run_async

pytestmark = pytest.mark.django_db(transaction=True)

ADA = ("user", "ada")
APOLLO = ("user", "ada", "project", "apollo")
BOB = ("user", "bob")


@pytest.fixture
def store(mnemo: Mnemo) -> MnemoStore:
    return MnemoStore(mnemo)


def test_put_get_search_and_delete(store, mnemo, tenant):
    store.put(ADA, "food", {"likes": ["brunost", "figs"], "spicy": False, "rating": 4})
    store.put(ADA, "Favourite Colour/Primary", {"colour": "green", "rating": 2, "description": "Ada's colour"})

    item = store.get(ADA, "food")
    assert (item.namespace, item.key, item.value) == (
        ADA,
        "food",
        {"likes": ["brunost", "figs"], "spicy": False, "rating": 4},
    )
    note = Note.objects.get(team=tenant.team, bank__address="user:ada", key="food")
    assert json.loads(note.content) == {"key": "food", "value": item.value}
    assert (note.description, item.created_at, item.updated_at) == (
        'LangGraph item "food"',
        note.created_at,
        note.updated_at,
    )

    # A key that is not a slug keeps its exact spelling; its note key is a slug with a hash of the key.
    colour = store.get(ADA, "Favourite Colour/Primary")
    assert colour.key == "Favourite Colour/Primary"
    assert note_key(colour.key).startswith("favourite-colour-primary-")
    assert Note.objects.get(key=note_key(colour.key)).description == "Ada's colour"
    assert store.get(ADA, "favourite colour/primary") is None  # another key, another note

    store.put(ADA, "food", {"likes": ["brunost"], "spicy": True, "rating": 5})  # an upsert: one note, updated
    assert store.get(ADA, "food").value["spicy"] is True
    assert Note.objects.filter(team=tenant.team, key="food").count() == 1

    assert [i.key for i in store.search(ADA)] == ["food", "Favourite Colour/Primary"]  # newest first
    assert [i.key for i in store.search(ADA, filter={"rating": {"$gte": 3}})] == ["food"]
    assert [i.key for i in store.search(ADA, filter={"likes": ["brunost"], "spicy": True})] == ["food"]
    assert [i.key for i in store.search(ADA, filter={"colour": {"$ne": "green"}})] == ["food"]
    assert [i.key for i in store.search(ADA, limit=1, offset=1)] == ["Favourite Colour/Primary"]

    ranked = store.search(ADA, query="green colour")
    assert [i.key for i in ranked] == ["Favourite Colour/Primary"]
    assert ranked[0].score > 0

    # A note written by anything else is an item under its own key.
    mnemo.remember(person="ada", key="home-city", description="Where Ada lives", content="Ada lives in Oslo.")
    assert store.get(ADA, "home-city").value == {
        "content": "Ada lives in Oslo.", "description": "Where Ada lives", "kind": "fact", "category": "",
    }  # fmt: skip

    store.delete(ADA, "food")
    assert store.get(ADA, "food") is None
    assert not Note.objects.filter(team=tenant.team, key="food").exists()
    store.delete(ADA, "food")  # deleting what is not there is not an error

    with pytest.raises(TooLong) as too_long:
        store.put(ADA, "essay", {"text": "x" * 2000})
    assert too_long.value.field == "content"
    assert store.get(ADA, "essay") is None  # refused whole, never cut

    for bad in [("memories", "ada"), ("user",), ("user", "ada", "project:apollo")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "k", {"v": 1})


def test_namespaces_are_kept_apart_and_listed(store, tenant):
    store.put(ADA, "k", {"where": "everywhere"})
    store.put(APOLLO, "k", {"where": "apollo"})
    store.put(BOB, "k", {"where": "bob"})
    store.put(("user", "bob", "project", "zeus"), "other", {"where": "zeus"})

    assert store.get(ADA, "k").value == {"where": "everywhere"}
    assert store.get(APOLLO, "k").value == {"where": "apollo"}
    assert store.get(BOB, "k").value == {"where": "bob"}
    assert store.get(("user", "ada", "project", "zeus"), "k") is None
    banks = set(Note.objects.filter(team=tenant.team, key="k").values_list("bank__address", flat=True))
    assert banks == {"user:ada", "user:ada:project:apollo", "user:bob"}

    assert {(i.namespace, i.value["where"]) for i in store.search(("user", "ada"))} == {
        (ADA, "everywhere"),
        (APOLLO, "apollo"),
    }
    assert [i.value["where"] for i in store.search(APOLLO)] == ["apollo"]

    assert store.list_namespaces() == [ADA, APOLLO, BOB, ("user", "bob", "project", "zeus")]
    assert store.list_namespaces(prefix=("user", "ada")) == [ADA, APOLLO]
    assert store.list_namespaces(suffix=("zeus",)) == [("user", "bob", "project", "zeus")]
    assert store.list_namespaces(prefix=("user", "*", "project")) == [APOLLO, ("user", "bob", "project", "zeus")]
    assert store.list_namespaces(max_depth=2) == [ADA, BOB]
    assert store.list_namespaces(limit=2, offset=1) == [APOLLO, BOB]

    store.delete(APOLLO, "k")  # an empty bank is no namespace
    assert store.list_namespaces(prefix=("user", "ada")) == [ADA]


def test_teams_never_meet(store, web_server, other_tenant):
    store.put(ADA, "secret", {"pin": "1234"})
    with Mnemo(web_server, api_key=other_tenant.key.plaintext) as other_client:
        other = MnemoStore(other_client)
        assert other.get(ADA, "secret") is None
        assert other.search(("user",)) == []
        assert other.search(ADA, query="pin 1234") == []
        assert other.list_namespaces() == []
        other.put(ADA, "secret", {"pin": "other team's"})
        other.delete(ADA, "secret")
    assert store.get(ADA, "secret").value == {"pin": "1234"}


def test_batch_and_abatch_run_their_operations_in_order(web_server, tenant, mnemo):
    put, get = PutOp(ADA, "a", {"n": 1}), GetOp(ADA, "a")
    results = MnemoStore(mnemo).batch(
        [get, put, get, SearchOp(("user",), {"n": 1}, 10, 0), ListNamespacesOp(), PutOp(ADA, "a", None), get]
    )
    assert results[:2] == [None, None]
    assert results[2].value == {"n": 1}
    assert [i.key for i in results[3]] == ["a"]
    assert results[4] == [ADA]
    assert results[5:] == [None, None]

    async def scenario() -> None:
        async with AsyncMnemo(web_server, api_key=tenant.key.plaintext) as async_client:
            store = MnemoStore(async_client=async_client)
            await store.aput(APOLLO, "launch", {"text": "The launch is on Friday."})
            launch = await store.aget(APOLLO, "launch")
            assert launch is not None
            assert launch.value == {"text": "The launch is on Friday."}
            assert [i.key for i in await store.asearch(("user", "ada"), query="when is the launch?")] == ["launch"]
            assert await store.alist_namespaces() == [APOLLO]
            await store.adelete(APOLLO, "launch")
            assert await store.aget(APOLLO, "launch") is None
        with pytest.raises(RuntimeError, match="only an AsyncMnemo"):
            store.get(APOLLO, "launch")
        # With only a sync client, the async methods run it in a thread.
        assert await MnemoStore(mnemo).alist_namespaces() == []

    run_async(scenario)


class Chat(TypedDict):
    message: str
    answer: str


def remember_or_answer(state: Chat, config: RunnableConfig, *, store: BaseStore) -> dict[str, str]:
    """A stand-in for a model: 'remember: X' stores X; anything else is answered from what is stored."""
    namespace = ("user", config["configurable"]["user_id"])
    if state["message"].startswith("remember: "):
        fact = state["message"].removeprefix("remember: ")
        store.put(namespace, "home", {"text": fact, "description": "Where the person lives"})
        return {"answer": "Noted."}
    found = store.search(namespace, query=state["message"], limit=1)
    return {"answer": found[0].value["text"] if found else "I don't know."}


def test_a_graph_remembers_across_threads(store, mnemo, tenant):
    builder = StateGraph(Chat)
    builder.add_node("respond", remember_or_answer)
    builder.add_edge(START, "respond")
    builder.add_edge("respond", END)
    graph = builder.compile(checkpointer=InMemorySaver(), store=store)

    def ask(thread: str, message: str) -> str:
        config: RunnableConfig = {"configurable": {"thread_id": thread, "user_id": "ada"}}
        return graph.invoke({"message": message, "answer": ""}, config)["answer"]

    assert ask("thread-1", "where do I live?") == "I don't know."
    assert ask("thread-1", "remember: Ada lives in Oslo") == "Noted."
    assert ask("thread-2", "where do I live?") == "Ada lives in Oslo"  # another thread, the same memory

    # It is Mnemo memory like any other: the next turn an agent composes for Ada shows it.
    turn = mnemo.take_turn(person="ada", message="Where do I live again?")
    notes = next(block["text"] for block in turn["blocks"] if block["layer"] == "notes")
    assert "Where the person lives" in notes
    assert Note.objects.get(team=tenant.team, bank__address="user:ada", key="home").source == "remember"
