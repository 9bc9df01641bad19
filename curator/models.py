from django.db import models

from accounts.models import Team


class ProviderCall(models.Model):
    """One call to an LLM provider: what it cost and how it ended (for the lens and the benchmark)."""

    class Purpose(models.TextChoices):
        CURATE = "curate", "Curation"
        CONSOLIDATE = "consolidate", "Consolidation"

    class Outcome(models.TextChoices):
        OK = "ok", "OK"
        FAILED = "failed", "Failed"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    purpose = models.CharField(max_length=16, choices=Purpose.choices)
    provider = models.CharField(max_length=50)
    model = models.CharField(max_length=200, blank=True)
    conversation_id = models.BigIntegerField(null=True, blank=True)
    bank_id = models.BigIntegerField(null=True, blank=True)
    chars_in = models.PositiveIntegerField(default=0)
    chars_out = models.PositiveIntegerField(default=0)
    tokens_in = models.PositiveIntegerField(null=True, blank=True)
    tokens_out = models.PositiveIntegerField(null=True, blank=True)
    duration_ms = models.FloatField(default=0)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    error = models.CharField(max_length=500, blank=True)
    task_id = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["team", "-created_at"], name="providercall_team_recent")]

    def __str__(self) -> str:
        return f"{self.purpose} via {self.provider}: {self.outcome}"
