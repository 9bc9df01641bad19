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
