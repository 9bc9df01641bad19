from celery import shared_task

from curator import services
from curator.providers import ProviderError


@shared_task(
    bind=True, ignore_result=True, acks_late=True, autoretry_for=(ProviderError,),
    retry_backoff=30, retry_backoff_max=1800, retry_jitter=True, max_retries=6,
)  # fmt: skip
def curate_conversation(self, conversation_id: int) -> str:
    return services.curate_conversation(conversation_id=conversation_id, task_id=self.request.id or "")


@shared_task(
    bind=True, ignore_result=True, acks_late=True, autoretry_for=(ProviderError,),
    retry_backoff=30, retry_backoff_max=1800, retry_jitter=True, max_retries=6,
)  # fmt: skip
def consolidate_bank(self, bank_pk: int) -> str:
    return services.consolidate_bank(bank_pk=bank_pk, task_id=self.request.id or "")


@shared_task(ignore_result=True)
def catch_up() -> str:
    """Enqueue curation and consolidation jobs that were due but never ran (broker down, worker lost)."""
    from django.utils import timezone

    from conversations.models import Conversation
    from memory.models import Bank

    conversations, banks = services.stale_jobs()
    now = timezone.now()
    for conversation_id in conversations:
        Conversation.objects.filter(pk=conversation_id).update(curation_pending=True, curation_requested_at=now)
        curate_conversation.delay(conversation_id)
    for bank_pk in banks:
        Bank.objects.filter(pk=bank_pk).update(consolidation_requested_at=now)
        consolidate_bank.delay(bank_pk)
    return f"re-enqueued {len(conversations)} curation(s) and {len(banks)} consolidation(s)"
