"""Curated banks: soft limit schedules consolidation once, the FULL latch, the hard limit, expiry."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from curator.services import consolidate_bank
from memory.exceptions import BankFull
from memory.models import Bank, Note, Revision
from memory.services import delete_note, expire_notes, latch_full, remember
from tests.support.factories import note_fields
from tests.support.fixtures import ROOT, WORKER_DEADLINE, database_url_for_subprocesses

pytestmark = pytest.mark.django_db


def fill(tenant, person, actor, count, start=0):
    for i in range(start, start + count):
        remember(team=tenant.team, person=person, actor=actor, **note_fields(key=f"fact-{i}", content=f"Fact {i}."))


@override_settings(MEMORY_SOFT_LIMIT=3, MEMORY_HARD_LIMIT=10)
def test_crossing_the_soft_limit_schedules_one_consolidation(
    tenant, person, actor, mocker, django_capture_on_commit_callbacks
):
    enqueue = mocker.patch("memory.services.capacity._enqueue_consolidation")
    with django_capture_on_commit_callbacks(execute=True):
        fill(tenant, person, actor, 3)
    enqueue.assert_not_called()
    with django_capture_on_commit_callbacks(execute=True):
        fill(tenant, person, actor, 3, start=3)  # three crossings coalesce into one run
    bank = Bank.objects.get()
    enqueue.assert_called_once_with(bank.pk)
    assert bank.consolidation_pending is True


@override_settings(MEMORY_SOFT_LIMIT=3, MEMORY_HARD_LIMIT=10)
def test_the_full_latch_refuses_new_notes_allows_updates_and_clears_on_removal(tenant, person, actor):
    fill(tenant, person, actor, 4)
    bank = Bank.objects.get()
    latch_full(bank=bank, actor=actor, reason="consolidation could not get under the soft limit")

    with pytest.raises(BankFull) as refused:
        remember(team=tenant.team, person=person, actor=actor, **note_fields(key="new-fact"))
    assert refused.value.code == "bank_full"
    assert "Offer the person to drop something old" in refused.value.message
    assert not Note.objects.filter(key="new-fact").exists()

    updated = remember(team=tenant.team, person=person, actor=actor, **note_fields(key="fact-0", content="Corrected."))
    assert updated.action == "updated"

    delete_note(note=Note.objects.get(key="fact-1"), actor=actor)
    assert Bank.objects.get().is_full is True  # 3 notes: not yet under the soft limit of 3
    delete_note(note=Note.objects.get(key="fact-2"), actor=actor)
    bank.refresh_from_db()
    assert (bank.is_full, bank.full_since) == (False, None)
    assert Revision.objects.filter(action="latch", reason__contains="cleared").exists()
    remember(team=tenant.team, person=person, actor=actor, **note_fields(key="new-fact"))


@override_settings(MEMORY_SOFT_LIMIT=2, MEMORY_HARD_LIMIT=3)
def test_the_hard_limit_refuses_regardless(tenant, person, actor, mocker):
    mocker.patch("memory.services.capacity._enqueue_consolidation")
    fill(tenant, person, actor, 3)
    with pytest.raises(BankFull, match="hard limit"):
        remember(team=tenant.team, person=person, actor=actor, **note_fields(key="one-more"))
    assert Note.objects.count() == 3
    assert Revision.objects.filter(action="refused", note_key="one-more").count() == 1


@override_settings(MEMORY_SOFT_LIMIT=2, MEMORY_HARD_LIMIT=10)
def test_consolidation_merges_duplicates_and_latches_when_still_over(tenant, person, actor, mocker):
    mocker.patch("memory.services.capacity._enqueue_consolidation")
    for key in ["tea", "likes-tea", "tea-lover"]:
        remember(team=tenant.team, person=person, actor=actor, **note_fields(key=key, content="Ada likes tea."))
    fill(tenant, person, actor, 2)
    bank = Bank.objects.get()
    assert bank.consolidation_pending
    outcome = consolidate_bank(bank_id=bank.pk, task_id="task-1")
    bank.refresh_from_db()
    assert "merged 2" in outcome
    assert Note.objects.filter(content="Ada likes tea.").count() == 1
    assert Revision.objects.filter(action="merge", actor="consolidation").count() == 3
    assert bank.is_full is True  # 3 distinct notes remain over the soft limit of 2
    assert bank.consolidation_pending is False
    assert "latched FULL" in bank.last_consolidation_outcome
    assert consolidate_bank(bank_id=bank.pk) == "skipped: no consolidation pending"


def test_expiry_removes_notes_with_actor_expiry(tenant, person, actor):
    remember(
        team=tenant.team, person=person, actor=actor, expires_at=timezone.now() + timedelta(hours=2),
        **note_fields(key="on-the-train"),
    )  # fmt: skip
    remember(team=tenant.team, person=person, actor=actor, **note_fields(key="name"))
    assert expire_notes(now=timezone.now()) == 0
    assert expire_notes(now=timezone.now() + timedelta(hours=3)) == 1
    assert list(Note.objects.values_list("key", flat=True)) == ["name"]
    removal = Revision.objects.get(action="delete")
    assert (removal.actor, removal.note_key) == ("expiry", "on-the-train")


@pytest.mark.django_db(transaction=True)
def test_concurrent_upserts_of_one_key_from_several_processes_make_one_row(tenant, person, tmp_path):
    env = {**os.environ, "DATABASE_URL": database_url_for_subprocesses()}
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.memory.upsert_child",
                str(tenant.team.pk),
                str(person.pk),
                str(i),
                str(tmp_path),
            ],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(6)
    ]
    # Start them together once all six are up (however slow the machine), so the upserts really race.
    deadline = time.monotonic() + WORKER_DEADLINE
    while len(list(tmp_path.glob("ready-*"))) < len(workers):
        for worker in workers:
            if worker.poll() is not None:
                pytest.fail(f"an upsert process exited before it was ready:\n{worker.communicate()[0]}")
        assert time.monotonic() < deadline, f"the upsert processes were not ready within {WORKER_DEADLINE:.0f}s"
        time.sleep(0.05)
    (tmp_path / "go").touch()
    for worker in workers:
        output, _ = worker.communicate(timeout=WORKER_DEADLINE)
        assert worker.returncode == 0, output
    assert Note.objects.filter(key="favourite-colour").count() == 1
    revisions = Revision.objects.filter(note_key="favourite-colour")
    assert revisions.count() == 6
    assert sorted(revisions.values_list("action", flat=True)) == ["create"] + ["update"] * 5
    assert sorted(revisions.values_list("actor_ref", flat=True)) == [f"proc-{i}" for i in range(6)]
