"""The single write path: keys, caps, upserts, appends, edits, forgets, and the revision log."""

from __future__ import annotations

import pytest

from memory.exceptions import EditMismatch, InvalidNote, NoteNotFound, TooLong, UnknownOntologyId
from memory.models import Bank, Note, OntologyNode, Revision
from memory.services import Actor, append_observation, edit_note, forget, remember
from memory.text import normalize_key
from tests.support.factories import note_fields

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("raw", ["Prefers Norwegian", "prefers_norwegian", "  PREFERS--norwegian!  "])
def test_keys_are_normalised_at_the_boundary(raw):
    assert normalize_key(raw) == "prefers-norwegian"


def test_remember_creates_a_note_and_a_create_revision(tenant, person, actor):
    result = remember(team=tenant.team, person=person, actor=actor, **note_fields(key="Home City"))
    assert result.action == "created"
    note = Note.objects.get()
    assert (note.key, note.bank.address, note.source) == ("home-city", "user:ada", "remember")
    revision = Revision.objects.get()
    assert (revision.action, revision.actor, revision.actor_ref, revision.request_id) == (
        "create",
        "agent",
        tenant.agent.slug,
        "req-1",
    )
    assert revision.after["content"] == "Ada lives in Oslo."
    assert revision.note_id == note.pk


def test_remembering_a_key_again_replaces_it_and_logs_the_previous_value(tenant, person, actor):
    first = remember(team=tenant.team, person=person, actor=actor, **note_fields())
    second = remember(
        team=tenant.team, person=person, actor=actor, **note_fields(key="home_city", content="Ada moved to Bergen.")
    )
    assert second.action == "updated"
    assert second.note.pk == first.note.pk
    assert Note.objects.count() == 1
    update = Revision.objects.get(action="update")
    assert update.before["content"] == "Ada lives in Oslo."
    assert update.after["content"] == "Ada moved to Bergen."


def test_remembering_the_same_thing_again_is_unchanged_and_keeps_updated_at(tenant, person, actor):
    first = remember(team=tenant.team, person=person, actor=actor, **note_fields())
    again = remember(team=tenant.team, person=person, actor=actor, **note_fields())
    note = Note.objects.get()
    assert again.action == "unchanged"
    assert note.updated_at == first.note.updated_at
    assert note.repetitions == 2
    assert Revision.objects.count() == 1


def test_content_over_its_cap_is_refused_with_nothing_written_but_the_refusal(tenant, person, actor):
    with pytest.raises(TooLong) as refused:
        remember(team=tenant.team, person=person, actor=actor, **note_fields(content="x" * 2001))
    assert refused.value.code == "too_long"
    assert refused.value.field == "content"
    assert "2001 characters; the limit is 2000" in refused.value.message
    assert not Note.objects.exists()
    revision = Revision.objects.get()
    assert revision.action == "refused"
    assert "the limit is 2000" in revision.reason
    assert revision.after["content_length"] == 2001


def test_content_at_its_cap_is_accepted(tenant, person, actor):
    remember(team=tenant.team, person=person, actor=actor, **note_fields(content="x" * 2000))
    assert len(Note.objects.get().content) == 2000


@pytest.mark.parametrize(
    ("overrides", "field", "limit"),
    [({"key": "k" * 65}, "key", 64), ({"description": "d" * 201}, "description", 200)],
)
def test_key_and_description_caps_are_refused(tenant, person, actor, overrides, field, limit):
    with pytest.raises(TooLong) as refused:
        remember(team=tenant.team, person=person, actor=actor, **note_fields(**overrides))
    assert refused.value.field == field
    assert f"the limit is {limit}" in refused.value.message
    assert not Note.objects.exists()


def test_a_refused_update_leaves_the_note_as_it_was(tenant, person, actor):
    remember(team=tenant.team, person=person, actor=actor, **note_fields())
    with pytest.raises(TooLong):
        remember(team=tenant.team, person=person, actor=actor, **note_fields(content="y" * 3000))
    assert Note.objects.get().content == "Ada lives in Oslo."
    assert list(Revision.objects.order_by("id").values_list("action", flat=True)) == ["create", "refused"]


def test_a_multi_line_description_is_refused(tenant, person, actor):
    with pytest.raises(InvalidNote, match="one line"):
        remember(team=tenant.team, person=person, actor=actor, **note_fields(description="line one\nline two"))


