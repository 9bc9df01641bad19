"""A process keeps a turn's applicable notes and their digest per version of the banks it read
(memory.queries.turn_notes): every write path raises the version, so the next turn shows the write."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from conversations.composer import compose
from conversations.services import record_message, start_conversation
from curator.providers import ScriptedProvider
from curator.schemas import ConsolidationPlan, Drop, Merge
from curator.services import consolidate_bank
from memory import queries
from memory.models import Bank, Note
from memory.services import (
    Actor,
    delete_note,
    edit_note,
    erase_note,
    erase_person,
    latch_full,
    mute_category,
    remember,
    request_consolidation,
    unmute_category,
)

pytestmark = pytest.mark.django_db

SCOPE = "project:apollo"


@pytest.fixture
def noted(tenant, person, actor):
    """Ada has three notes in her banks of project:apollo, one of them shared."""
    for key, bank, category in (("tea", "private", "food"), ("rain", "global", ""), ("harbour", "shared", "")):
        remember(
            team=tenant.team, person=person, actor=actor, scope=SCOPE, bank=bank, key=key, category=category,
            description=f"About {key}", content=f"Ada said something about {key}.",
        )  # fmt: skip


def digest(tenant, person, conversation, *, agent=None) -> str:
    """The notes block of a turn (the digest, then the notes shown in full)."""
    message = record_message(conversation=conversation, role="user", content="What do you remember about me?")
    composition = compose(
        team=tenant.team, agent=agent or tenant.agent, person=person, conversation=conversation, message=message,
        scope=SCOPE,
    )  # fmt: skip
    return next(block.text for block in composition.blocks if block.layer == "notes")


def turn_order(tenant, person, vector) -> list[str]:
    """The keys of a turn's notes in the order the composer gives them, ranked against `vector`."""
    from memory.embedders import get_embedder

    embedder = get_embedder()
    assert embedder is not None
    found = queries.turn_notes(
        team=tenant.team, person=person, agent=tenant.agent, scope=SCOPE, context=None, vector=vector,
        model=embedder.model, dim=embedder.dim,
    )  # fmt: skip
    return [note.key for note in found.notes]


def kept_versions() -> list[tuple[tuple[int, int, bool], ...]]:
    return [kept.banks for kept in queries._kept.values()]


def test_the_first_turn_keeps_its_notes_and_the_next_reuses_them(tenant, person, conversation, noted):
    first = digest(tenant, person, conversation)
    kept = kept_versions()

    assert len(kept) == 1
    assert digest(tenant, person, conversation) == first
    assert kept_versions() == kept


def test_a_remember_shows_in_the_next_turn(tenant, person, actor, conversation, noted):
    assert "sailing" not in digest(tenant, person, conversation)

    remember(team=tenant.team, person=person, actor=actor, scope=SCOPE, key="sailing", description="Sails on Sundays",
             content="Ada sails on Sundays.")  # fmt: skip

    assert '"sailing"' in digest(tenant, person, conversation)


def test_an_edit_shows_in_the_next_turn(tenant, person, actor, conversation, noted):
    assert "Earl Grey" not in digest(tenant, person, conversation)

    edit_note(
        note=Note.objects.get(key="tea"), actor=actor, mode="replace", content="Ada drinks Earl Grey.",
        description="Drinks Earl Grey",
    )  # fmt: skip

    shown = digest(tenant, person, conversation)
    assert "Drinks Earl Grey" in shown
    assert "Ada drinks Earl Grey." in shown  # the full text too: its line length was read again


def test_an_edit_of_a_content_the_turn_kept_shows_in_the_next_turn_even_at_the_same_length(
    tenant, person, actor, conversation, noted
):
    assert "Ada said something about tea." in digest(tenant, person, conversation)  # its content kept since
    assert "Ada said something about tea." in digest(tenant, person, conversation)

    edit_note(note=Note.objects.get(key="tea"), actor=actor, mode="replace", content="Ada said something about tee.")

    shown = digest(tenant, person, conversation)
    assert "Ada said something about tee." in shown
    assert "about tea." not in shown


