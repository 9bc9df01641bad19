"""An erasure holds in every web process the moment it commits, not only in the one that erased.

Each web process keeps the words and vectors of the person-agent pairs it has searched
(conversations/kept_pairs.py). Two web servers (each one process, started as `manage.py run`
starts them) both search a pair and so keep it; one erases, and the other, asked at once, must not
find what was erased in what it keeps.

Two guards hold it, and this test sees them together: the kept pair notices the conversation's
erasure count changed and reads that conversation again, and the hits are read back from the
database, where an erased message is a tombstone. With the first guard switched off the second
still holds (tried by hand), which is the point of having both.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any
from uuid import uuid4

import httpx
import pytest

from accounts.services import issue_api_key
from conversations.services import start_conversation
from curator.providers import RulesProvider
from curator.services import curate_conversation
from memory.models import Note
from tests.support.factories import PersonFactory, chat
from tests.support.fixtures import LiveServer, Tenant, serve_web

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def two_servers(django_db_setup: None, django_db_blocker: Any) -> Iterator[list[LiveServer]]:
    with ExitStack() as stack, django_db_blocker.unblock():
        yield [stack.enter_context(serve_web(name, API_RATE="1000000/min")) for name in ("keep-a", "keep-b")]


def search(server: LiveServer, key: str, query: str) -> str:
    answer = httpx.post(
        f"{server.url}/api/v1/tools/search_conversation",
        json={"person": "ada", "query": query, "limit": 10},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return json.dumps(answer.json())


def a_pair_with_a_canary(tenant: Tenant) -> tuple[str, int, int]:
    """Ada's conversation with the agent, with a canary in one message and a note learned from it.
    Returns the canary, the message's conversation and the message."""
    canary = f"cnry{uuid4().hex[:10]}"
    person = PersonFactory.create(team=tenant.team, external_id="ada")
    conversation = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    said = chat(
        conversation,
        [("I'm vegetarian.", "Noted."), (f"I really love {canary} pastries.", "Lovely!"), ("I like tea.", "Good.")]
        + [(f"Small talk number {i} about the weather.", "Indeed.") for i in range(20)],
    )
    return canary, conversation.pk, said[2].pk


@pytest.mark.parametrize("erase", ["message", "note"])
def test_what_one_process_erases_the_other_no_longer_finds(two_servers: list[LiveServer], tenant: Tenant, erase):
    keeper, eraser = two_servers
    canary, conversation, message = a_pair_with_a_canary(tenant)
    query = f"{canary} pastries"
    for server in (keeper, eraser):  # each now keeps the pair
        assert canary in search(server, tenant.key.plaintext, query)
        assert canary in search(server, tenant.key.plaintext, query)

    admin = issue_api_key(agent=tenant.agent, name="admin", can_admin=True).plaintext
    headers = {"Authorization": f"Bearer {admin}"}
    if erase == "message":
        done = httpx.delete(
            f"{eraser.url}/api/v1/conversations/{conversation}/messages/{message}", headers=headers, timeout=30
        )
        assert done.status_code in (200, 204), done.text
    else:
        curate_conversation(conversation_id=conversation, provider=RulesProvider())
        note = Note.objects.get(team=tenant.team, key=f"preference-{canary}-pastries")
        done = httpx.delete(f"{eraser.url}/api/v1/notes/{note.pk}?erase=true", headers=headers, timeout=30)
        assert done.status_code == 200, done.text
        assert done.json()["erased"]["messages"] == 1

    # At once, and in the process that did not erase: nothing of the canary in what it finds.
    assert canary not in search(keeper, tenant.key.plaintext, query)
    assert canary not in search(eraser, tenant.key.plaintext, query)
    # The pair is still searched from what is kept, not dropped whole: the rest is found.
    assert "vegetarian" in search(keeper, tenant.key.plaintext, "vegetarian")
