"""A Mnemo process runs numpy's BLAS on one thread unless told otherwise (config/__init__.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.fixtures import ROOT

# The threads of a process that has loaded the settings and numpy, and what it read.
SCRIPT = (
    "import os, django; django.setup(); import numpy as np; a = np.ones((300, 300), dtype=np.float32); a @ a;"
    "print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')))"
)


def threads(**extra: str) -> tuple[str, int]:
    env = {key: value for key, value in os.environ.items() if key != "OPENBLAS_NUM_THREADS"}
    env.update(DJANGO_SETTINGS_MODULE="config.settings", MNEMO_EMBEDDED_AUTOSTART="0", **extra)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True
    )
    setting, count = done.stdout.split()[-2:]
    return setting, int(count)


def test_blas_runs_on_one_thread_by_default_and_an_operator_can_say_otherwise():
    default_setting, default_threads = threads()
    chosen_setting, chosen_threads = threads(OPENBLAS_NUM_THREADS="2")
    assert default_setting == "1"
    assert chosen_setting == "2"
    # OpenBLAS starts its extra threads when numpy loads (at most one per core; this machine has two).
    assert chosen_threads == default_threads + 1
