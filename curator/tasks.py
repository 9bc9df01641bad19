from celery import shared_task

from curator.services import consolidate_bank as run_consolidation


@shared_task(bind=True, ignore_result=True, acks_late=True)
def consolidate_bank(self, bank_pk: int) -> str:
    return run_consolidation(bank_pk=bank_pk, task_id=self.request.id or "")
