from celery import shared_task

from conversations.indexing import MESSAGES
from memory.indexing import drain, embedding_task


@embedding_task
def embed_messages(message_ids: list[int]) -> int:
    """Embed messages after their write commits, then whatever other messages were queued
    meanwhile (memory.indexing.drain). Safe to run twice; deleted messages are skipped."""
    return MESSAGES.index(message_ids) + drain(MESSAGES)


@shared_task(ignore_result=True)
def reconcile_message_index() -> str:
    """Kept for one release, for runs queued under this name: memory.tasks.reconcile_index now
    reconciles every indexed model, messages included."""
    return MESSAGES.reconcile().summary()
