"""The lens's review: a person asks that what agents learn about them waits for their approval, and
keeps, edits and keeps, or declines each thing waiting (memory.services.proposals).

Who may do this is decided as for the rest of the lens (memory.views.people_of): the login's own
people, and everyone in a team it administers; any other person or proposal is a 404.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.models import Person
from config.exceptions import DomainError
from memory.forms import KeepProposalForm, ReviewWritesForm
from memory.models import Proposal
from memory.review import review_panel
from memory.services import keep_proposal, reject_proposal, set_review_writes
from memory.views import LensRequest, owner_actor, people_of

PANEL = "memory/_review.html#review-panel"


def _answer(request: LensRequest, person: Person, done: str, *, problem: tuple[int, str] | None = None) -> HttpResponse:
    if request.htmx:
        yours = person.user_id == request.user.pk
        context = {"review": review_panel(person, yours=yours, problem=problem), "announce": done}
        return render(request, PANEL, context, status=422 if problem else 200)
    if problem is not None:
        messages.error(request, problem[1])
    else:
        messages.success(request, done)
    return redirect("lens")


def _their_proposal(request: LensRequest, proposal_id: int) -> Proposal:
    return get_object_or_404(
        Proposal.objects.filter(person__in=people_of(request)).select_related("person", "team"), pk=proposal_id
    )


@require_POST
@login_required
def review_writes(request: LensRequest, person_id: int) -> HttpResponse:
    person = get_object_or_404(people_of(request), pk=person_id)
    form = ReviewWritesForm(request.POST)
    if not form.is_valid():
        raise Http404("No such choice here.")
    on = form.cleaned_data["review"] == "on"
    set_review_writes(person=person, review=on)
    if on:
        done = "From now on, what agents learn about you waits here until you keep it."
    else:
        done = "Agents keep what they learn about you again. What already waits here is still yours to decide."
    return _answer(request, person, done)


@require_POST
@login_required
def proposal_keep(request: LensRequest, proposal_id: int) -> HttpResponse:
    proposal = _their_proposal(request, proposal_id)
    form = KeepProposalForm(request.POST)
    if not form.is_valid():
        return _answer(
            request,
            proposal.person,
            "",
            problem=(proposal.pk, " ".join(str(error) for error in form.errors.get("content", []))),
        )
    try:
        keep_proposal(proposal=proposal, decider=owner_actor(request), content=form.cleaned_data["content"])
    except DomainError as exc:  # the bank is full, the text too long, the note gone: it still waits
        return _answer(request, proposal.person, "", problem=(proposal.pk, f"Not kept yet: {exc.message}"))
    edited = form.cleaned_data["content"] is not None
    return _answer(request, proposal.person, "Kept with your changes." if edited else "Kept.")


@require_POST
@login_required
def proposal_reject(request: LensRequest, proposal_id: int) -> HttpResponse:
    proposal = _their_proposal(request, proposal_id)
    try:
        reject_proposal(proposal=proposal, decider=owner_actor(request))
    except DomainError as exc:  # decided meanwhile, in another tab
        return _answer(request, proposal.person, "", problem=(proposal.pk, exc.message))
    return _answer(request, proposal.person, "Not kept. What it said is gone.")
