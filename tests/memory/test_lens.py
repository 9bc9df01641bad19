"""The Memory lens: who sees what, and every change through the write path with the owner as actor."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import Membership
from memory.models import Bank, Note, NoteVector, Revision
from memory.queries import build_digest
from memory.services import append_observation, latch_full, mute_category, remember
from tests.support.factories import AgentFactory, PersonFactory, note_fields, written
from tests.support.fixtures import HTMX, PASSWORD, make_tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def home_note(tenant, person, actor) -> Note:
    return written(remember(team=tenant.team, person=person, actor=actor, **note_fields()))


def test_anonymous_visitors_are_sent_to_the_login_page(client, home_note):
    for url in ["/lens/", f"/m/{home_note.pk}"]:
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"] == f"/login/?next={url}"


def test_login_form_signs_in_and_lands_on_the_lens(client, lens_user):
    page = client.get("/login/")
    assert b'<label for="id_username">Username</label>' in page.content
    response = client.post("/login/", {"username": "ada-login", "password": PASSWORD})
    assert response.status_code == 302
    assert response["Location"] == "/lens/"
    assert client.get("/lens/").status_code == 200


def test_lens_lists_each_bank_about_the_person_by_category_with_count_and_limit(
    lens_client, tenant, person, actor, home_note
):
    remember(
        team=tenant.team, person=person, actor=actor, scope="project:apollo", category="work",
        **note_fields(key="deadline", content="Apollo ships in May."),
    )  # fmt: skip
    remember(
        team=tenant.team, person=person, actor=actor, scope="project:apollo", bank="shared",
        **note_fields(key="stack", content="Apollo runs on Django."),
    )  # fmt: skip
    html = lens_client.get("/lens/").content.decode()
    titles = ["About you in project Apollo", "Shared in project Apollo", "About you, everywhere"]
    assert [html.index(f">{title}</h3>") for title in titles] == sorted(html.index(f">{t}</h3>") for t in titles)
    assert html.count("<strong>1 of 40 notes</strong>") == 3
    assert "Past 40 notes it is tidied up (similar notes merged); at 64 it takes nothing new" in html
    assert "<h4>work</h4>" in html
    assert "<h4>No category</h4>" in html
    # The memory itself, not only its keys: each note's content, kind and when it last changed.
    for content in ["Apollo ships in May.", "Apollo runs on Django.", "Ada lives in Oslo."]:
        assert f'<p class="note-content content-text">{content}</p>' in html
    assert "Fact · changed <time" in html
    # The engine's terms are for team admins: Ada is not one.
    assert "<code>user:ada" not in html
    assert "Engine details" not in html
    assert "score" not in html


def test_a_long_note_is_shortened_on_the_lens_and_expands(lens_client, tenant, person, actor):
    long = "Ada keeps a diary. " * 20
    remember(team=tenant.team, person=person, actor=actor, **note_fields(key="diary", content=long.strip()))
    html = lens_client.get("/lens/").content.decode()
    assert '<details class="note-content">' in html
    assert html.count(long.strip()) == 1  # in full once, inside the expandable part
    assert "Show all" in html


def test_lens_shows_only_the_banks_of_the_signed_in_users_people(lens_client, tenant, person, actor, home_note):
    stranger = PersonFactory.create(team=tenant.team, external_id="grace")
    remember(team=tenant.team, person=stranger, actor=actor, **note_fields(content="Grace lives in Rome."))
    # A shared bank of a scope the person has no private bank in is not about them.
    remember(team=tenant.team, person=stranger, actor=actor, scope="project:zeus", bank="shared", **note_fields())
    other = make_tenant()
    twin = PersonFactory.create(team=other.team, external_id="ada")
    remember(team=other.team, person=twin, actor=actor, **note_fields(content="Another team's Ada."))
    html = lens_client.get("/lens/").content.decode()
    assert "Ada lives in Oslo." in html
    assert "Grace lives in Rome." not in html
    assert "project Zeus" not in html
    assert "Another team&#x27;s Ada." not in html
    assert html.count("About you, everywhere") == 1
    assert "People in this team" not in html


def test_lens_explains_a_full_bank_and_its_last_consolidation(lens_client, tenant, person, actor, home_note):
    bank = home_note.bank
    Bank.objects.filter(pk=bank.pk).update(
        last_consolidation_at=timezone.now(), last_consolidation_outcome="merged 3 notes, still over the soft limit"
    )
    latch_full(bank=bank, actor=actor, reason="consolidation could not get under the soft limit")
    html = lens_client.get("/lens/").content.decode()
    assert '<span class="badge-full">Full</span>' in html
    assert "Full: it takes nothing new until something is removed; corrections still work." in html
    assert "Last consolidated" not in html  # the engine's account is for team admins
    Membership.objects.create(team=tenant.team, user=person.user, role=Membership.Role.ADMIN)
    html = lens_client.get("/lens/").content.decode()
    assert "Engine details (team admins)" in html
    assert "<code>user:ada</code>" in html
    assert "Last consolidated" in html
    assert "merged 3 notes, still over the soft limit" in html


def test_lens_lists_refusals_and_evictions_with_actor_and_reason(lens_client, tenant, person, actor, home_note):
    with pytest.raises(Exception, match="the limit is 2000"):
        remember(team=tenant.team, person=person, actor=actor, **note_fields(key="essay", content="x" * 2001))
    html = lens_client.get("/lens/").content.decode()
    assert ">Not kept</h3>" in html
    assert (
        f"Did not save what {tenant.agent.name} wrote to essay: content is 2001 characters; the limit is 2000." in html
    )


def test_lens_lists_only_the_newest_removals_per_person(lens_client, tenant, person, actor, mocker):
    mocker.patch("memory.views.REMOVALS_SHOWN", 2)
    for n in range(3):
        with pytest.raises(Exception, match="the limit is 2000"):
            remember(team=tenant.team, person=person, actor=actor, **note_fields(key=f"essay-{n}", content="x" * 2001))
    html = lens_client.get("/lens/").content.decode()
    assert "wrote to essay-2:" in html
    assert "wrote to essay-1:" in html
    assert "wrote to essay-0:" not in html


def test_lens_query_count_does_not_grow_with_banks_and_notes(
    lens_client, tenant, person, actor, django_assert_max_num_queries
):
    for scope in ["project:apollo", "project:zeus"]:
        for bank in ["private", "shared"]:
            for key in ["one", "two"]:
                remember(
                    team=tenant.team, person=person, actor=actor, scope=scope, bank=bank, category=key,
                    **note_fields(key=key),
                )  # fmt: skip
    # session, user, people, whether a team admin has others to page through and how many, banks,
    # memberships, agents, notes, mutes, removals, proposals waiting for review; then the digest
    # (its banks, through the kept notes): constant in the number of banks and notes.
    with django_assert_max_num_queries(13):
        lens_client.get("/lens/")


def test_another_persons_note_is_not_found(lens_client, tenant, actor):
    stranger = PersonFactory.create(team=tenant.team, external_id="grace")
    theirs = remember(team=tenant.team, person=stranger, actor=actor, **note_fields()).note
    other = make_tenant()
    elsewhere = remember(
        team=other.team, person=PersonFactory.create(team=other.team), actor=actor, **note_fields()
    ).note
    for note in [theirs, elsewhere]:
        for headers in ({}, HTMX):  # the htmx partial endpoints answer the same
            assert lens_client.get(f"/m/{note.pk}", headers=headers).status_code == 404
            edit = lens_client.post(f"/m/{note.pk}/edit", {"description": "x", "content": "y"}, headers=headers)
            assert edit.status_code == 404
            assert lens_client.get(f"/m/{note.pk}/delete", headers=headers).status_code == 404
            assert lens_client.post(f"/m/{note.pk}/delete", headers=headers).status_code == 404
    assert Note.objects.filter(pk__in=[theirs.pk, elsewhere.pk]).count() == 2
    # Nor do the lens page or its search show them.
    for headers in ({}, HTMX):
        page = lens_client.get("/lens/", {"q": "Ada lives in Oslo"}, headers=headers).content.decode()
        assert f'href="/m/{theirs.pk}"' not in page
        assert f'href="/m/{elsewhere.pk}"' not in page


def test_note_page_shows_the_note_and_its_revisions_newest_first_with_a_diff(
    lens_client, tenant, person, actor, home_note
):
    remember(team=tenant.team, person=person, actor=actor, **note_fields(content="Ada lives in Bergen."))
    html = lens_client.get(f"/m/{home_note.pk}").content.decode()
    assert '<h1 id="note-key">home-city</h1>' in html
    assert "Where the person lives" in html
    assert "Remember tool" in html
    assert html.index("<strong>Updated</strong>") < html.index("<strong>Created</strong>")
    assert "Ada lives in <del>Oslo.</del><ins>Bergen.</ins>" in html
    assert f"by agent <code>{tenant.agent.slug}</code>" in html


def test_editing_a_note_goes_through_the_write_path_as_its_owner(lens_client, home_note):
    response = lens_client.post(
        f"/m/{home_note.pk}/edit", {"description": "Home town", "content": "Ada lives in Tromsø.\r\nSince 2024."}
    )
    assert response.status_code == 302
    assert response["Location"] == f"/m/{home_note.pk}"
    home_note.refresh_from_db()
    assert (home_note.description, home_note.content) == ("Home town", "Ada lives in Tromsø.\nSince 2024.")
    revision = Revision.objects.get(note_id=home_note.pk, action="update")
    assert (revision.actor, revision.actor_ref) == ("owner", "user:ada-login")
    assert revision.before["content"] == "Ada lives in Oslo."


def test_an_over_cap_edit_shows_the_error_keeps_the_text_and_changes_nothing(lens_client, home_note):
    typed = "y" * 2001
    response = lens_client.post(f"/m/{home_note.pk}/edit", {"description": "Where the person lives", "content": typed})
    assert response.status_code == 422
    html = response.content.decode()
    assert "content is 2001 characters; the limit is 2000" in html
    assert f">\n{typed}</textarea>" in html
    assert '<details class="edit" open>' in html
    home_note.refresh_from_db()
    assert home_note.content == "Ada lives in Oslo."
    assert list(Revision.objects.filter(note_key="home-city").values_list("action", flat=True)) == [
        "refused",
        "create",
    ]


def test_deleting_asks_for_confirmation_first(lens_client, home_note):
    response = lens_client.get(f"/m/{home_note.pk}/delete")
    assert response.status_code == 200
    assert b"Delete the note</button>" in response.content
    assert Note.objects.filter(pk=home_note.pk).exists()


def test_deleting_removes_the_note_and_its_vector_and_search_no_longer_finds_it(
    lens_client, tenant, person, actor, index_inline
):
    with index_inline():
        note = remember(team=tenant.team, person=person, actor=actor, **note_fields()).note
    assert NoteVector.objects.filter(note_id=note.pk).exists()
    assert b'href="/m/%d"' % note.pk in lens_client.get("/lens/", {"q": "where does Ada live"}).content

    response = lens_client.post(f"/m/{note.pk}/delete")
    assert response.status_code == 302
    assert response["Location"] == "/lens/"
    assert not Note.objects.filter(pk=note.pk).exists()
    assert not NoteVector.objects.filter(note_id=note.pk).exists()
    revision = Revision.objects.get(note_id=note.pk, action="delete")
    assert (revision.actor, revision.actor_ref) == ("owner", "user:ada-login")
    # Erasure beats the log: the events stay, what the note said does not.
    assert all(r.before is None and r.after is None for r in Revision.objects.filter(note_id=note.pk))
    found = lens_client.get("/lens/", {"q": "where does Ada live"}).content.decode()
    assert f'href="/m/{note.pk}"' not in found
    assert "Recall finds nothing for that." in found


def test_lens_search_reaches_every_bank_of_the_person_whatever_its_scope(lens_client, tenant, person, actor):
    remember(
        team=tenant.team, person=person, actor=actor, scope="project:apollo",
        scope_refs={"work_item": ["A"]}, **note_fields(key="launch", content="The launch rehearsal is on Friday."),
    )  # fmt: skip
    remember(
        team=tenant.team, person=person, actor=actor, scope="project:apollo", bank="shared",
        **note_fields(key="venue", content="The rehearsal venue is hall B."),
    )  # fmt: skip
    html = lens_client.get("/lens/", {"q": "rehearsal"}).content.decode()
    assert ">launch</a>" in html
    assert ">venue</a>" in html


def test_muting_a_category_hides_it_from_that_agents_digest_and_greys_it_in_the_lens(
    lens_client, tenant, person, actor
):
    append_observation(team=tenant.team, person=person, actor=actor, category="food", observation="Likes rye bread.")
    other_agent = AgentFactory.create(team=tenant.team)
    response = lens_client.post("/lens/mute", {"person": person.pk, "agent": tenant.agent.pk, "category": "food"})
    assert response.status_code == 302
    assert build_digest(team=tenant.team, person=person, agent=tenant.agent).entries == []
    assert [n.key for n in build_digest(team=tenant.team, person=person, agent=other_agent).entries] == ["food"]
    html = lens_client.get("/lens/").content.decode()
    assert '<div class="category is-muted">' in html
    assert (
        f"Muted for {tenant.agent.name}: it is not given these notes, the messages they were learned from, or summaries built from them"
        in html
    )
    assert ">Unmute</button>" in html
    # Said once, after the change, in the page's one live region.
    assert f"Muted “food” for {tenant.agent.name}. {tenant.agent.name} is not given these notes" in html


def test_mute_says_what_it_does_next_to_the_control_and_confirms_over_htmx(lens_client, tenant, person, actor):
    append_observation(team=tenant.team, person=person, actor=actor, category="food", observation="Likes rye bread.")
    assert (
        "That agent is not given these notes, the messages they were learned from, or summaries built from those messages."
        in lens_client.get("/lens/").content.decode()
    )
    response = lens_client.post(
        "/lens/mute", {"person": person.pk, "agent": tenant.agent.pk, "category": "food"}, headers=HTMX
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="lens-banks">')
    assert '<div id="announcements" hx-swap-oob="innerHTML">' in html
    assert "Nothing is deleted; you still see everything here, and Unmute gives it all back." in html


def test_unmuting_a_category_restores_it(lens_client, tenant, person, actor):
    append_observation(team=tenant.team, person=person, actor=actor, category="food", observation="Likes rye bread.")
    mute_category(person=person, agent=tenant.agent, category="food")
    response = lens_client.post("/lens/unmute", {"person": person.pk, "agent": tenant.agent.pk, "category": "food"})
    assert response.status_code == 302
    assert [n.key for n in build_digest(team=tenant.team, person=person, agent=tenant.agent).entries] == ["food"]
    assert "is-muted" not in lens_client.get("/lens/").content.decode()


def test_muting_for_another_persons_or_teams_agent_is_not_found(lens_client, tenant, person, actor):
    stranger = PersonFactory.create(team=tenant.team)
    foreign_agent = make_tenant().agent
    for data in [
        {"person": stranger.pk, "agent": tenant.agent.pk, "category": "food"},
        {"person": person.pk, "agent": foreign_agent.pk, "category": "food"},
    ]:
        assert lens_client.post("/lens/mute", data).status_code == 404
    assert not person.mutes.exists()
    assert not stranger.mutes.exists()


def test_script_in_a_note_is_rendered_as_text(lens_client, tenant, person, actor):
    note = remember(
        team=tenant.team, person=person, actor=actor,
        **note_fields(description="<script>alert('d')</script>", content="<script>alert('c')</script>"),
    ).note  # fmt: skip
    for url in ["/lens/", f"/m/{note.pk}", "/lens/?q=script+alert"]:
        html = lens_client.get(url).content.decode()
        assert "<script>alert" not in html
        assert "&lt;script&gt;alert(&#x27;d&#x27;)&lt;/script&gt;" in html


def test_htmx_search_gets_only_the_results_fragment(lens_client, home_note):
    response = lens_client.get("/lens/", {"q": "Oslo"}, headers=HTMX)
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="search-results"')
    assert "<html" not in html
    assert f'href="/m/{home_note.pk}"' in html


def test_an_htmx_history_restore_gets_the_whole_page(lens_client, home_note):
    response = lens_client.get("/lens/", {"q": "Oslo"}, headers={**HTMX, "HX-History-Restore-Request": "true"})
    assert b"<html" in response.content
    assert b'<div id="lens-banks">' in response.content


def test_htmx_edit_gets_the_note_card_and_the_history_out_of_band(lens_client, home_note):
    response = lens_client.post(
        f"/m/{home_note.pk}/edit", {"description": "Home", "content": "Ada lives in Bergen."}, headers=HTMX
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<article id="note-card"')
    assert "<html" not in html
    assert '<section id="revision-list"' in html
    assert 'hx-swap-oob="true"' in html
    assert "<del>Oslo.</del><ins>Bergen.</ins>" in html


def test_htmx_over_cap_edit_gets_the_card_with_the_error(lens_client, home_note):
    response = lens_client.post(f"/m/{home_note.pk}/edit", {"description": "Home", "content": "z" * 2001}, headers=HTMX)
    assert response.status_code == 422
    html = response.content.decode()
    assert html.lstrip().startswith('<article id="note-card"')
    assert "the limit is 2000" in html
    assert "z" * 2001 in html


def test_htmx_mute_gets_the_banks_fragment(lens_client, tenant, person, actor):
    append_observation(team=tenant.team, person=person, actor=actor, category="food", observation="Likes rye bread.")
    response = lens_client.post(
        "/lens/mute", {"person": person.pk, "agent": tenant.agent.pk, "category": "food"}, headers=HTMX
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="lens-banks">')
    assert '<div class="category is-muted">' in html


def test_htmx_delete_redirects_the_client_to_the_lens(lens_client, home_note):
    response = lens_client.post(f"/m/{home_note.pk}/delete", headers=HTMX)
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/lens/"
    assert not Note.objects.filter(pk=home_note.pk).exists()


def test_posts_without_a_csrf_token_are_refused(lens_user, home_note):
    client = Client(enforce_csrf_checks=True)
    client.force_login(lens_user)
    response = client.post(f"/m/{home_note.pk}/edit", {"description": "Home", "content": "Injected."})
    assert response.status_code == 403
    home_note.refresh_from_db()
    assert home_note.content == "Ada lives in Oslo."
    # The token the page puts in <body hx-headers> is what htmx sends back.
    page = client.get(f"/m/{home_note.pk}").content.decode()
    token = page.split('"X-CSRFToken": "', 1)[1].split('"', 1)[0]
    sent = client.post(
        f"/m/{home_note.pk}/edit", {"description": "Home", "content": "Fixed."}, headers={"X-CSRFToken": token}
    )
    assert sent.status_code == 302


def test_the_lens_shows_what_each_agent_is_reminded_of_and_a_mute_changes_it(lens_client, tenant, person, actor):
    remember(team=tenant.team, person=person, actor=actor, category="health", **note_fields(key="allergy"))
    remember(team=tenant.team, person=person, actor=actor, **note_fields(key="city"))
    digest_id = f'id="digest-{person.pk}-{tenant.agent.pk}"'
    before = lens_client.get("/lens/").content.decode().split(digest_id)[1].split("</div>")[0]
    assert "<code>allergy</code>" in before
    lens_client.post("/lens/mute", {"person": person.pk, "agent": tenant.agent.pk, "category": "health"})
    after = lens_client.get("/lens/").content.decode().split(digest_id)[1].split("</div>")[0]
    assert "<code>allergy</code>" not in after
    assert "<code>city</code>" in after


def test_a_team_admin_sees_the_teams_people_and_a_member_does_not(client, django_user_model, tenant, actor):
    from accounts.models import Membership
    from tests.support.factories import PersonFactory

    bob = PersonFactory.create(team=tenant.team, external_id="bob")
    note = remember(team=tenant.team, person=bob, actor=actor, **note_fields(content="Bob lives in Rome.")).note
    member = django_user_model.objects.create_user("member", password="a-long-password-1")
    Membership.objects.create(team=tenant.team, user=member, role="member")
    client.force_login(member)
    assert "Bob lives in Rome" not in client.get("/lens/").content.decode()
    assert client.get(f"/m/{note.pk}").status_code == 404
    admin = django_user_model.objects.create_user("admin", password="a-long-password-1")
    Membership.objects.create(team=tenant.team, user=admin, role="admin")
    client.force_login(admin)
    assert client.get(f"/m/{note.pk}").status_code == 200
    assert "bob" in client.get("/lens/").content.decode()


def test_the_admin_clear_latch_action_is_logged(client, django_user_model, tenant, person, actor):
    from memory.models import Bank
    from memory.services import latch_full

    remember(team=tenant.team, person=person, actor=actor, **note_fields())
    bank = Bank.objects.get()
    latch_full(bank=bank, actor=actor, reason="test")
    root = django_user_model.objects.create_superuser("root", "root@example.com", "a-long-password-1")
    client.force_login(root)
    response = client.post(
        "/admin/memory/bank/", {"action": "clear_full_latch", "_selected_action": [bank.pk]}, follow=True
    )
    assert response.status_code == 200
    bank.refresh_from_db()
    assert bank.is_full is False
    cleared = Revision.objects.get(action="latch", reason__contains="cleared")
    assert (cleared.actor, cleared.actor_ref) == ("admin", "user:root")
