from celery import shared_task

from conversations.indexing import index_messages, reconcile
from memory.embedders import EmbeddingUnavailable


@shared_task(
    ignore_result=True,
    autoretry_for=(EmbeddingUnavailable,),
    retry_backoff=15,
    retry_backoff_max=600,
    retry_jitter=True,
    max_retries=8,
)
def embed_messages(message_ids: list[int]) -> int:
    """Embed messages after their write commits. Safe to run twice; deleted messages are skipped.

    After the last retry the reconciler picks the messages up on its next run.
    """
    return index_messages(message_ids)


@shared_task(ignore_result=True)
def reconcile_message_index() -> str:
    report = reconcile()
    return f"checked {report.checked}, indexed {report.indexed}, failed {report.failed} {report.error}".strip()
