"""What recall keeps of a bank per version: the same ranking as reading every note, and never a
note, word or vector the bank no longer shows."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from memory.indexing import NOTES
from memory.kept_banks import forget_kept
from memory.models import Bank, Mute, Note, OntologyNode
from memory.queries import visible_notes
from memory.recall import hybrid_rank, recall_memories
from memory.services import delete_note, edit_note, mute_category, remember
from tests.support.factories import note_fields, written

pytestmark = pytest.mark.django_db

WORDS = [
    "oslo",
    "bergen",
    "cat",
    "dog",
    "piano",
    "violin",
    "garden",
    "coffee",
    "train",
    "river",
    "mountain",
    "winter",
    "summer",
    "book",
    "film",
]


def recalled(tenant, person, query, **kwargs):
    ranked = recall_memories(team=tenant.team, person=person, agent=tenant.agent, query=query, **kwargs)
    return [hit.note.key for hit in ranked.hits]


QUERIES = ["violin concerts", "Oslo winter train", "a cat in the garden", "orchestra", "собаки", "nothing matches xyz"]


def assert_agrees_with_every_note_read_afresh(tenant, person, mode):
    """The reference: rank() over the visible notes as the digest's SQL finds them (not recall's
    rules), loaded whole, similarities computed by pgvector."""
    for query in QUERIES:
        kept = recall_memories(
            team=tenant.team, person=person, agent=tenant.agent, query=query, scope="project:apollo", mode=mode,
            limit=10,
        )  # fmt: skip
        notes = visible_notes(
            team=tenant.team, person=person, agent=tenant.agent, scope="project:apollo", gate_on_tags=False
        ).notes
        reference = hybrid_rank(tenant.team, notes, query, mode=mode).hits[:10]
        assert [(hit.note.pk, hit.score) for hit in kept.hits] == [
            (hit.note.pk, pytest.approx(hit.score, abs=1e-5)) for hit in reference
        ], query
        assert [hit.matched for hit in kept.hits] == [hit.matched for hit in reference], query
        assert [hit.similarity for hit in kept.hits] == [
            None if hit.similarity is None else pytest.approx(hit.similarity, abs=1e-5) for hit in reference
        ], query


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "vector"])
def test_the_kept_ranking_is_the_ranking_of_every_note_read_afresh(tenant, person, actor, index_inline, mode):
    OntologyNode.objects.create(team=tenant.team, node_id="music", label="Music", glossary="concerts orchestra")
    chance = random.Random(7)
    with index_inline():
        for i in range(60):
            words = " ".join(chance.choice(WORDS) for _ in range(chance.randint(2, 9)))
            remember(
                team=tenant.team,
                person=person,
                actor=actor,
                scope="project:apollo" if i % 3 else "",
                bank="shared" if i % 7 == 1 and i % 3 else "private",
                semantics=["music"] if i % 5 == 0 else [],
                category="health" if i % 11 == 0 else "",
                scope_refs={"project": ["P"]} if i % 13 == 0 else None,
                **note_fields(key=f"note-{i % 45}", description=chance.choice(WORDS), content=f"Ada and the {words}."),
            )  # fmt: skip  (some keys in two banks: shadowed)
        remember(team=tenant.team, person=person, actor=actor,
                 **note_fields(key="dogs", description="Собаки", content="Анна любит своих собак."))  # fmt: skip
    # Some with no vector yet: found by their words alone, in both.
    for i in (3, 6):
        edit_note(note=Note.objects.get(key=f"note-{i}", bank__address="user:ada"), actor=actor, mode="replace",
                  content="Ada's new violin and an old piano.")  # fmt: skip
    forget_kept()
    assert_agrees_with_every_note_read_afresh(tenant, person, mode)
    assert_agrees_with_every_note_read_afresh(tenant, person, mode)  # from what is kept
    # Writes between recalls: the banks' new versions taken over row by row, vectors carried.
    with index_inline():
        edit_note(note=Note.objects.get(key="note-9", bank__address="user:ada"), actor=actor, mode="replace",
                  content="Ada plays the violin in an orchestra.")  # fmt: skip
        remember(team=tenant.team, person=person, actor=actor, scope="project:apollo",
                 **note_fields(key="fresh", content="A cat sleeps in the winter garden."))  # fmt: skip
    delete_note(note=Note.objects.get(key="note-12", bank__address="user:ada"), actor=actor)
    mute_category(person=person, agent=tenant.agent, category="health")
    assert_agrees_with_every_note_read_afresh(tenant, person, mode)


def test_a_vector_that_arrives_after_the_bank_was_kept_is_used(tenant, person, actor):
    note = written(remember(team=tenant.team, person=person, actor=actor, **note_fields()))
    before = recall_memories(team=tenant.team, person=person, agent=tenant.agent, query="Where does Ada live?")
    assert [hit.similarity for hit in before.hits if hit.note.pk == note.pk] in ([], [None])
    assert NOTES.index([note.pk]) == 1  # the worker's embedding: no new bank version
    after = recall_memories(team=tenant.team, person=person, agent=tenant.agent, query="Where does Ada live?")
    assert [hit.note.key for hit in after.hits] == ["home-city"]
    assert after.hits[0].similarity is not None


def test_writes_mutes_and_deletes_show_at_once(tenant, person, actor, index_inline):
    with index_inline():
        note = written(remember(team=tenant.team, person=person, actor=actor, category="health",
                                **note_fields(key="allergy", content="Ada is allergic to peanuts.")))  # fmt: skip
        remember(team=tenant.team, person=person, actor=actor, **note_fields())
    assert recalled(tenant, person, "peanuts", mode="bm25") == ["allergy"]
    mute_category(person=person, agent=tenant.agent, category="health")
    assert recalled(tenant, person, "peanuts", mode="bm25") == []
    assert recalled(tenant, person, "Oslo", mode="bm25") == ["home-city"]
    delete_note(note=Note.objects.get(key="home-city"), actor=actor)
    assert recalled(tenant, person, "Oslo", mode="bm25") == []
    assert recall_memories(team=tenant.team, person=person, agent=None, query="peanuts").hits[0].note.pk == note.pk


def test_a_note_that_expires_leaves_the_kept_bank(tenant, person, actor, mocker):
    soon = timezone.now() + timedelta(minutes=5)
    remember(team=tenant.team, person=person, actor=actor, expires_at=soon, **note_fields())
    remember(team=tenant.team, person=person, actor=actor, **note_fields(key="home-town", content="Oslo, always."))
    assert sorted(recalled(tenant, person, "Oslo", mode="bm25")) == ["home-city", "home-town"]
    later = soon + timedelta(seconds=1)
    mocker.patch("memory.kept_banks.timezone.now", return_value=later)
    assert recalled(tenant, person, "Oslo", mode="bm25") == ["home-town"]


def test_another_process_s_write_is_seen_by_the_bank_s_new_version(tenant, person, actor):
    """A write committed elsewhere raised the version; this process never heard of it."""
    remember(team=tenant.team, person=person, actor=actor, **note_fields())
    assert recalled(tenant, person, "Oslo", mode="bm25") == ["home-city"]
    Note.objects.update(content="Ada lives in Bergen.", key="home")
    Bank.objects.update(version=F("version") + 1)
    assert recalled(tenant, person, "Oslo", mode="bm25") == []
    assert recalled(tenant, person, "Bergen", mode="bm25") == ["home"]


def test_a_write_costs_the_next_recall_the_written_note_s_vector_only(tenant, person, actor, index_inline):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with index_inline():
        kept = [written(remember(team=tenant.team, person=person, actor=actor, **note_fields(key=f"n{i}")))
                for i in range(3)]  # fmt: skip
    assert len(recall_memories(team=tenant.team, person=person, agent=tenant.agent, query="Oslo").hits) == 3
    new = written(remember(team=tenant.team, person=person, actor=actor, **note_fields(key="new")))
    with CaptureQueriesContext(connection) as queries:
        found = recall_memories(team=tenant.team, person=person, agent=tenant.agent, query="Oslo")
    assert {hit.note.pk for hit in found.hits} == {new.pk, *(note.pk for note in kept)}
    [looked_up] = [q["sql"] for q in queries.captured_queries if "vector_send" in q["sql"]]
    asked = looked_up[looked_up.index("ANY(") :]
    assert str(new.pk) in asked
    assert not any(f"{note.pk}," in asked or f"{note.pk}}}" in asked or f"{note.pk}]" in asked for note in kept)


def test_a_mute_added_or_removed_in_the_django_admin_reaches_recall_at_once(
    client, django_user_model, tenant, person, actor
):
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "a-long-password-1"))
    remember(team=tenant.team, person=person, actor=actor, category="health",
             **note_fields(key="allergy", content="Ada is allergic to peanuts."))  # fmt: skip
    assert recalled(tenant, person, "peanuts", mode="bm25") == ["allergy"]
    response = client.post(
        "/admin/memory/mute/add/", {"person": person.pk, "agent": tenant.agent.pk, "category": "health"}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert recalled(tenant, person, "peanuts", mode="bm25") == []
    mute = Mute.objects.get()
    assert mute.team_id == tenant.team.pk
    response = client.post(f"/admin/memory/mute/{mute.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert recalled(tenant, person, "peanuts", mode="bm25") == ["allergy"]


def test_the_admin_refuses_a_mute_for_an_agent_of_another_team(client, django_user_model, tenant, other_tenant, person):
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "a-long-password-1"))
    response = client.post(
        "/admin/memory/mute/add/", {"person": person.pk, "agent": other_tenant.agent.pk, "category": "health"}
    )
    assert response.status_code == 200
    assert "That agent is not in this person" in response.content.decode()
    assert not Mute.objects.exists()


def test_the_admin_mutes_one_uncategorised_note_and_refuses_a_category_and_a_note_together(
    client, django_user_model, tenant, person, actor
):
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "a-long-password-1"))
    note = written(remember(team=tenant.team, person=person, actor=actor, **note_fields(key="home-city")))
    assert recalled(tenant, person, "Oslo", mode="bm25") == ["home-city"]
    both = {"person": person.pk, "agent": tenant.agent.pk, "category": "home", "note": note.pk}
    response = client.post("/admin/memory/mute/add/", both)
    assert response.status_code == 200
    assert "Mute either a category or one note" in response.content.decode()
    response = client.post("/admin/memory/mute/add/", {**both, "category": ""})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert recalled(tenant, person, "Oslo", mode="bm25") == []
    client.post(f"/admin/memory/mute/{Mute.objects.get().pk}/delete/", {"post": "yes"})
    assert recalled(tenant, person, "Oslo", mode="bm25") == ["home-city"]


def test_a_person_s_erasure_lets_go_of_their_kept_banks(tenant, person, actor, django_capture_on_commit_callbacks):
    from memory import kept_banks
    from memory.services import erase_person

    remember(team=tenant.team, person=person, actor=actor, **note_fields())
    assert recalled(tenant, person, "Oslo", mode="bm25") == ["home-city"]
    theirs = set(Bank.objects.filter(person=person).values_list("pk", flat=True))
    assert theirs & set(kept_banks._kept_banks)
    with django_capture_on_commit_callbacks(execute=True):
        erase_person(team=tenant.team, person=person, actor=actor)
    assert not theirs & set(kept_banks._kept_banks)
