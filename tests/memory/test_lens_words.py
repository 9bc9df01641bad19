"""The lens in plain words: whose each bank is, why notes are gone, what was not kept, whom an admin sees."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import Membership
from memory.models import Bank, Note, Revision
from memory.services import Actor, expire_notes, forget, merge_notes, remember, update_bank_settings
from tests.support.factories import PersonFactory, note_fields, written

pytestmark = pytest.mark.django_db


def test_the_removed_list_says_who_removed_what_when_and_why(lens_client, tenant, person, actor):
    remember(team=tenant.team, person=person, actor=actor, **note_fields())
    forget(team=tenant.team, person=person, actor=actor, key="home-city")
    diary = written(remember(
        team=tenant.team, person=person, actor=actor,
        **note_fields(key="diary", description="Ada's secret diary", content="Dear diary, nobody may read this."),
    ))  # fmt: skip
    assert lens_client.post(f"/m/{diary.pk}/delete").status_code == 302
    remember(
        team=tenant.team, person=person, actor=actor, expires_at=timezone.now() + timedelta(minutes=1),
        **note_fields(key="on-a-train", description="Where Ada is now", content="On the train to Bergen."),
    )  # fmt: skip
    expire_notes(now=timezone.now() + timedelta(minutes=2))
    keep = written(remember(team=tenant.team, person=person, actor=actor, **note_fields(key="city")))
    twin = written(remember(team=tenant.team, person=person, actor=actor, **note_fields(key="town")))
    merge_notes(keep=keep, absorb=[twin], actor=Actor(Revision.Actor.CONSOLIDATION, "test"), reason="the same fact")

    html = lens_client.get("/lens/").content.decode()
    assert ">Removed</h3>" in html
    agent = tenant.agent.name
    assert f"{agent} forgot “Where the person lives” (home-city) when asked to." in html
    assert "You deleted a note; what it said is erased." in html
    removed = html.split(">Removed</h3>", 1)[1]
    assert "diary" not in removed.lower()  # not its content, description or key
    assert "nobody may read this" not in html
    assert "“Where Ada is now” (on-a-train) expired at " in html
    assert "Merged “Where the person lives” (town) into city while tidying up similar notes." in html
    # Erased stays erased: neither what the note said nor how it was described is on the page.
    assert "Dear diary" not in html
    assert "secret diary" not in html


def test_an_eviction_and_a_refusal_read_as_sentences(lens_client, tenant, person, actor):
    held = written(remember(
        team=tenant.team, person=person, actor=actor,
        **note_fields(key="employer", description="Where Ada works", content="Ada works at Acme."),
    ))  # fmt: skip
    update_bank_settings(
        bank=held.bank, actor=Actor(Revision.Actor.ADMIN, "test"), changes={"policy": "bounded", "capacity": 1}
    )
    remember(
        team=tenant.team, person=person, actor=actor, kind=Note.Kind.PREFERENCE,
        **note_fields(key="cilantro", description="Cilantro", content="Ada hates cilantro."),
    )  # fmt: skip
    with pytest.raises(Exception, match="worth less"):
        remember(
            team=tenant.team, person=person, actor=actor, kind=Note.Kind.EPHEMERAL,
            **note_fields(key="on-a-train", description="Where Ada is now", content="On the train."),
        )  # fmt: skip

    html = lens_client.get("/lens/").content.decode()
    assert (
        "Forgot “Where Ada works” (employer) to make room for a new preference: it keeps at most 1 thing and this "
        "was the least important." in html
    )
    assert (
        "Did not keep a new passing state (on-a-train): it keeps at most 1 thing, and everything it holds matters "
        "more." in html
    )
    assert "<strong>1 of 1 note</strong>" in html
    assert "worth" not in html  # the engine's arithmetic is for admins


def test_an_admin_sees_the_people_of_the_team_with_something_remembered(lens_client, tenant, person, actor):
    Membership.objects.create(team=tenant.team, user=person.user, role=Membership.Role.ADMIN)
    grace = PersonFactory.create(team=tenant.team, external_id="grace")
    remember(team=tenant.team, person=grace, actor=actor, **note_fields(content="Grace lives in Rome."))
    PersonFactory.create(team=tenant.team, external_id="demo-0123abcd")  # a visitor who stored nothing

    html = lens_client.get("/lens/").content.decode()
    assert ">What agents remember about you</h2>" in html
    assert ">People in this team</h2>" in html
    assert ">grace</h3>" in html
    assert "About grace, everywhere" in html
    assert "Grace lives in Rome." in html
    assert "demo-0123abcd" not in html
    assert html.index("What agents remember about you") < html.index("People in this team")


def test_search_results_name_the_bank_in_words_and_show_no_score(lens_client, tenant, person, actor):
    remember(team=tenant.team, person=person, actor=actor, scope="project:apollo", **note_fields())
    html = lens_client.get("/lens/", {"q": "where does Ada live"}).content.decode()
    assert "· About you in project Apollo" in html
    assert "score" not in html
    assert Bank.objects.filter(team=tenant.team).exists()


# --- LangGraph store notes read as words -------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "shown"),
    [
        ('{"key": "diet", "value": {"text": "Ada is vegetarian"}}', "Ada is vegetarian"),
        ('{"key": "diet", "value": {"kind": "x", "description": "Eats no meat"}}', "Eats no meat"),
        ('{"key": "diet", "value": "Vegetarian since 2019"}', "Vegetarian since 2019"),
        ('{"key": "trip", "value": {"city": "Porto", "nights": 3, "tags": ["a"]}}', "city: Porto\nnights: 3"),
        ('{"key": "x", "value": {"text": ""}, "extra": 1}', '{"key": "x", "value": {"text": ""}, "extra": 1}'),
        ("{not json", "{not json"),
        ("Plain words stay as they are", "Plain words stay as they are"),
        ('{"key": "empty", "value": {}}', '{"key": "empty", "value": {}}'),
    ],
)
def test_a_store_items_content_is_read_as_its_words(content, shown):
    from memory.plain import note_text

    assert note_text(content) == shown


def test_the_lens_shows_a_langgraph_store_note_as_words_not_json(lens_client, tenant, person, actor):
    content = '{"key": "food-preferences", "value": {"text": "Ada prefers oat milk", "confidence": 0.9}}'
    remember(team=tenant.team, person=person, actor=actor, **note_fields(key="food", content=content))
    note = Note.objects.get(key="food")
    listed = lens_client.get("/lens/").content.decode()
    assert "Ada prefers oat milk" in listed
    assert "confidence" not in listed
    # The note's page shows the words; its edit form keeps the content as written, to edit it.
    page = lens_client.get(f"/m/{note.pk}").content.decode()
    assert '<div class="content">Ada prefers oat milk</div>' in page
    assert Note.objects.get(pk=note.pk).content == content  # shown as words, kept as written
