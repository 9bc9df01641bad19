"""Recall's candidates and its kept token counts: the digest's rules, and never a stale word."""

from __future__ import annotations

import pytest
from django.db.models import F

from memory.kept_banks import TERMS, Terms, candidates, forget_kept
from memory.models import Bank, OntologyNode
from memory.recall import bm25, recall_bundle, recall_memories
from memory.services import edit_note, remember
from tests.support.factories import note_fields

pytestmark = pytest.mark.django_db


def keys(tenant, person, query, **kwargs):
    ranked = recall_memories(team=tenant.team, person=person, agent=tenant.agent, query=query, mode="bm25", **kwargs)
    return [hit.note.key for hit in ranked.hits]


def test_an_edited_note_is_found_by_its_new_words_only(tenant, person, actor):
    note = remember(team=tenant.team, person=person, actor=actor, **note_fields(content="Ada lives in Oslo.")).note
    assert keys(tenant, person, "Oslo") == ["home-city"]  # its words are now kept by this process
    edit_note(note=note, actor=actor, mode="replace", content="Ada moved to Bergen.")
    assert keys(tenant, person, "Oslo") == []
    assert keys(tenant, person, "Bergen") == ["home-city"]


def test_a_bank_is_read_once_per_version_and_words_once_per_version_of_a_note(
    tenant, person, actor, django_assert_num_queries
):
    note = remember(team=tenant.team, person=person, actor=actor, **note_fields(content="Ada lives in Oslo.")).note
    TERMS.clear()
    forget_kept()
    # the banks with the agent's mutes (two statements, one round trip), the bank's notes (their
    # versions and rows, one statement), the missing notes' text, the hits
    with django_assert_num_queries(5):
        assert keys(tenant, person, "Oslo") == ["home-city"]
    # the banks with the mutes, the hits: the bank is kept at its version, and its words with it
    with django_assert_num_queries(3):
        assert keys(tenant, person, "Oslo") == ["home-city"]
    Bank.objects.update(version=F("version") + 1)
    # banks and mutes, the notes' versions: none changed, so every row is taken over; the hits
    with django_assert_num_queries(4):
        assert keys(tenant, person, "Oslo") == ["home-city"]
    forget_kept()
    # banks and mutes, versions and rows: the words are kept by the hash of the note's text; the hits
    with django_assert_num_queries(4):
        assert keys(tenant, person, "Oslo") == ["home-city"]
    edit_note(note=note, actor=actor, mode="replace", content="Ada moved to Bergen from Oslo.")
    # banks and mutes, the versions with the edited note's row and its text (read with it, for its
    # words), the hits
    with django_assert_num_queries(4):
        assert keys(tenant, person, "Bergen") == ["home-city"]


def test_the_narrowest_bank_shadows_wider_ones_in_recall(tenant, person, actor):
    for bank, content in [("global", "global Oslo"), ("shared", "shared Oslo"), ("private", "private Oslo")]:
        remember(
            team=tenant.team, person=person, actor=actor, scope="project:apollo", bank=bank,
            **note_fields(key="style", content=content),
        )  # fmt: skip
    found = recall_memories(team=tenant.team, person=person, agent=tenant.agent, query="Oslo", scope="project:apollo")
    assert [hit.note.content for hit in found.hits] == ["private Oslo"]
    elsewhere = recall_memories(team=tenant.team, person=person, agent=tenant.agent, query="Oslo", scope="project:zeus")
    assert [hit.note.content for hit in elsewhere.hits] == ["global Oslo"]
    assert [c.key for c in candidates(team=tenant.team, person=person, agent=None, scope="project:apollo")] == ["style"]


def test_a_tag_glossary_counts_as_the_note_s_words_and_follows_the_glossary(tenant, person, actor):
    node = OntologyNode.objects.create(team=tenant.team, node_id="billing", label="Billing", glossary="invoices")
    remember(team=tenant.team, person=person, actor=actor, semantics=["billing"], **note_fields(key="tagged"))
    remember(team=tenant.team, person=person, actor=actor, **note_fields(key="untagged"))
    assert keys(tenant, person, "invoices") == ["tagged"]
    node.glossary = "receipts"
    node.save()
    assert keys(tenant, person, "invoices") == []
    assert keys(tenant, person, "receipts") == ["tagged"]


def test_bm25_prefers_the_rarer_word_and_covers_the_query():
    oslo = Terms.of("home-city", "Where Ada lives", "Ada lives in Oslo")
    job = Terms.of("job", "What Ada does", "Ada is a nurse")
    keyword = bm25([oslo, job], "where in Oslo does Ada live?")
    assert keyword.scores[0] > keyword.scores[1] > 0
    assert keyword.strengths[0] == pytest.approx(1.0)  # the best match holds every query word
    assert 0 < keyword.strengths[1] < 0.5  # "ada" alone: a common word, little of the query
    assert keyword.matched == [{"oslo", "ada", "live"}, {"ada"}]
    assert bm25([oslo, job], "the of and").scores == [0.0, 0.0]


def test_the_bundle_follows_links_among_the_candidates(tenant, person, actor):
    remember(
        team=tenant.team, person=person, actor=actor, **note_fields(key="trip", content="Oslo trip, see [[hotel]]")
    )
    remember(team=tenant.team, person=person, actor=actor, **note_fields(key="hotel", content="Booked the Grand"))
    bundle = recall_bundle(team=tenant.team, person=person, agent=tenant.agent, query="Oslo trip")
    assert [(item.note.key, item.via) for item in bundle.items][:2] == [("trip", "match"), ("hotel", "link:trip")]
