"""Shared-scope notes in the lens: read-only for people who are not team admins, whose history
then shows the events but not what earlier versions said; team admins keep full control."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.test import Client

from accounts.models import Membership
from memory.models import Note, Revision
from memory.services import Actor, remember
from tests.support.factories import PersonFactory, note_fields, written
from tests.support.fixtures import HTMX, PASSWORD

pytestmark = pytest.mark.django_db


@dataclass
class Shared:
    note: Note  # scope:project:apollo, written by one agent, then corrected by another
    own: Note  # Ada's private note in the same scope


@pytest.fixture
def shared(tenant, person, actor) -> Shared:
    remember(
        team=tenant.team, person=person, actor=actor, scope="project:apollo", bank="shared",
        **note_fields(key="standup", description="When the stand-up is", content="Stand-up at nine, says Bob."),
    )  # fmt: skip
    note = written(remember(
        team=tenant.team, person=person, actor=Actor(Revision.Actor.AGENT, "scribe"), scope="project:apollo",
        bank="shared", **note_fields(key="standup", description="When the stand-up is", content="Stand-up at ten."),
    ))  # fmt: skip
    own = written(remember(
        team=tenant.team, person=person, actor=actor, scope="project:apollo",
        **note_fields(key="deadline", description="Apollo deadline", content="Ada ships in May."),
    ))  # fmt: skip
    return Shared(note=note, own=own)


@pytest.fixture
def member_client(lens_client, lens_user, tenant) -> Client:
    """Ada's own login, a plain member of the team: she sees the shared bank of her scope."""
    Membership.objects.create(team=tenant.team, user=lens_user, role=Membership.Role.MEMBER)
    return lens_client


@pytest.fixture
def admin_client(django_user_model, tenant) -> Client:
    user = django_user_model.objects.create_user("team-admin", password=PASSWORD)
    Membership.objects.create(team=tenant.team, user=user, role=Membership.Role.ADMIN)
    client = Client()
    client.force_login(user)
    return client


def revisions_of(note: Note) -> list[tuple[str, str]]:
    return list(Revision.objects.filter(note_id=note.pk).order_by("id").values_list("action", "actor"))


def test_a_member_reads_a_shared_note_with_its_current_content_only(member_client, shared):
    html = member_client.get(f"/m/{shared.note.pk}").content.decode()
    assert '<div class="content">Stand-up at ten.</div>' in html
    assert "Stand-up at nine" not in html  # an earlier observation, someone else's
    assert "says Bob" not in html
    assert "only a team admin can change or delete it" in html
    assert "Edit this note" not in html
    assert f'action="/m/{shared.note.pk}/edit"' not in html
    assert f'href="/m/{shared.note.pk}/delete"' not in html
    # The events stay: who did what, and when; each says why its content is not shown.
    assert html.count('<li class="revision">') == 2
    assert "<strong>Created</strong>" in html
    assert "<strong>Updated</strong>" in html
    assert html.count("What this version said is shown to team admins only.") == 2


def test_a_member_keeps_full_control_of_her_own_notes_beside_it(member_client, shared):
    html = member_client.get(f"/m/{shared.own.pk}").content.decode()
    assert "Edit this note" in html
    assert f'href="/m/{shared.own.pk}/delete"' in html
    assert "only a team admin" not in html


@pytest.mark.parametrize("headers", [{}, HTMX], ids=["form", "htmx"])
def test_a_crafted_edit_of_a_shared_note_by_a_member_is_refused_with_403(member_client, shared, headers):
    before = revisions_of(shared.note)
    response = member_client.post(
        f"/m/{shared.note.pk}/edit", {"description": "When", "content": "Stand-up is cancelled."}, headers=headers
    )
    assert response.status_code == 403
    shared.note.refresh_from_db()
    assert shared.note.content == "Stand-up at ten."
    assert revisions_of(shared.note) == before


@pytest.mark.parametrize("headers", [{}, HTMX], ids=["form", "htmx"])
def test_a_crafted_delete_of_a_shared_note_by_a_member_is_refused_with_403(member_client, shared, headers):
    assert member_client.get(f"/m/{shared.note.pk}/delete", headers=headers).status_code == 403
    assert member_client.post(f"/m/{shared.note.pk}/delete", headers=headers).status_code == 403
    assert Note.objects.filter(pk=shared.note.pk).exists()
    assert not Revision.objects.filter(note_id=shared.note.pk, action="delete").exists()