def test_unknown_ontology_id_fails_loudly(tenant, person, actor):
    OntologyNode.objects.create(team=tenant.team, node_id="billing", label="Billing")
    with pytest.raises(UnknownOntologyId, match=r"Use an exact ontology id\."):
        remember(team=tenant.team, person=person, actor=actor, semantics=["biling"], **note_fields())
    remember(team=tenant.team, person=person, actor=actor, semantics=["billing"], **note_fields())
    assert Note.objects.get().semantics == ["billing"]


def test_an_ontology_id_of_another_team_is_unknown(tenant, other_tenant, person, actor):
    OntologyNode.objects.create(team=other_tenant.team, node_id="billing", label="Billing")
    with pytest.raises(UnknownOntologyId):
        remember(team=tenant.team, person=person, actor=actor, semantics=["billing"], **note_fields())


def test_private_write_with_a_scope_goes_to_the_private_bank(tenant, person, actor):
    result = remember(team=tenant.team, person=person, actor=actor, scope="project:apollo", **note_fields())
    assert result.bank.address == "user:ada:project:apollo"
    assert result.bank.kind == Bank.Kind.PRIVATE
    shared = remember(
        team=tenant.team, person=person, actor=actor, scope="project:apollo", bank="shared", **note_fields()
    )
    assert shared.bank.address == "scope:project:apollo"
    assert shared.bank.person is None


def test_a_shared_write_without_a_scope_is_refused(tenant, person, actor):
    with pytest.raises(InvalidNote, match="needs a scope"):
        remember(team=tenant.team, person=person, actor=actor, bank="shared", **note_fields())


def test_append_observation_appends_to_the_category_note(tenant, person, actor):
    first = append_observation(
        team=tenant.team, person=person, actor=actor, category="Preferences", observation="Likes tea."
    )
    second = append_observation(
        team=tenant.team, person=person, actor=actor, category="preferences", observation="Hates mornings.",
        summary="Tea, not mornings",
    )  # fmt: skip
    assert (first.action, second.action) == ("created", "appended")
    note = Note.objects.get()
    assert (note.key, note.category, note.bank.address) == ("preferences", "preferences", "user:ada")
    assert note.content == "Likes tea.\nHates mornings."
    assert note.description == "Tea, not mornings"
    assert Revision.objects.filter(action="append").count() == 1


def test_an_append_past_the_cap_is_refused_not_trimmed(tenant, person, actor):
    append_observation(team=tenant.team, person=person, actor=actor, category="log", observation="a" * 1990)
    with pytest.raises(TooLong, match="Condense it"):
        append_observation(team=tenant.team, person=person, actor=actor, category="log", observation="b" * 20)
    assert Note.objects.get().content == "a" * 1990
    assert Revision.objects.filter(action="refused").count() == 1


def test_edit_note_find_replace_and_replace(tenant, person, actor):
    note = remember(
        team=tenant.team, person=person, actor=actor, **note_fields(content="Ada lives in Oslo. Ada likes tea.")
    ).note
    edit_note(note=note, actor=actor, mode="find_replace", find=" Ada likes tea.", content="")
    assert Note.objects.get().content == "Ada lives in Oslo."
    edit_note(note=note, actor=actor, mode="replace", content="Ada lives in Bergen.")
    assert Note.objects.get().content == "Ada lives in Bergen."
    assert Revision.objects.filter(action="update").count() == 2
    with pytest.raises(EditMismatch):
        edit_note(note=note, actor=actor, mode="find_replace", find="Oslo", content="Paris")
    with pytest.raises(TooLong):
        edit_note(note=note, actor=actor, mode="replace", content="z" * 2001)
    assert Note.objects.get().content == "Ada lives in Bergen."


def test_forget_deletes_from_the_narrowest_bank_and_logs_it(tenant, person, actor):
    remember(team=tenant.team, person=person, actor=actor, scope="project:apollo", bank="global", **note_fields())
    remember(team=tenant.team, person=person, actor=actor, scope="project:apollo", **note_fields(content="private"))
    result, _ = forget(team=tenant.team, person=person, actor=actor, key="home city", scope="project:apollo")
    assert result.bank.address == "user:ada:project:apollo"
    assert list(Note.objects.values_list("bank__address", flat=True)) == ["user:ada"]
    deleted = Revision.objects.get(action="delete")
    assert deleted.before["content"] == "private"
    assert deleted.actor == "agent"


