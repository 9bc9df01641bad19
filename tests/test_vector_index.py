"""One vector index for notes and messages (memory.indexing): the registry that the beat
reconciler and `manage.py reindex` loop over, and the task names queued work is known by."""

from __future__ import annotations

import dataclasses

import pytest

from conversations.indexing import MESSAGES
from conversations.models import Message
from conversations.services import record_message, start_conversation
from memory.indexing import NOTES, indexed_models, register
from memory.models import Note
from memory.services import remember
from tests.support.factories import note_fields

pytestmark = pytest.mark.django_db


@pytest.fixture
def unindexed(tenant, person, actor, conversation, settings):
    """A note and a message written while no embedder was configured, then one is."""
    settings.EMBEDDER = "none"
    remember(team=tenant.team, person=person, actor=actor, **note_fields())
    record_message(conversation=conversation, role="user", content="I live in Oslo.")
    settings.EMBEDDER = "hashing"
    assert (NOTES.stale().count(), MESSAGES.stale().count()) == (1, 1)


def test_notes_and_messages_are_registered_in_app_order():
    assert [(indexed.label, indexed.model) for indexed in indexed_models()] == [("note", Note), ("message", Message)]


def test_a_label_is_registered_once():
    register(NOTES)  # again: a no-op
    assert indexed_models().count(NOTES) == 1
    with pytest.raises(ValueError, match="already registered as 'note'"):
        register(dataclasses.replace(NOTES, model=Message))


def test_the_beat_reconciler_embeds_every_indexed_model(unindexed):
    from memory.tasks import reconcile_index

    assert reconcile_index() == "notes: checked 1, indexed 1, failed 0; messages: checked 1, indexed 1, failed 0"
    assert not NOTES.stale().exists()
    assert not MESSAGES.stale().exists()


def test_the_message_reconciler_task_still_runs_for_work_queued_under_its_name(unindexed):
    from conversations.tasks import reconcile_message_index

    assert reconcile_message_index() == "checked 1, indexed 1, failed 0"
    assert not MESSAGES.stale().exists()
    assert NOTES.stale().count() == 1  # messages only, as before


def test_reindex_names_each_indexed_model(unindexed, capsys):
    from django.core.management import call_command

    call_command("reindex")
    out = capsys.readouterr().out
    assert out.index("1 note(s) to index") < out.index("Indexed 1 note(s).") < out.index("1 message(s) to index")
    assert "Indexed 1 message(s)." in out


def test_every_scheduled_task_and_every_index_task_exists():
    from config.celery import app

    app.loader.import_default_modules()
    names = [entry["task"] for entry in app.conf.beat_schedule.values()]
    names += [indexed.task for indexed in indexed_models()]
    assert [name for name in names if name not in app.tasks] == []


def test_rows_scheduled_in_one_transaction_go_to_one_task(
    tenant, person, actor, mocker, django_capture_on_commit_callbacks
):
    from django.db import transaction

    dispatch = mocker.patch("memory.indexing.dispatch")
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        first = remember(team=tenant.team, person=person, actor=actor, **note_fields(key="first")).note
        second = remember(team=tenant.team, person=person, actor=actor, **note_fields(key="second")).note
        conversation = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
        message = record_message(conversation=conversation, role="user", content="Hello there")

    sent = {call.args[0].label: call.args[1] for call in dispatch.call_args_list}
    assert dispatch.call_count == 2
    assert sent == {"note": [first.pk, second.pk], "message": [message.pk]}


def test_a_batch_begun_in_a_rolled_back_savepoint_is_dropped_with_it(
    tenant, person, actor, mocker, django_capture_on_commit_callbacks
):
    from django.db import transaction

    dispatch = mocker.patch("memory.indexing.dispatch")
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        try:
            with transaction.atomic():
                remember(team=tenant.team, person=person, actor=actor, **note_fields(key="undone"))
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        kept = remember(team=tenant.team, person=person, actor=actor, **note_fields(key="kept")).note

    assert [call.args[1] for call in dispatch.call_args_list] == [[kept.pk]]
