"""The hot reads written as SQL by hand (memory.banks.applicable_banks, memory.queries.note_contents,
conversations.queries.RankedMessages.hits, the person accounts.services.get_or_create_person finds,
the notes recall returns: memory.queries.notes_with_banks)
read what the querysets they replaced read, and only the team's."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import Person
from accounts.services import get_or_create_person
from conversations.models import Message
from conversations.queries import RankedMessages, rank_candidates
from conversations.services import erase_message
from memory.banks import Muted, applicable_banks, applicable_banks_and_mutes
from memory.models import Bank, Note
from memory.queries import note_contents, notes_with_banks
from memory.services import get_or_create_bank, mute_category, remember
from tests.support.factories import AgentFactory, PersonFactory, chat, note_fields

pytestmark = pytest.mark.django_db


# Note and Bank are read through their converters (config.prepared.columns_of); Bank stays checked.
@pytest.mark.parametrize("model", [Bank, Message, Person])
def test_no_field_read_by_hand_converts_what_the_database_gives(model):
    # Model.from_db takes values as psycopg loads them; a field with a converter (a JSONField, a
    # custom field) would be left unconverted, so such a field needs these reads changed first.
    converting = [field.attname for field in model._meta.concrete_fields if field.get_db_converters(connection)]
    assert converting == []


def test_the_banks_a_turn_reads_are_the_existing_ones_narrowest_first_with_every_field(tenant, person, other_tenant):
    scope = "project:apollo"
    everywhere = get_or_create_bank(team=tenant.team, person=person, scope="", kind="global")
    private = get_or_create_bank(team=tenant.team, person=person, scope=scope, kind="private")
    same_address = PersonFactory(team=other_tenant.team, external_id=person.external_id)
    get_or_create_bank(team=other_tenant.team, person=same_address, scope=scope, kind="private")

    banks = applicable_banks(team=tenant.team, person=person, scope=scope)

    assert [bank.pk for bank in banks] == [private.pk, everywhere.pk]  # no shared bank exists yet
    for read, written in zip(banks, [private, everywhere], strict=True):
        fresh = Bank.objects.get(pk=written.pk)
        for field in Bank._meta.concrete_fields:
            assert getattr(read, field.attname) == getattr(fresh, field.attname), field.attname
        assert read._state.adding is False
    shared = get_or_create_bank(team=tenant.team, person=person, scope=scope, kind="shared")
    assert [bank.pk for bank in applicable_banks(team=tenant.team, person=person, scope=scope)] == [
        private.pk, shared.pk, everywhere.pk,
    ]  # fmt: skip


def test_the_banks_come_with_the_person_s_mutes_for_that_agent_only(tenant, person, other_tenant):
    everywhere = get_or_create_bank(team=tenant.team, person=person, scope="", kind="global")
    other_agent = AgentFactory(team=tenant.team)
    someone = PersonFactory(team=tenant.team)
    mute_category(person=person, agent=tenant.agent, category="health")
    mute_category(person=person, agent=tenant.agent, category="money")
    mute_category(person=person, agent=other_agent, category="family")
    mute_category(person=someone, agent=tenant.agent, category="work")

    banks, muted = applicable_banks_and_mutes(team=tenant.team, person=person, scope="", agent=tenant.agent)

    assert [bank.pk for bank in banks] == [everywhere.pk]
    assert muted == Muted(categories=frozenset({"health", "money"}))
    assert applicable_banks_and_mutes(team=tenant.team, person=person, scope="", agent=None)[1] == Muted()
    assert applicable_banks_and_mutes(team=tenant.team, person=someone, scope="", agent=other_agent)[1] == Muted()
    assert applicable_banks_and_mutes(team=other_tenant.team, person=person, scope="", agent=tenant.agent) == (
        [],
        Muted(),
    )  # another team's call sees neither this person's banks nor their mutes


def test_note_contents_are_the_teams_notes_that_still_exist(tenant, person, actor, other_tenant):
    kept = remember(team=tenant.team, person=person, actor=actor, **note_fields(key="a", content="kept"))
    gone = remember(team=tenant.team, person=person, actor=actor, **note_fields(key="b", content="gone"))
    gone_id = gone.note.pk
    Note.objects.filter(pk=gone_id).delete()

    assert note_contents(team=tenant.team, ids=[kept.note.pk, gone_id]) == {kept.note.pk: "kept"}
    assert note_contents(team=other_tenant.team, ids=[kept.note.pk]) == {}
    assert note_contents(team=tenant.team, ids=[]) == {}


def test_hits_are_whole_messages_of_the_searched_team_and_never_erased_ones(tenant, person, conversation):
    recorded = chat(conversation, [("Pottery on Monday", "Pottery again on Tuesday"), ("More pottery", "Pottery!")])
    ranked = rank_candidates(agent=tenant.agent, person=person, query="pottery")
    hits = ranked.hits(limit=5)

    assert len(hits) >= 2
    assert {hit.message.pk for hit in hits} <= {m.pk for m in recorded}
    for hit in hits:
        fresh = Message.objects.get(pk=hit.message.pk)
        for field in Message._meta.concrete_fields:
            if field.attname != "search":  # never read for a hit
                assert getattr(hit.message, field.attname) == getattr(fresh, field.attname), field.attname
        assert "search" in hit.message.get_deferred_fields()
    # Another team's ranking of the same ids reads nothing.
    elsewhere = RankedMessages(ranked.best_first, ranked.totals, team_id=tenant.team.pk + 10_000)
    assert elsewhere.hits(limit=5) == []
    erase_message(message=hits[0].message)
    assert [hit.message.pk for hit in ranked.hits(limit=5)] == [hit.message.pk for hit in hits[1:]]


def test_hits_read_ahead_read_each_candidate_once_and_answer_as_a_fresh_read_would(tenant, person, conversation):
    chat(conversation, [(f"Pottery class on day {n}", f"Have fun, try number {n}") for n in range(12)])
    ranked = rank_candidates(agent=tenant.agent, person=person, query="pottery class")
    best = ranked.best_first
    assert len(best) >= 10

    def fresh(excluded):
        return [hit.message.pk for hit in ranked.hits(limit=3, exclude_ids=excluded)]

    with CaptureQueriesContext(connection) as first_read:
        first = ranked.hits(limit=3, read_ahead=True)
    assert len(first_read) == 1
    assert [hit.message.pk for hit in first] == best[:3] == fresh(set())
    # The composer's second pass, with some of those hidden: the next three were read with them.
    hidden = set(best[:2])
    with CaptureQueriesContext(connection) as second_read:
        second = ranked.hits(limit=3, exclude_ids=hidden, read_ahead=True)
    assert len(second_read) == 0
    assert [hit.message.pk for hit in second] == best[2:5] == fresh(hidden)
    assert second[0].message is first[2].message
    # Past what was read ahead, a call reads again; an erased candidate is left out, not replaced.
    erase_message(message=Message.objects.get(pk=best[7]))
    hidden = set(best[:5])
    with CaptureQueriesContext(connection) as third_read:
        third = ranked.hits(limit=3, exclude_ids=hidden, read_ahead=True)
    assert len(third_read) == 1
    assert [hit.message.pk for hit in third] == [best[5], best[6]] == fresh(hidden)


def test_the_person_found_by_id_is_the_team_s_with_every_field(tenant, person, other_tenant, django_user_model):
    user = django_user_model.objects.create_user(username="ada", password="a long passphrase")
    Person.objects.filter(pk=person.pk).update(display_name="Ada L.", user=user, erased_at=timezone.now())
    same_id = PersonFactory(team=other_tenant.team, external_id=person.external_id)

    found = get_or_create_person(team=tenant.team, external_id=person.external_id)

    fresh = Person.objects.get(pk=person.pk)
    for field in Person._meta.concrete_fields:
        assert getattr(found, field.attname) == getattr(fresh, field.attname), field.attname
    assert found._state.adding is False
    assert found._state.db == "default"
    assert get_or_create_person(team=other_tenant.team, external_id=person.external_id).pk == same_id.pk
    created = get_or_create_person(team=tenant.team, external_id="someone-new")
    assert created.pk not in (person.pk, same_id.pk)
    assert get_or_create_person(team=tenant.team, external_id=" someone-new ").pk == created.pk


def test_recall_s_notes_are_the_team_s_whole_with_their_banks(tenant, person, actor, other_tenant):
    shared = remember(
        team=tenant.team, person=person, actor=actor, scope="project:apollo", bank="shared",
        scope_refs={"work_item": ["T-7"]}, **note_fields(key="standup", content="Stand-up at nine."),
    ).note  # fmt: skip
    private = remember(team=tenant.team, person=person, actor=actor, **note_fields(key="tea", content="Green")).note
    gone = remember(team=tenant.team, person=person, actor=actor, **note_fields(key="gone")).note
    gone_id = gone.pk
    Note.objects.filter(pk=gone_id).delete()

    found = notes_with_banks(team=tenant.team, ids=[shared.pk, private.pk, gone_id])

    assert set(found) == {shared.pk, private.pk}
    for pk, note in found.items():
        fresh = Note.objects.select_related("bank").get(pk=pk)
        for field in Note._meta.concrete_fields:
            assert getattr(note, field.attname) == getattr(fresh, field.attname), field.attname
        for field in Bank._meta.concrete_fields:
            assert getattr(note.bank, field.attname) == getattr(fresh.bank, field.attname), field.attname
        assert note._state.adding is False
    assert found[shared.pk].scope_refs == {"work_item": ["T-7"]}  # a JSON field, decoded
    assert found[shared.pk].bank.kind == "shared"
    assert notes_with_banks(team=other_tenant.team, ids=[shared.pk, private.pk]) == {}
    assert notes_with_banks(team=tenant.team, ids=[]) == {}


def test_a_reply_s_locked_turn_is_read_whole_with_its_conversation(tenant, person, conversation, other_tenant):
    from conversations.models import Conversation, Turn
    from conversations.services import _locked_turn, take_turn

    turn = take_turn(
        team=tenant.team, agent=tenant.agent, person=person, message="Hello", conversation_id=conversation.pk
    ).turn
    Turn.objects.filter(pk=turn.pk).update(costs={"notes": 12}, degraded=["passages"], notes_used=[3, 4])

    locked = _locked_turn(turn)

    fresh = Turn.objects.select_related("conversation").get(pk=turn.pk)
    for field in Turn._meta.concrete_fields:
        assert getattr(locked, field.attname) == getattr(fresh, field.attname), field.attname
    for field in Conversation._meta.concrete_fields:
        assert getattr(locked.conversation, field.attname) == getattr(fresh.conversation, field.attname), field.attname
    assert locked.costs == {"notes": 12}  # JSON fields, decoded
    assert locked.notes_used == [3, 4]
    with transaction.atomic(), pytest.raises(Turn.DoesNotExist):  # the turn's own team only
        _locked_turn(Turn(pk=turn.pk, team_id=other_tenant.team.pk))
