from typing import Any

from celery import shared_task

from webhooks import services


# Retries are the delivery's own (services._decide sets the backoff and when to give up), so no limit here.
@shared_task(bind=True, ignore_result=True, max_retries=None)
def deliver(self: Any, delivery_id: int) -> str | None:
    """Make one attempt at a webhook delivery, and try again after the backoff it asks for."""
    attempt = services.deliver(delivery_id=delivery_id)
    if attempt is not None and attempt.retry_in is not None:
        raise self.retry(countdown=attempt.retry_in)
    return attempt.outcome if attempt is not None else None


@shared_task(ignore_result=True)
def send_due_deliveries() -> int:
    """Queue the pending deliveries whose task was lost (broker down, worker killed)."""
    return services.send_due()
