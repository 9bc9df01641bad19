"""The single write path for notes.

Every change to a note goes through this package: create, upsert by key, append to a category
note, edit, forget, owner delete and erase, eviction, expiry, consolidation's merges and import.
Each change and each refusal leaves a Revision row; refused writes leave nothing else. Saying
the same thing again changes nothing but the note's repetition count, and is not logged.

- revisions: who writes (Actor) and the revision log, refusals included;
- capacity: bank creation and settings, limits and the FULL latch, bounded-bank admission and
  eviction, consolidation scheduling;
- notes: the write use cases on notes;
- mutes: categories and notes a person mutes for an agent;
- proposals: review, where agents' writes about a person wait for that person's approval;
- people: whole-person erasure (with what other apps register in memory.person_data).

Reads live in memory.queries, bank addressing in memory.banks, input checks in memory.validation.
Names with a leading underscore are private to this package. The public writes are re-exported
here: `from memory import services; services.remember(...)`.
"""

from memory.services.capacity import (
    clear_latch,
    get_or_create_bank,
    latch_full,
    record_consolidation,
    record_consolidation_failure,
    request_consolidation,
    request_consolidations_again,
    update_bank_settings,
)
from memory.services.mutes import (
    mute_category,
    mute_for_agents,
    mute_note,
    remove_mute,
    unmute_category,
    unmute_note,
)
from memory.services.notes import (
    NoteErasure,
    WriteResult,
    append_daily,
    append_observation,
    delete_note,
    edit_applicable_note,
    edit_note,
    erase_note,
    expire_notes,
    forget,
    merge_notes,
    remember,
)
from memory.services.people import PersonErasure, erase_person
from memory.services.proposals import (
    expire_proposals,
    keep_proposal,
    propose,
    reject_proposal,
    set_review_writes,
    under_review,
)
from memory.services.revisions import Actor, record_refused_call

__all__ = [
    "Actor",
    "NoteErasure",
    "PersonErasure",
    "WriteResult",
    "append_daily",
    "append_observation",
    "clear_latch",
    "delete_note",
    "edit_applicable_note",
    "edit_note",
    "erase_note",
    "erase_person",
    "expire_notes",
    "expire_proposals",
    "forget",
    "get_or_create_bank",
    "keep_proposal",
    "latch_full",
    "merge_notes",
    "mute_category",
    "mute_for_agents",
    "mute_note",
    "propose",
    "record_consolidation",
    "record_consolidation_failure",
    "record_refused_call",
    "reject_proposal",
    "remember",
    "remove_mute",
    "request_consolidation",
    "request_consolidations_again",
    "set_review_writes",
    "under_review",
    "unmute_category",
    "unmute_note",
    "update_bank_settings",
]
