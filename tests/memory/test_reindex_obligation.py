"""The reindex obligation, enforced: every writer of a note leaves it indexed.

Two halves. Statically, nothing outside the write path (memory/services/) writes Note rows.
Dynamically, every public write service leaves no stale note once its transaction commits. A
new write service fails here until it is exercised, and a deliberately unindexed write (the
fixture below) is caught by the same check.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
from django.utils import timezone

from curator.services import consolidate_bank
from memory import services
from memory.indexing import NOTES
from memory.models import Bank, Note
from memory.packages import import_package
from tests.support.code_scan import call_chain
from tests.support.factories import note_fields
from tests.support.fixtures import ROOT

WRITE_METHODS = {
    "create",
    "bulk_create",
    "bulk_update",
    "update",
    "update_or_create",
    "get_or_create",
    "delete",
    "save",
}
WRITE_PATH = ROOT / "memory" / "services"


def note_writes_in(path: Path) -> list[str]:
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        chain = call_chain(node)
        if chain and chain[-1] == "Note" and len(chain) == 1:
            found.append(f"{shown}:{node.lineno} constructs a Note")
        elif chain and chain[0] in WRITE_METHODS and ("Note" in chain[1:] or "notes" in chain[1:]):
            found.append(f"{shown}:{node.lineno} {'.'.join(reversed(chain))}")
    return found


def project_modules() -> list[Path]:
    skip = {".venv", "var", "tests", "migrations", "mutants"}  # mutants: `make mutate`'s scratch copy
    return [
        p
        for p in ROOT.rglob("*.py")
        if not any(part in skip or part.startswith(("var-", ".")) for part in p.relative_to(ROOT).parts)
    ]


def test_no_module_outside_the_write_path_writes_note_rows():
    offenders = [
        write for path in project_modules() if not path.is_relative_to(WRITE_PATH) for write in note_writes_in(path)
    ]
    assert offenders == [], "Note rows must be written through memory/services/ only"


def test_the_static_check_finds_a_write_when_there_is_one(tmp_path):
    rogue = tmp_path / "rogue_writer.py"
    rogue.write_text(
        "from memory.models import Note\n\ndef sneak(bank):\n    Note.objects.filter(bank=bank).update(content='x')\n    bank.notes.create(key='k')\n"
    )
    assert len(note_writes_in(rogue)) == 2


def assert_every_note_indexed() -> None:
    stale = list(NOTES.stale().values_list("bank__address", "key"))
    assert stale == [], f"notes written without being indexed: {stale}"


# Public functions of the write path that write notes are exercised below; the others are
# listed with why they need no reindex. A new public function fails the test until it is placed.
EXERCISED = {
    "remember", "append_observation", "append_daily", "edit_note", "edit_applicable_note", "merge_notes",
    "keep_proposal",
}  # fmt: skip
NOT_NOTE_WRITERS = {
    "delete_note": "removes the note; its vector cascades",
    "forget": "removes the note; its vector cascades",
    "erase_note": "removes the note; its vector cascades",
    "erase_person": "removes notes; their vectors cascade",
    "expire_notes": "removes notes; their vectors cascade",
    "latch_full": "bank state only",
    "clear_latch": "bank state only",
    "update_bank_settings": "bank settings; evictions remove notes",
    "request_consolidation": "bank state only",
    "request_consolidations_again": "bank state only",
    "record_consolidation": "bank state only",
    "record_consolidation_failure": "bank state only",
    "mute_category": "mutes only",
    "unmute_category": "mutes only",
    "mute_for_agents": "mutes only",
    "mute_note": "mutes only",
    "unmute_note": "mutes only",
    "remove_mute": "mutes only",
    "get_or_create_bank": "creates banks, not notes",
    "daily_key": "pure",
    "record_refused_call": "the revision log only",
    "new_bank_version": "bank versions only (the writers' shared step)",
    "banks_they_read": "reads bank ids",
    "notes_they_may_mute": "a filter of the notes a person may mute: writes nothing",
    "record_read": "the retrieval audit only",
    "pending_reads": "the retrieval audit only (a count)",
    "flush_reads": "the retrieval audit only",
    "discard_pending_reads": "the retrieval audit only (drops what was not written)",
    "forget_reads_of": "the retrieval audit only",
    "erase_reads_of_person": "the retrieval audit only",
    "delete_old_reads": "the retrieval audit only",
    "propose": "proposals only: a note is written when one is kept (keep_proposal)",
    "reject_proposal": "proposals and the revision log only",
    "expire_proposals": "proposals and the revision log only",
    "set_review_writes": "the person's review flag only",
    "under_review": "pure",
    "note_for_key": "reads the note an edit names",
    "proposal_created": "logs (the proposal.created event's place)",
}


def test_every_public_write_service_is_accounted_for():
    modules = [
        importlib.import_module(f"{services.__name__}.{info.name}") for info in pkgutil.iter_modules(services.__path__)
    ]
    public = {
        name
        for module in modules
        for name, member in inspect.getmembers(module, inspect.isfunction)
        if member.__module__ == module.__name__ and not name.startswith("_")
    }
    assert public == EXERCISED | NOT_NOTE_WRITERS.keys()


@pytest.mark.django_db
def test_every_public_write_service_leaves_its_notes_indexed(tenant, person, actor, index_inline, mocker):
    mocker.patch("memory.services.capacity._enqueue_consolidation")
    team = tenant.team
    with index_inline():
        created = services.remember(team=team, person=person, actor=actor, **note_fields()).note
    assert_every_note_indexed()
    with index_inline():
        services.remember(team=team, person=person, actor=actor, **note_fields(content="Ada moved to Bergen."))
    assert_every_note_indexed()
    with index_inline():
        services.append_observation(team=team, person=person, actor=actor, category="prefs", observation="Tea.")
        services.append_observation(team=team, person=person, actor=actor, category="prefs", observation="Books.")
    assert_every_note_indexed()
    with index_inline():
        services.edit_note(note=created, actor=actor, mode="find_replace", find="Bergen", content="Tromsø")
        services.edit_note(note=created, actor=actor, mode="replace", content="Ada lives in Tromsø now.")
    assert_every_note_indexed()
    with index_inline():
        services.edit_applicable_note(
            team=team, person=person, actor=actor, key=created.key, find="Tromsø", content="Bodø", reason="moved"
        )
    assert_every_note_indexed()
    with index_inline():
        services.append_daily(team=team, person=person, actor=actor, text="Went sailing.")
    assert_every_note_indexed()
    with index_inline():
        twin = services.remember(team=team, person=person, actor=actor, **note_fields(key="twin")).note
        services.merge_notes(
            keep=Note.objects.get(pk=created.pk), absorb=[twin], actor=actor, content="Merged.", reason="test"
        )
    assert_every_note_indexed()
    with index_inline():
        report = import_package(
            team=team,
            data={"format": "mnemo.memory-package", "version": 1, "banks": [
                {"kind": "global", "person": "ada", "scope": "", "notes": [note_fields(key="imported")]}]},
            actor=actor,
            agent=None,
        )  # fmt: skip
    assert report.created == 1
    assert_every_note_indexed()
    with index_inline():
        proposal = services.propose(
            team=team, person=person, agent=tenant.agent, actor=actor, operation="remember", key="kept",
            description="Kept on review", content="Kept after review.",
        )  # fmt: skip
        services.keep_proposal(proposal=proposal, decider=actor)
    assert_every_note_indexed()
    with index_inline():
        for key in ("dup-a", "dup-b"):
            services.remember(team=team, person=person, actor=actor, **note_fields(key=key, content="Same words."))
        bank = Bank.objects.get(address="user:ada")
        Bank.objects.filter(pk=bank.pk).update(consolidation_pending=True)
        consolidate_bank(bank_id=bank.pk)
    assert_every_note_indexed()
    assert Note.objects.count() >= 4


@pytest.fixture
def unindexed_write(tenant, person):
    """A deliberately broken writer: a Note row created behind the write path's back."""
    bank = services.get_or_create_bank(team=tenant.team, person=person, scope="", kind="global")
    now = timezone.now()
    return Note.objects.create(
        team=tenant.team, bank=bank, key="sneaky", description="d", content="never indexed",
        source="remember", created_at=now, updated_at=now,
    )  # fmt: skip


@pytest.mark.django_db
def test_an_unindexed_write_is_caught(unindexed_write):
    with pytest.raises(AssertionError, match="sneaky"):
        assert_every_note_indexed()
