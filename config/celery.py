import os

from celery import Celery, Task, signals
from django.db import close_old_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("mnemo")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# The beat schedule lives here, in code. Each entry says in words when it runs.
app.conf.beat_schedule = {
    # Every minute: proves beat, the broker and a worker all work (shown by /healthz).
    "heartbeat": {"task": "config.tasks.record_heartbeat", "schedule": 60.0, "kwargs": {"name": "beat"}},
    # Every five minutes: remove notes whose writer-set expiry has passed.
    "expire-notes": {"task": "memory.tasks.expire_due_notes", "schedule": 300.0},
    # Every five minutes: embed notes and messages (every indexed model) whose vector is missing,
    # stale or of another model.
    "reconcile-index": {"task": "memory.tasks.reconcile_index", "schedule": 300.0},
    # Every hour: delete the retrieval audit's reads older than READ_AUDIT_DAYS.
    "delete-old-reads": {"task": "memory.tasks.delete_old_reads", "schedule": 3600.0},
    # Every minute: webhook deliveries whose task was lost (broker down, worker killed) are queued again.
    "webhook-deliveries": {"task": "webhooks.tasks.send_due_deliveries", "schedule": 60.0},
    # Every hour: proposals waiting longer than PROPOSAL_DAYS expire unkept.
    "expire-proposals": {"task": "memory.tasks.expire_old_proposals", "schedule": 3600.0},
    # Every minute: curation and consolidation that were due but never ran (broker was down).
    "curator-catch-up": {"task": "curator.tasks.catch_up", "schedule": 60.0},
    # Every minute: per-agent usage counted in Redis goes to Postgres (the operator's console).
    "flush-agent-usage": {"task": "accounts.tasks.flush_agent_usage", "schedule": 60.0},
}


@signals.task_prerun.connect
@signals.task_postrun.connect
def _release_database_connections(task: Task[..., object] | None = None, **_signal: object) -> None:
    """Before and after each task, what Django does before and after a request: a connection that
    failed or outlived its age goes (with the pool: back to the pool, which drops a broken one).
    Celery's fix-up no longer closes the pool at every task (CELERY_DB_REUSE_MAX in settings). A
    task run eagerly runs inside its caller's transaction, which is left alone."""
    if task is not None and getattr(task.request, "is_eager", False):
        return
    close_old_connections()
