import socket

from celery import shared_task
from django.utils import timezone

from config.models import Heartbeat


@shared_task(ignore_result=True)
def record_heartbeat(name: str = "beat") -> None:
    """Beat schedules this; the row it writes shows that beat, the broker and a worker all work."""
    Heartbeat.objects.update_or_create(
        name=name, defaults={"seen_at": timezone.now(), "hostname": socket.gethostname()}
    )
