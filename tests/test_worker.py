import pytest

from config.models import Heartbeat
from config.tasks import record_heartbeat


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_a_task_against_the_test_database(celery_worker_process):
    assert not Heartbeat.objects.filter(name="from-test").exists()
    record_heartbeat.delay(name="from-test")
    import time

    deadline = time.monotonic() + 30
    while not Heartbeat.objects.filter(name="from-test").exists():
        assert celery_worker_process.poll() is None, "the worker died"
        assert time.monotonic() < deadline, "the worker did not run the task within 30s"
        time.sleep(0.1)
    assert Heartbeat.objects.get(name="from-test").hostname


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_crossing_the_soft_limit_runs_consolidation_on_a_real_worker(celery_worker_process, tenant, settings):
    """The write path enqueues consolidation on commit; a real worker runs it against the test DB."""
    import time

    from memory.models import Bank

    settings.MEMORY_SOFT_LIMIT = 2
    settings.MEMORY_HARD_LIMIT = 10
    for i in range(3):
        response = tenant.client.post(
            "/api/v1/tools/remember",
            {"person": "ada", "key": f"fact-{i}", "description": f"Fact {i}", "content": f"Distinct fact {i}."},
            format="json",
        )
        assert response.status_code == 200
    deadline = time.monotonic() + 30
    while True:
        bank = Bank.objects.get(bank_id="user:ada")
        if bank.last_consolidation_at is not None:
            break
        assert celery_worker_process.poll() is None, "the worker died"
        assert time.monotonic() < deadline, "consolidation did not run within 30s"
        time.sleep(0.1)
    assert bank.full is True
    assert bank.consolidation_pending is False
    assert "latched FULL" in bank.last_consolidation_outcome