def test_forget_of_an_unknown_key_is_not_found(tenant, person, actor):
    with pytest.raises(NoteNotFound):
        forget(team=tenant.team, person=person, actor=actor, key="nothing")


def test_erasing_a_note_removes_its_content_from_the_log_but_keeps_the_events(tenant, person, actor):
    from memory.services import erase_note

    note = remember(team=tenant.team, person=person, actor=actor, **note_fields(content="Secret diagnosis")).note
    remember(team=tenant.team, person=person, actor=actor, **note_fields(content="Another secret"))
    erase_note(note=Note.objects.get(pk=note.pk), actor=actor)
    assert not Note.objects.exists()
    revisions = Revision.objects.filter(note_id=note.pk).order_by("id")
    assert list(revisions.values_list("action", flat=True)) == ["create", "update", "delete"]
    for revision in revisions:
        assert revision.before is None
        assert revision.after is None
        assert revision.erased
    assert "secret" not in str(list(Revision.objects.values())).lower()


def test_a_refused_first_write_leaves_no_empty_bank_behind(tenant, person, actor):
    with pytest.raises(TooLong):
        remember(team=tenant.team, person=person, actor=actor, scope="project:zeus", **note_fields(content="x" * 2001))
    assert not Bank.objects.exists()
    refusal = Revision.objects.get()
    assert (refusal.action, refusal.bank_ref, refusal.bank, refusal.person) == (
        "refused",
        "user:ada:project:zeus",
        None,
        person,
    )


def test_a_refused_scope_is_logged_too(tenant, person, actor):
    with pytest.raises(InvalidNote):
        remember(team=tenant.team, person=person, actor=actor, bank="shared", **note_fields())
    assert Revision.objects.get().action == "refused"
    with pytest.raises(TooLong):
        remember(team=tenant.team, person=person, actor=actor, scope="s" * 201, **note_fields())
    assert Revision.objects.filter(action="refused").count() == 2


def test_a_person_of_another_team_cannot_be_written_for(tenant, other_tenant, actor):
    from tests.support.factories import PersonFactory

    stranger = PersonFactory(team=other_tenant.team, external_id="bob")
    with pytest.raises(NoteNotFound):
        remember(team=tenant.team, person=stranger, actor=actor, **note_fields())
    assert not Note.objects.exists()
    assert not Bank.objects.exists()


def test_reimporting_the_same_note_does_not_count_as_repetition(tenant, person, actor):
    for _ in range(3):
        remember(team=tenant.team, person=person, actor=actor, source=Note.Source.IMPORT, **note_fields())
    assert Note.objects.get().repetitions == 1


def test_daily_notes_continue_in_a_numbered_sibling_when_full(tenant, person, actor):
    from datetime import date

    from memory.services import append_daily

    day = date(2026, 11, 30)
    first = append_daily(team=tenant.team, person=person, actor=actor, text="Morning: " + "a" * 1500, day=day)
    assert (first.key, first.note.kind, first.bank.address) == ("daily-2026-11-30", "daily", "user:ada")
    second = append_daily(team=tenant.team, person=person, actor=actor, text="Evening: " + "b" * 900, day=day)
    assert second.key == "daily-2026-11-30-2"
    third = append_daily(team=tenant.team, person=person, actor=actor, text="Night: short", day=day)
    assert third.key == "daily-2026-11-30-2"
    assert third.action == "appended"
    assert Note.objects.get(key="daily-2026-11-30").content == "Morning: " + "a" * 1500
    refused = Revision.objects.get(action="refused")
    assert refused.note_key == "daily-2026-11-30"
    assert "the limit is 2000" in refused.reason


def test_an_owner_edit_makes_the_note_the_owners(tenant, person, actor):
    note = remember(team=tenant.team, person=person, actor=actor, **note_fields()).note
    edit_note(note=note, actor=Actor("owner", "user:ada"), mode="replace", content="Ada lives in Tromsø.")
    assert Note.objects.get().source == "owner"


def test_a_mute_cannot_name_another_teams_agent(tenant, other_tenant, person):
    from memory.services import mute_category

    with pytest.raises(NoteNotFound):
        mute_category(person=person, agent=other_tenant.agent, category="health")
