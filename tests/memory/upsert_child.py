"""Run as a separate process by the concurrency test: one upsert of a shared key at a given instant."""

import os
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from accounts.models import Person, Team  # noqa: E402
from memory.services import Actor, remember  # noqa: E402

team_id, person_id, index, start_at = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
team = Team.objects.get(pk=team_id)
person = Person.objects.get(pk=person_id)
while time.time() < start_at:
    time.sleep(0.001)
remember(
    team=team,
    person=person,
    actor=Actor("agent", f"proc-{index}"),
    key="favourite-colour",
    description="Favourite colour",
    content=f"Colour number {index}.",
)
