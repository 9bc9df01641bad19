from celery import shared_task

from memory.indexing import NOTES, drain, embedding_task, indexed_models
from memory.services import expire_notes, expire_proposals, reads


@shared_task(ignore_result=True)
def expire_due_notes() -> int:
    """Remove notes whose writer-set expires_at has passed (each removal logged with actor expiry)."""
    return expire_notes()


@embedding_task
def embed_notes(note_ids: list[int]) -> int:
    """Embed notes after their write commits, then whatever other notes were queued meanwhile
    (memory.indexing.drain). Safe to run twice; deleted notes are skipped."""
    return NOTES.index(note_ids) + drain(NOTES)


@shared_task(ignore_result=True)
def reconcile_index() -> str:
    """Embed whatever every indexed model (notes, messages...) is missing; each one's failure is its own."""
    return "; ".join(f"{indexed.label}s: {indexed.reconcile().summary()}" for indexed in indexed_models())


@shared_task(ignore_result=True)
def delete_old_reads() -> int:
    """The retrieval audit's retention: delete reads older than READ_AUDIT_DAYS."""
    return reads.delete_old_reads()


@shared_task(ignore_result=True)
def expire_old_proposals() -> int:
    """Review: proposals waiting longer than PROPOSAL_DAYS expire unkept (their words blanked)."""
    return expire_proposals()
