from collections.abc import Callable

from celery import Task, shared_task

from config import metrics
from curator import services
from curator.providers import ProviderError

# How a pass that did nothing says so (the services' results): nothing new, another pass was first, or erased meanwhile.
_NOTHING_DONE = ("skipped", "discarded", "read nothing")


def _counted(job: str, run: Callable[[], str]) -> str:
    """Run one curator job and count it in mnemo_curator_runs_total by how it ended."""
    try:
        result = run()
    except ProviderError:  # retried with backoff: each failed attempt counts
        metrics.count_curator_run(job=job, outcome="failed")
        raise
    except Exception:
        metrics.count_curator_run(job=job, outcome="error")
        raise
    metrics.count_curator_run(job=job, outcome="skipped" if result.startswith(_NOTHING_DONE) else "applied")
    return result


@shared_task(
    bind=True, ignore_result=True, acks_late=True, autoretry_for=(ProviderError,),
    retry_backoff=30, retry_backoff_max=1800, retry_jitter=True, max_retries=6,
)  # fmt: skip
def curate_conversation(self: Task[[int], str], conversation_id: int) -> str:
    return _counted(
        "curate", lambda: services.curate_conversation(conversation_id=conversation_id, task_id=self.request.id or "")
    )


@shared_task(
    bind=True, ignore_result=True, acks_late=True, autoretry_for=(ProviderError,),
    retry_backoff=30, retry_backoff_max=1800, retry_jitter=True, max_retries=6,
)  # fmt: skip
def consolidate_bank(self: Task[[int], str], bank_id: int) -> str:
    return _counted("consolidate", lambda: services.consolidate_bank(bank_id=bank_id, task_id=self.request.id or ""))


@shared_task(
    bind=True, ignore_result=True, acks_late=True, autoretry_for=(ProviderError,),
    retry_backoff=30, retry_backoff_max=1800, retry_jitter=True, max_retries=6,
)  # fmt: skip
def rebuild_summary(self: Task[[int], str], conversation_id: int) -> str:
    return _counted(
        "summary", lambda: services.rebuild_summary(conversation_id=conversation_id, task_id=self.request.id or "")
    )


@shared_task(ignore_result=True)
def catch_up() -> str:
    """Enqueue curation and consolidation jobs that were due but never ran (broker down, worker lost)."""
    conversations, banks = services.claim_stale_jobs()
    for conversation_id in conversations:
        curate_conversation.delay(conversation_id)
    for bank_id in banks:
        consolidate_bank.delay(bank_id)
    summaries = services.claim_stale_summaries()
    for conversation_id in summaries:
        rebuild_summary.delay(conversation_id)
    return (
        f"re-enqueued {len(conversations)} curation(s), {len(banks)} consolidation(s) "
        f"and {len(summaries)} summary rebuild(s)"
    )
