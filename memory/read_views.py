"""The lens page "What agents looked up about you": the retrieval audit, for the people a login may see.

A person sees the reads about themselves; a team admin sees the reads about everyone in the team
(`memory.views.people_of` decides, as for the rest of the lens), filterable by agent and person.
Each entry links to the notes it returned that this login may open in the lens; the others are
counted, not named (gone since, or in a bank this login does not see).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.decorators import login_required
from django.core.paginator import Page, Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounts.models import Agent, Membership, Person
from memory.models import Note, Read
from memory.views import LensRequest, people_of, requested_id, requested_page

READS_PER_PAGE = 50


@dataclass
class ReadEntry:
    read: Read
    notes: list[Note] = field(default_factory=list)  # returned, and this login may open them, best first
    notes_not_shown: int = 0  # returned, but erased since or not this login's to see
    conversations: list[tuple[int, int]] = field(default_factory=list)  # (conversation, messages returned from it)


def _chosen[T: (Agent, Person)](options: list[T], chosen: int | None, what: str) -> T | None:
    if chosen is None:
        return None
    for option in options:
        if option.pk == chosen:
            return option
    raise Http404(f"No such {what} here.")


def _entries(request: LensRequest, page: Page[Read]) -> list[ReadEntry]:
    note_ids = {note_id for read in page for note_id in read.notes}
    visible = Note.objects.about_user(request.user).filter(pk__in=note_ids).select_related("bank").in_bulk()
    entries = []
    for read in page:
        entry = ReadEntry(read=read)
        for note_id in read.notes:
            if note_id in visible:
                entry.notes.append(visible[note_id])
            else:
                entry.notes_not_shown += 1
        counts: dict[int, int] = {}
        for conversation in read.conversations:
            counts[conversation] = counts.get(conversation, 0) + 1
        entry.conversations = list(counts.items())
        entries.append(entry)
    return entries


@require_GET
@login_required
def reads_page(request: LensRequest) -> HttpResponse:
    people = list(people_of(request).select_related("team").order_by("team__name", "external_id"))
    teams = {person.team_id for person in people}
    agents = list(Agent.objects.filter(team__in=teams).order_by("name", "pk"))
    agent = _chosen(agents, requested_id(request, "agent"), "agent")
    person = _chosen(people, requested_id(request, "person"), "person")
    reads = (
        Read.objects.filter(team__in=teams, person__in=people)
        .select_related("agent", "person", "person__team")
        .order_by("-created_at", "-id")
    )
    if agent is not None:
        reads = reads.filter(agent=agent)
    if person is not None:
        reads = reads.filter(person=person)
    page = requested_page(request, Paginator(reads, READS_PER_PAGE))
    is_admin = Membership.objects.filter(user=request.user, role=Membership.Role.ADMIN, team__in=teams).exists()
    context = {
        "entries": _entries(request, page),
        "page": page,
        "agents": agents,
        "agent": agent,
        "people": people,
        "person": person,
        "is_admin": is_admin,
    }
    return render(request, "memory/reads.html", context)
