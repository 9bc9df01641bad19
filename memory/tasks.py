from celery import shared_task

from memory.services import expire_notes


@shared_task(ignore_result=True)
def expire_due_notes() -> int:
    """Remove notes whose writer-set expires_at has passed (each removal logged with actor expiry)."""
    return expire_notes()
