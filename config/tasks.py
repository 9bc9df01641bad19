from celery import shared_task

from config import services


@shared_task(ignore_result=True)
def record_heartbeat(name: str = "beat") -> None:
    """Beat schedules this; the row it writes shows that beat, the broker and a worker all work."""
    services.record_heartbeat(name=name)
