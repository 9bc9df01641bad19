from celery import shared_task

from memory.embedders import EmbeddingUnavailable
from memory.indexing import index_notes, reconcile
from memory.services import expire_notes


@shared_task(ignore_result=True)
def expire_due_notes() -> int:
    """Remove notes whose writer-set expires_at has passed (each removal logged with actor expiry)."""
    return expire_notes()


@shared_task(
    ignore_result=True,
    autoretry_for=(EmbeddingUnavailable,),
    retry_backoff=15,
    retry_backoff_max=600,
    retry_jitter=True,
    max_retries=8,
)
def embed_notes(note_ids: list[int]) -> int:
    """Embed notes after their write commits. Safe to run twice; deleted notes are skipped.

    After the last retry the reconciler picks the notes up on its next run.
    """
    return index_notes(note_ids)


@shared_task(ignore_result=True)
def reconcile_index() -> str:
    report = reconcile()
    return f"checked {report.checked}, indexed {report.indexed}, failed {report.failed} {report.error}".strip()