def test_the_lens_marks_the_shared_bank_read_only_for_a_member_and_not_for_an_admin(
    member_client, admin_client, shared
):
    notice = "a team admin can change or delete them"
    member_html = member_client.get("/lens/").content.decode()
    assert ">Shared in project Apollo</h3>" in member_html
    assert member_html.count(notice) == 1  # the shared bank only, not her private one
    assert notice not in admin_client.get("/lens/").content.decode()


def test_a_team_admin_sees_the_history_of_a_shared_note_and_edits_it_with_htmx(admin_client, shared):
    html = admin_client.get(f"/m/{shared.note.pk}").content.decode()
    assert "Edit this note" in html
    assert f'href="/m/{shared.note.pk}/delete"' in html
    assert "Stand-up at <del>nine, says Bob.</del><ins>ten.</ins>" in html  # the earlier observation, as a diff
    assert "shown to team admins only" not in html

    response = admin_client.post(
        f"/m/{shared.note.pk}/edit",
        {"description": "When the stand-up is", "content": "Stand-up at half past ten."},
        headers=HTMX,
    )
    assert response.status_code == 200
    fragment = response.content.decode()
    assert fragment.lstrip().startswith('<article id="note-card"')
    assert "Stand-up at half past ten." in fragment
    assert 'hx-swap-oob="true"' in fragment
    shared.note.refresh_from_db()
    assert shared.note.content == "Stand-up at half past ten."
    edit = Revision.objects.filter(note_id=shared.note.pk).order_by("-id").first()
    assert (edit.action, edit.actor, edit.actor_ref) == ("update", "owner", "user:team-admin")


def test_a_team_admin_deletes_a_shared_note(admin_client, shared):
    assert admin_client.get(f"/m/{shared.note.pk}/delete").status_code == 200
    response = admin_client.post(f"/m/{shared.note.pk}/delete", headers=HTMX)
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/lens/"
    assert not Note.objects.filter(pk=shared.note.pk).exists()
    assert Revision.objects.filter(note_id=shared.note.pk, action="delete", actor="owner").exists()


def test_an_admin_of_another_team_is_no_admin_here(client, django_user_model, shared, member_client):
    from tests.support.fixtures import make_tenant

    elsewhere = make_tenant()
    user = django_user_model.objects.create_user("other-admin", password=PASSWORD)
    Membership.objects.create(team=elsewhere.team, user=user, role=Membership.Role.ADMIN)
    other = Client()
    other.force_login(user)
    assert other.get(f"/m/{shared.note.pk}").status_code == 404
    assert other.post(f"/m/{shared.note.pk}/edit", {"description": "x", "content": "y"}).status_code == 404
    unchanged = Note.objects.get(pk=shared.note.pk)
    assert (unchanged.description, unchanged.content) == (shared.note.description, shared.note.content)


def test_a_members_mute_of_a_shared_category_changes_only_her_own_reads(member_client, tenant, person, actor):
    """Mute controls stay beside shared notes: a mute is the person's, and changes no shared note."""
    from memory.queries import build_digest

    remember(
        team=tenant.team, person=person, actor=actor, scope="project:apollo", bank="shared", category="rituals",
        **note_fields(key="retro", description="Retro day", content="Retro on Fridays."),
    )  # fmt: skip
    remember(team=tenant.team, person=person, actor=actor, scope="project:apollo", **note_fields(key="deadline"))
    response = member_client.post(
        "/lens/mute", {"person": person.pk, "agent": tenant.agent.pk, "category": "rituals"}, headers=HTMX
    )
    assert response.status_code == 200
    assert Note.objects.get(key="retro").content == "Retro on Fridays."
    ada_sees = build_digest(team=tenant.team, person=person, agent=tenant.agent, scope="project:apollo")
    bob = PersonFactory.create(team=tenant.team, external_id="bob")
    bob_sees = build_digest(team=tenant.team, person=bob, agent=tenant.agent, scope="project:apollo")
    assert "retro" not in {note.key for note in ada_sees.entries}
    assert "retro" in {note.key for note in bob_sees.entries}
