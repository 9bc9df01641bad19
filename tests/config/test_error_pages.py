"""Errors people meet are pages in the lens's layout that say what happened and offer a way back."""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from accounts.models import Membership
from config import urls
from memory.services import remember
from tests.support.factories import note_fields, written
from tests.support.fixtures import HTMX

pytestmark = pytest.mark.django_db

WAY_BACK = '<a href="/lens/">Back to the Memory lens</a>'


def test_a_deleted_notes_page_is_a_styled_404_that_says_so(lens_client, tenant, person, actor):
    note = written(remember(team=tenant.team, person=person, actor=actor, **note_fields()))
    assert lens_client.post(f"/m/{note.pk}/delete").status_code == 302
    response = lens_client.get(f"/m/{note.pk}")
    html = response.content.decode()
    assert response.status_code == 404
    assert '<link rel="stylesheet" href="/static/mnemo.css">' in html
    assert '<h1 id="error-title">Not found</h1>' in html
    assert "This note no longer exists: it was deleted" in html
    assert WAY_BACK in html


def test_saving_a_note_deleted_elsewhere_says_the_change_was_not_saved(lens_client, tenant, person, actor):
    note = written(remember(team=tenant.team, person=person, actor=actor, **note_fields()))
    assert lens_client.post(f"/m/{note.pk}/delete").status_code == 302
    response = lens_client.post(f"/m/{note.pk}/edit", {"description": "Home", "content": "Bergen"}, headers=HTMX)
    assert response.status_code == 404
    assert (
        "<p data-error-message>This note was deleted elsewhere (in another tab, by an agent, or it expired), so "
        "your change was not saved.</p>" in response.content.decode()
    )


def test_an_unknown_address_is_a_styled_404_and_the_api_keeps_json(client):
    html = client.get("/nowhere/").content.decode()
    assert "Nothing here: the address may be mistyped" in html
    assert WAY_BACK in html
    assert client.get("/api/v1/nowhere").json()["error"]["code"] == "not_found"


def test_a_refused_change_is_a_styled_403_that_says_who_may(lens_client, lens_user, tenant, person, actor):
    Membership.objects.create(team=tenant.team, user=lens_user, role=Membership.Role.MEMBER)
    # Her own note in the scope is what makes the scope's shared bank hers to read.
    remember(team=tenant.team, person=person, actor=actor, scope="project:apollo", **note_fields(key="own"))
    shared = written(remember(
        team=tenant.team, person=person, actor=actor, scope="project:apollo", bank="shared", **note_fields(),
    ))  # fmt: skip
    response = lens_client.get(f"/m/{shared.pk}/delete")
    html = response.content.decode()
    assert response.status_code == 403
    assert '<h1 id="error-title">Not allowed</h1>' in html
    assert "only a team admin can change or delete it" in html
    assert WAY_BACK in html


def test_a_server_error_is_a_styled_500_that_needs_nothing_from_the_request():
    assert urls.handler500 is not None
    response = urls.handler500(RequestFactory().get("/lens/"))
    html = response.content.decode()
    assert response.status_code == 500
    assert '<h1 id="error-title">Something went wrong</h1>' in html
    assert "it is logged" in html
    assert WAY_BACK in html
