import time

import pytest
from django.db import connection

from config.models import Heartbeat
from config.tasks import record_heartbeat
from memory.models import Bank
from tests.fixtures import run_celery_worker, wait_until


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


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_keeps_its_database_connection_from_one_task_to_the_next():
    """Celery's Django fix-up closed a worker's connection pool after every task, so each task
    opened a new Postgres backend; the worker keeps its pooled connection instead."""
    with run_celery_worker() as worker:
        name = f"mnemo-{worker.process.pid}"  # the application_name the worker's sessions carry

        def run(label: str) -> set[int]:
            record_heartbeat.delay(name=label)
            wait_until(Heartbeat.objects.filter(name=label).exists, worker=worker.process, what=f"the task {label}")
            time.sleep(0.5)  # the task's clean-up (task_postrun) runs just after its commit
            with connection.cursor() as cursor:
                cursor.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", [name])
                return {pid for (pid,) in cursor.fetchall()}

        first = run("first")
        assert first, "the worker held no database connection after its task"
        later = run("second") | run("third")
        assert first & later, f"the worker's backends changed from task to task: {first} then {later}"


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_whose_connection_was_cut_between_tasks_runs_the_next_task():
    """A connection kept from one task to the next can die meanwhile (Postgres restarted, a proxy's
    idle timeout): the next task still runs, on a new one."""
    with run_celery_worker() as worker:
        name = f"mnemo-{worker.process.pid}"
        record_heartbeat.delay(name="before")
        wait_until(Heartbeat.objects.filter(name="before").exists, worker=worker.process, what="the first task")
        time.sleep(0.5)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = %s",
                [name],
            )
            assert cursor.fetchone()[0] >= 1
        record_heartbeat.delay(name="after")
        wait_until(Heartbeat.objects.filter(name="after").exists, worker=worker.process, what="the task after the cut")
