"""gunicorn's server hooks, passed by `manage.py run` (config.management.commands.run.web_command).

Loaded by gunicorn's master process, which never loads Django: plain environment reads only.
"""

from __future__ import annotations

import os
from typing import Any


def child_exit(server: Any, worker: Any) -> None:
    # A worker that exited (restarted, killed) leaves its metric files behind: counters stay counted,
    # as they should, but the live gauges it wrote must go (prometheus_client's multiprocess mode).
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if path:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid, path)  # type: ignore[no-untyped-call]
