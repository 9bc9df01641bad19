"""Bank consolidation (the job a curated bank's soft-limit crossing schedules).

This first version merges exact duplicates only (the same content under different keys, with
identical scope and semantics), then latches the bank FULL if that did not bring it back under
its soft limit. LLM-driven merging arrives with the LLM providers.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory.models import Bank, Note, Revision
from memory.services import Actor, latch_full, merge_notes

logger = logging.getLogger(__name__)


def _fingerprint(note: Note) -> tuple[str, str, tuple[str, ...]]:
    content = " ".join(note.content.lower().split())
    refs = repr(sorted((t, tuple(ids)) for t, ids in note.scope_refs.items()))
    return content, refs, tuple(sorted(note.semantics))


def consolidate_bank(*, bank_pk: int, task_id: str = "") -> str:
    """Run one consolidation of a bank. Safe to run twice: it claims the pending flag first."""
    claimed = Bank.objects.filter(pk=bank_pk, consolidation_pending=True).update(consolidation_pending=False)
    if not claimed:
        return "skipped: no consolidation pending"
    actor = Actor(Revision.Actor.CONSOLIDATION, "rules", task_id)
    with transaction.atomic():
        bank = Bank.objects.select_for_update().get(pk=bank_pk)
        groups: dict[tuple[str, str, tuple[str, ...]], list[Note]] = defaultdict(list)
        for note in Note.objects.filter(team_id=bank.team_id, bank=bank).order_by("-updated_at"):
            groups[_fingerprint(note)].append(note)
        merged = 0
        for notes in groups.values():
            if len(notes) > 1:
                keep, *absorb = notes
                merge_notes(keep=keep, absorb=absorb, actor=actor, reason="identical content")
                merged += len(absorb)
        count = Note.objects.filter(team_id=bank.team_id, bank=bank).count()
        target = int(bank.soft_limit * settings.CONSOLIDATION_TARGET)
        if count > bank.soft_limit:
            latch_full(
                bank=bank,
                actor=actor,
                reason=f"{count} distinct notes remain after merging {merged}; the soft limit is {bank.soft_limit}",
            )
            outcome = f"merged {merged}; still {count} notes over the soft limit {bank.soft_limit}: latched FULL"
        else:
            outcome = f"merged {merged}; {count} notes (target {target}, soft limit {bank.soft_limit})"
        Bank.objects.filter(pk=bank.pk).update(last_consolidation_at=timezone.now(), last_consolidation_outcome=outcome)
    logger.info("consolidated %s: %s", bank.bank_id, outcome)
    return outcome
