from django.db import models


class Heartbeat(models.Model):
    """The last time a background component proved it was alive (beat writes one through a worker)."""

    name = models.CharField(max_length=100, unique=True)
    seen_at = models.DateTimeField()
    hostname = models.CharField(max_length=255, blank=True)

    def __str__(self) -> str:
        return f"{self.name} at {self.seen_at:%Y-%m-%d %H:%M:%S}"
