"""What recall keeps of a bank per version: the same ranking as reading every note, and never a
note, word or vector the bank no longer shows."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from memory.indexing import NOTES
from memory.models import Bank, Note, OntologyNode
from memory.recall import forget_kept, hybrid_rank, recall_candidates, recall_memories
from memory.services import delete_note, edit_note, mute_category, remember
from tests.factories import note_fields, written

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


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "vector"])
def test_the_kept_ranking_is_the_ranking_of_every_note_read_afresh(tenant, person, actor, index_inline, mode):
    """The reference: rank() over every candidate loaded whole, similarities computed by pgvector."""
    OntologyNode.objects.create(team=tenant.team, node_id="music", label="Music", glossary="concerts orchestra")
    chance = random.Random(7)
    with index_inline():
        for i in range(60):
            words = " ".join(chance.choice(WORDS) for _ in range(chance.randint(2, 9)))
            remember(
                team=tenant.team, person=person, actor=actor, scope="project:apollo" if i % 3 else "",
                bank="shared" if i % 7 == 1 and i % 3 else "private", semantics=["music"] if i % 5 == 0 else [],
                **note_fields(key=f"note-{i % 45}", description=chance.choice(WORDS), content=f"Ada and the {words}."),
            )  # fmt: skip
    # Some with no vector yet: found by their words alone, in both.
    for i in (3, 6):
        edit_note(note=Note.objects.get(key=f"note-{i}", bank__address="user:ada"), actor=actor, mode="replace",
                  content="Ada's new violin and an old piano.")  # fmt: skip
    for query in ["violin concerts", "Oslo winter train", "a cat in the garden", "orchestra", "nothing matches xyz"]:
        forget_kept()
        kept = recall_memories(
            team=tenant.team, person=person, agent=tenant.agent, query=query, scope="project:apollo", mode=mode,
            limit=10,
        )  # fmt: skip
        again = recall_memories(
            team=tenant.team, person=person, agent=tenant.agent, query=query, scope="project:apollo", mode=mode,
            limit=10,
        )  # fmt: skip
        notes = recall_candidates(team=tenant.team, person=person, agent=tenant.agent, scope="project:apollo")
        reference = hybrid_rank(tenant.team, notes, query, mode=mode).hits[:10]
        expected = [(hit.note.pk, pytest.approx(hit.score, abs=1e-5)) for hit in reference]
        assert [(hit.note.pk, hit.score) for hit in kept.hits] == expected, query
        assert [(hit.note.pk, hit.score) for hit in again.hits] == expected, query
        assert [hit.matched for hit in kept.hits] == [hit.matched for hit in reference]


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
    mocker.patch("memory.recall.timezone.now", return_value=later)
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
