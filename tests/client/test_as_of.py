"""The client's as_of: on the notes list and on recall_memories, search and recall, sync and async."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from mnemo_client import AsyncMnemo, Invalid

from tests.support.fixtures import run_async

pytestmark = pytest.mark.django_db(transaction=True)

QUERY = "where does Ada live"


def test_as_of_answers_with_what_a_note_said_then(mnemo):
    created = mnemo.remember(
        person="ada", key="home-city", description="Where Ada lives", content="Ada lives in Oslo (ibexone)."
    )
    then = datetime.now(UTC)
    mnemo.remember(
        person="ada", key="home-city", description="Where Ada lives", content="Ada lives in Bergen (ibextwo)."
    )
    [listed] = mnemo.list_notes(person="ada", as_of=then)["results"]
    assert (listed["id"], listed["content"]) == (created["id"], "Ada lives in Oslo (ibexone).")
    assert "source" not in listed
    assert [note["content"] for note in mnemo.iter_notes(person="ada", as_of=then.isoformat())] == [listed["content"]]
    assert mnemo.recall_memories(person="ada", query=QUERY, as_of=then)["results"][0]["content"] == listed["content"]
    assert "ibexone" in mnemo.search(person="ada", query=QUERY, as_of=then)["results"][0]["snippet"]
    assert mnemo.recall(person="ada", query=QUERY, as_of=then)["items"][0]["content"] == listed["content"]
    # Today, as a date: the end of the day so far, which is now.
    assert "ibextwo" in mnemo.list_notes(person="ada", as_of=then.date())["results"][0]["content"]
    assert "ibextwo" in mnemo.recall_memories(person="ada", query=QUERY)["results"][0]["content"]


def test_a_bad_as_of_is_invalid_and_says_the_format(mnemo):
    with pytest.raises(Invalid) as listed:
        mnemo.list_notes(person="ada", as_of="last tuesday")
    assert listed.value.field == "as_of"
    assert "ISO 8601" in str(listed.value)
    with pytest.raises(Invalid) as searched:
        mnemo.search(person="ada", query=QUERY, as_of="2999-01-01")
    assert "in the future" in str(searched.value)


def test_the_async_client_takes_as_of_too(web_server, tenant):
    async def scenario() -> None:
        async with AsyncMnemo(web_server, api_key=tenant.key.plaintext) as mnemo:
            await mnemo.remember(
                person="ada", key="pet", description="Ada's pet", content="A cat named Miso (ibexcat)."
            )
            then = datetime.now(UTC)
            await mnemo.forget_memory(person="ada", key="pet")
            [listed] = (await mnemo.list_notes(person="ada", as_of=then))["results"]
            assert "ibexcat" in listed["content"]
            found = await mnemo.recall_memories(person="ada", query="Ada's cat", as_of=then)
            assert "ibexcat" in found["results"][0]["content"]
            assert (await mnemo.recall_memories(person="ada", query="Ada's cat"))["results"] == []

    run_async(scenario)