def test_a_delete_and_an_erasure_show_in_the_next_turn(tenant, person, actor, conversation, noted):
    assert '"tea"' in digest(tenant, person, conversation)

    delete_note(note=Note.objects.get(key="tea"), actor=actor)
    assert '"tea"' not in digest(tenant, person, conversation)

    erase_note(note=Note.objects.get(key="harbour"), actor=actor)
    shown = digest(tenant, person, conversation)
    assert '"harbour"' not in shown
    assert "about harbour" not in shown


def test_a_mute_and_an_unmute_show_in_the_next_turn(tenant, person, conversation, noted):
    assert '"tea"' in digest(tenant, person, conversation)

    mute_category(person=person, agent=tenant.agent, category="food")
    assert '"tea"' not in digest(tenant, person, conversation)

    unmute_category(person=person, agent=tenant.agent, category="food")
    assert '"tea"' in digest(tenant, person, conversation)


def test_a_latch_shows_its_notice_in_the_next_turn(tenant, person, actor, conversation, noted):
    assert "memory bank is full" not in digest(tenant, person, conversation)

    latch_full(bank=Bank.objects.get(address="user:ada"), actor=actor, reason="test")

    assert "The global memory bank is full" in digest(tenant, person, conversation)


def test_a_consolidation_shows_in_the_next_turn(tenant, person, actor, conversation, noted, mocker):
    mocker.patch("memory.services.capacity._enqueue_consolidation")
    for key in ("tea-2", "kettle"):
        remember(team=tenant.team, person=person, actor=actor, scope=SCOPE, key=key, category="food",
                 description=f"About {key}", content=f"Ada said more about {key}.")  # fmt: skip
    bank = Bank.objects.get(address=f"user:ada:{SCOPE}")
    request_consolidation(bank)
    before = digest(tenant, person, conversation)
    assert '"tea-2"' in before
    assert '"kettle"' in before

    plan = ConsolidationPlan(
        merges=[Merge(keep="tea", absorb=["tea-2"], content="Ada has tea, twice a day.")],
        forgets=[Drop(key="kettle", reason="trivial")],
    )
    outcome = consolidate_bank(bank_id=bank.pk, provider=ScriptedProvider(consolidations=[plan]))
    assert "merged 1, forgot 1" in outcome

    shown = digest(tenant, person, conversation)
    assert '"tea-2"' not in shown
    assert '"kettle"' not in shown
    assert "Ada has tea, twice a day." in shown


def test_an_erased_person_leaves_nothing_kept_to_show(tenant, person, actor, conversation, noted):
    assert '"tea"' in digest(tenant, person, conversation)

    erase_person(team=tenant.team, person=person, actor=Actor("owner", "ada"))

    again = start_conversation(team=tenant.team, agent=tenant.agent, person=person)  # theirs went with them
    shown = digest(tenant, person, again)
    assert '"tea"' not in shown
    assert '"rain"' not in shown


def test_a_note_expiring_leaves_the_next_turn_after_its_expiry(tenant, person, actor, conversation, noted, mocker):
    soon = timezone.now() + timedelta(hours=1)
    remember(team=tenant.team, person=person, actor=actor, scope=SCOPE, key="ferry", description="Ferry at nine",
             content="Ada takes the ferry at nine today.", expires_at=soon)  # fmt: skip
    assert '"ferry"' in digest(tenant, person, conversation)

    mocker.patch("django.utils.timezone.now", return_value=soon + timedelta(seconds=1))

    assert '"ferry"' not in digest(tenant, person, conversation)


