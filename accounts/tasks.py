from celery import shared_task

from accounts.usage import flush_usage


@shared_task(ignore_result=True)
def flush_agent_usage() -> None:
    """Beat schedules this: the counters requests added in Redis go to AgentUsage."""
    flush_usage()
