import socket

from django.utils import timezone

from config.models import Heartbeat


def record_heartbeat(*, name: str) -> Heartbeat:
    heartbeat, _ = Heartbeat.objects.update_or_create(
        name=name, defaults={"seen_at": timezone.now(), "hostname": socket.gethostname()}
    )
    return heartbeat
