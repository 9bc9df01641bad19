"""The lens as of a date (memory.as_of_views): who may see what then, and bad dates."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import Revision
from memory.services import Actor, edit_note, erase_note, remember
from tests.support.factories import PersonFactory, written
from tests.support.fixtures import HTMX

pytestmark = pytest.mark.django_db


@pytest.fixture
def home(tenant, person, lens_user):
    actor = Actor(Revision.Actor.AGENT, tenant.agent.slug)
    note = written(remember(team=tenant.team, person=person, actor=actor, key="home-city",
                            description="Where Ada lives", content="Ada lives in Oslo."))  # fmt: skip
    edit_note(note=note, actor=actor, mode="replace", content="Ada lives in Bergen.")
    first, second = Revision.objects.filter(note_id=note.pk).order_by("created_at", "id")
    Revision.objects.filter(pk=first.pk).update(created_at=timezone.now() - timedelta(days=3))
    Revision.objects.filter(pk=second.pk).update(created_at=timezone.now() - timedelta(days=1))
    return note


def day(days_ago: int) -> str:
    return (timezone.now() - timedelta(days=days_ago)).date().isoformat()


def test_the_front_page_lists_the_notes_as_they_stood(lens_client, home):
    then = lens_client.get("/lens/as-of/", {"as_of": day(2)})
    assert then.status_code == 200
    assert "Ada lives in Oslo." in then.text
    assert "Bergen" not in then.text
    assert f"/m/{home.pk}/as-of?as_of={day(2)}" in then.text
    assert "Ada lives in Bergen." in lens_client.get("/lens/as-of/", {"as_of": day(0)}).text
    assert "home-city" not in lens_client.get("/lens/as-of/", {"as_of": day(4)}).text


def test_the_note_page_answers_with_its_content_then_as_a_fragment(lens_client, home):
    fragment = lens_client.get(f"/m/{home.pk}/as-of", {"as_of": day(2)}, headers=HTMX)
    assert fragment.status_code == 200
    assert fragment.text.lstrip().startswith('<section id="note-as-of"')
    assert "Ada lives in Oslo." in fragment.text
    assert "did not exist yet" in lens_client.get(f"/m/{home.pk}/as-of", {"as_of": day(4)}).text
    page = lens_client.get(f"/m/{home.pk}")
    assert f'hx-get="/m/{home.pk}/as-of"' in page.text


@pytest.mark.parametrize("value", ["someday", "2999-01-01", "2026-02-30"])
def test_a_bad_date_is_400_saying_the_format(lens_client, home, value):
    page = lens_client.get("/lens/as-of/", {"as_of": value})
    assert page.status_code == 400
    assert "ISO 8601 with a timezone" in page.text
    fragment = lens_client.get(f"/m/{home.pk}/as-of", {"as_of": value}, headers=HTMX)
    assert fragment.status_code == 422  # swapped in, so the person reads why
    assert "ISO 8601 with a timezone" in fragment.text


def test_an_erased_note_has_no_past(lens_client, home):
    erase_note(note=home, actor=Actor(Revision.Actor.OWNER, "user:ada-login"))
    assert lens_client.get(f"/m/{home.pk}/as-of", {"as_of": day(2)}).status_code == 404
    assert "Oslo" not in lens_client.get("/lens/as-of/", {"as_of": day(2)}).text


def test_another_persons_note_is_404(lens_client, tenant, home):
    grace = PersonFactory.create(team=tenant.team, external_id="grace")
    theirs = written(remember(team=tenant.team, person=grace, actor=Actor(Revision.Actor.AGENT, "a"), key="k",
                              description="d", content="Grace's secret."))  # fmt: skip
    assert lens_client.get(f"/m/{theirs.pk}/as-of", {"as_of": day(0)}).status_code == 404
    assert "Grace's secret." not in lens_client.get("/lens/as-of/", {"as_of": day(0)}).text
