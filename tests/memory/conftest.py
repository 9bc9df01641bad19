from __future__ import annotations

import pytest

from accounts.models import Person
from memory.models import Revision
from memory.services import Actor
from tests.factories import PersonFactory


@pytest.fixture
def person(tenant) -> Person:
    return PersonFactory(team=tenant.team, external_id="ada")


@pytest.fixture
def actor(tenant) -> Actor:
    return Actor(Revision.Actor.AGENT, tenant.agent.slug, "req-1")


def note_fields(**overrides: object) -> dict[str, object]:
    fields = {"key": "home-city", "description": "Where the person lives", "content": "Ada lives in Oslo."}
    fields.update(overrides)
    return fields


@pytest.fixture
def index_inline(mocker, django_capture_on_commit_callbacks):
    """Run the write path's after-commit indexing inline, as a worker would (failures are left for
    the retry / reconciler, like the Celery task does)."""
    import logging

    from memory.embedders import EmbeddingUnavailable

    def run_inline(indexed, ids):
        try:
            indexed.index(ids)
        except EmbeddingUnavailable as exc:
            logging.getLogger(__name__).warning("inline indexing failed: %s", exc)

    mocker.patch("memory.indexing.dispatch", side_effect=run_inline)

    def capture():
        return django_capture_on_commit_callbacks(execute=True)

    return capture
