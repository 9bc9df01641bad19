import pytest

from config.models import Heartbeat
from config.tasks import record_heartbeat
from memory.models import Bank
from tests.fixtures import wait_until


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
