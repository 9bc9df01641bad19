import pytest
from django.db import connection

from config.models import Heartbeat
from config.tasks import record_heartbeat
from memory.models import Bank
from tests.support.fixtures import WorkerProcess, run_celery_worker, wait_until


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_a_task_against_the_test_database(celery_worker_process):
    assert not Heartbeat.objects.filter(name="from-test").exists()
    record_heartbeat.delay(name="from-test")
    wait_until(Heartbeat.objects.filter(name="from-test").exists, worker=celery_worker_process, what="the task")
    assert Heartbeat.objects.get(name="from-test").hostname


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_crossing_the_soft_limit_runs_consolidation_on_a_real_worker(celery_worker_process, tenant, settings):
    """The write path enqueues consolidation on commit; a real worker runs it against the test DB."""
    settings.MEMORY_SOFT_LIMIT = 2
    settings.MEMORY_HARD_LIMIT = 10
    for i in range(3):
        response = tenant.client.post(
            "/api/v1/tools/remember",
            {"person": "ada", "key": f"fact-{i}", "description": f"Fact {i}", "content": f"Distinct fact {i}."},
            format="json",
        )
        assert response.status_code == 200
    consolidated = Bank.objects.filter(team=tenant.team, address="user:ada", last_consolidation_at__isnull=False)
    wait_until(consolidated.exists, worker=celery_worker_process, what="consolidation")
    bank = Bank.objects.get(team=tenant.team, address="user:ada")
    assert bank.is_full is True
    assert bank.consolidation_pending is False
    assert "latched FULL" in bank.last_consolidation_outcome


def _run_heartbeat(worker: WorkerProcess, label: str) -> None:
    """Queue a task and wait until the worker logs that it succeeded: by then its clean-up
    (task_postrun, which gives the task's connection back) has run too."""
    sent = record_heartbeat.delay(name=label)
    wait_until(lambda: f"[{sent.id}] succeeded" in worker.log_text(), worker=worker.process, what=f"the task {label}")


def _backends_of(worker: WorkerProcess) -> set[int]:
    """The Postgres backends the worker's processes hold (their sessions carry the application_name
    the worker's settings gave them)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", [f"mnemo-{worker.process.pid}"])
        return {pid for (pid,) in cursor.fetchall()}


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_keeps_its_database_connection_from_one_task_to_the_next():
    """Celery's Django fix-up closed a worker's connection pool after every task, so each task
    opened a new Postgres backend; the worker keeps its pooled connection instead."""
    with run_celery_worker() as worker:
        _run_heartbeat(worker, "first")
        first = _backends_of(worker)
        assert first, "the worker held no database connection after its task"
        _run_heartbeat(worker, "second")
        later = _backends_of(worker)
        _run_heartbeat(worker, "third")
        later |= _backends_of(worker)
        assert first & later, f"the worker's backends changed from task to task: {first} then {later}"


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_whose_connection_was_cut_between_tasks_runs_the_next_task():
    """A connection kept from one task to the next can die meanwhile (Postgres restarted, a proxy's
    idle timeout): the next task still runs, on a new one."""
    with run_celery_worker() as worker:
        _run_heartbeat(worker, "before")
        held = _backends_of(worker)
        assert held, "the worker held no database connection after its task"
        with connection.cursor() as cursor:
            cursor.execute("SELECT bool_and(pg_terminate_backend(pid)) FROM unnest(%s::int[]) AS pid", [list(held)])
            assert cursor.fetchone()[0]
        _run_heartbeat(worker, "after")
        assert Heartbeat.objects.filter(name="after").exists()