def test_what_is_kept_is_per_agent_and_a_commit_drops_this_process_copy(
    tenant, person, actor, conversation, noted, django_capture_on_commit_callbacks
):
    from tests.support.factories import AgentFactory

    other = AgentFactory.create(team=tenant.team, slug="other")
    mute_category(person=person, agent=tenant.agent, category="food")
    digest(tenant, person, conversation)
    assert '"tea"' in digest(tenant, person, conversation, agent=other)  # the mute is the first agent's only
    assert len(kept_versions()) == 2

    with django_capture_on_commit_callbacks(execute=True):
        remember(team=tenant.team, person=person, actor=actor, key="walks", description="Walks", content="Walks.")

    assert len(kept_versions()) == 0  # every context that read user:ada is dropped at once


def test_a_kept_note_is_ranked_by_its_vector_only_while_the_vector_is_of_its_present_text(
    tenant, person, actor, index_inline
):
    from memory.embedders import get_embedder

    with index_inline():
        for key, content in (
            ("bees", "Ada keeps bees in the garden."),
            ("boat", "Ada sails a small boat on the fjord."),
        ):
            remember(team=tenant.team, person=person, actor=actor, scope=SCOPE, key=key, description=key,
                     content=content)  # fmt: skip
    embedder = get_embedder()
    assert embedder is not None
    vector = embedder.embed(["Ada sails a small boat on the fjord."])[0]

    def ranked() -> list[str]:
        return turn_order(tenant, person, vector)

    assert ranked() == ["boat", "bees"]

    # Edited, and not yet embedded again: its vector is of the text it no longer has, so it counts for nothing.
    edit_note(note=Note.objects.get(key="boat"), actor=actor, mode="replace", content="Ada sold her boat.")

    assert ranked() == ["bees", "boat"]


def test_a_turn_orders_its_notes_by_the_same_distances_whether_their_banks_are_kept_or_not(
    tenant, person, actor, mocker, index_inline
):
    """Without room to keep the banks (more notes of other banks kept than KEPT_NOTES), a turn asks
    pgvector for the distances instead, and keeps nothing: the same order either way."""
    from memory import kept_banks
    from memory.vectors import embed_query

    with index_inline():
        for i, content in enumerate(["Ada sails on the fjord", "Ada bakes rye bread", "Ada's cat naps", "Rain again"]):
            remember(team=tenant.team, person=person, actor=actor, scope=SCOPE, key=f"n{i}", description=f"Note {i}",
                     content=content)  # fmt: skip
    vector, _ = embed_query("Tell me about sailing and boats")

    def order() -> list[str]:
        return turn_order(tenant, person, vector)

    mocker.patch.object(kept_banks, "KEPT_NOTES", 0)
    kept_banks.forget_kept()
    without_room = order()
    assert kept_banks._kept_banks == {}
    mocker.patch.object(kept_banks, "KEPT_NOTES", 20_000)
    queries.forget_kept_notes()
    with_room = order()
    assert kept_banks._kept_banks  # now kept
    assert with_room == without_room
    assert len(with_room) == 4


def test_kept_content_is_bounded_and_what_is_not_kept_is_read(tenant, person, actor, noted, monkeypatch,
                                                              django_assert_num_queries):  # fmt: skip
    monkeypatch.setattr(queries, "KEPT_CONTENT_CHARS", len("Ada said something about tea.") + 5)
    notes = {note.key: note for note in Note.objects.all()}
    kept = queries.KeptContents()
    with django_assert_num_queries(1):
        read = kept.read(team=tenant.team, ids=[notes["tea"].pk, notes["rain"].pk])
    tea, rain = notes["tea"].pk, notes["rain"].pk
    kept.keep({tea: read[tea]})
    kept.keep({rain: read[rain]})  # no room left: not kept

    with django_assert_num_queries(0):
        assert kept.read(team=tenant.team, ids=[tea]) == {tea: "Ada said something about tea."}
    with django_assert_num_queries(1):  # not kept: read again
        assert kept.read(team=tenant.team, ids=[tea, rain]) == read
