import os

from celery import Celery

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
    # Every minute: curation and consolidation that were due but never ran (broker was down).
    "curator-catch-up": {"task": "curator.tasks.catch_up", "schedule": 60.0},
}
