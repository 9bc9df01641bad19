"""Run as a separate process by the concurrency test: one upsert of a shared key, on a signal.

Arguments: team id, person id, this child's index, and a barrier directory. The child says it is
ready (a file `ready-<index>`), then waits for the file `go`, so all six upsert at once however
long each took to start.
"""

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from accounts.models import Person, Team  # noqa: E402
from memory.services import Actor, remember  # noqa: E402
from tests.support.fixtures import WORKER_DEADLINE  # noqa: E402

team_id, person_id, index, barrier = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
team = Team.objects.get(pk=team_id)
person = Person.objects.get(pk=person_id)
(barrier / f"ready-{index}").touch()
deadline = time.monotonic() + WORKER_DEADLINE
while not (barrier / "go").exists():
    if time.monotonic() > deadline:
        sys.exit(f"child {index}: no go signal within {WORKER_DEADLINE:.0f}s")
    time.sleep(0.001)
remember(
    team=team,
    person=person,
    actor=Actor("agent", f"proc-{index}"),
    key="favourite-colour",
    description="Favourite colour",
    content=f"Colour number {index}.",
)
