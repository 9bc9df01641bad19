"""The Memory lens as of a date: the front page's notes as they stood then, and one note then.

Both read the revision log through memory.as_of, so an erased note is absent and a note deleted
since is shown with what it said. Earlier versions of a shared bank's notes hold what everyone in
the scope said, and are a team admin's to read (memory.views.READ_ONLY_SHARED): for anyone else,
shared banks are left out of these pages, as their notes' histories are left out of the note page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.decorators import login_required
from django.db.models import Q, QuerySet
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from accounts.models import Membership, Person
from config.text import InvalidText, query_as_of
from memory import as_of, plain
from memory.models import Bank, Note
from memory.views import BANK_KIND_ORDER, LensRequest, people_of


def _requested_moment(request: LensRequest) -> tuple[datetime | None, str]:
    """The moment ?as_of= asks about (config.text.parse_as_of), or why it cannot be read."""
    try:
        return query_as_of(request.GET), ""
    except InvalidText as exc:
        return None, exc.message


def _past_banks(request: LensRequest) -> QuerySet[Bank]:
    """The banks whose earlier versions this login may read: its people's, and a shared bank only
    for an admin of its team."""
    admin_of = Membership.objects.filter(user=request.user, role=Membership.Role.ADMIN).values("team")
    return Bank.objects.about_user(request.user).filter(~Q(kind=Bank.Kind.SHARED) | Q(team__in=admin_of))


@dataclass
class BankThen:
    bank: Bank
    title: str
    notes: list[Note]


@dataclass
class PersonThen:
    person: Person
    yours: bool
    banks: list[BankThen] = field(default_factory=list)


def _people_then(request: LensRequest, moment: datetime) -> list[PersonThen]:
    banks = sorted(
        _past_banks(request).select_related("person"),
        key=lambda bank: (BANK_KIND_ORDER.index(bank.kind), bank.address),
    )
    notes: dict[int, list[Note]] = {}
    for note in sorted(as_of.notes_as_of(moment=moment, banks=banks), key=lambda note: (note.category, note.key)):
        notes.setdefault(note.bank_id, []).append(note)
    out = []
    for person in people_of(request).select_related("team").order_by("team__name", "external_id"):
        yours = person.user_id == request.user.pk
        then = PersonThen(person=person, yours=yours)
        scopes = {bank.scope for bank in banks if bank.person_id == person.pk and bank.kind == Bank.Kind.PRIVATE}
        for bank in banks:
            mine = bank.person_id == person.pk or (
                bank.kind == Bank.Kind.SHARED and bank.team_id == person.team_id and bank.scope in scopes
            )
            if mine and notes.get(bank.pk):
                title = plain.bank_title(bank, yours=yours, name=str(person))
                then.banks.append(BankThen(bank=bank, title=title, notes=notes[bank.pk]))
        if yours or then.banks:
            out.append(then)
    return out


@require_GET
@login_required
def lens_as_of(request: LensRequest) -> HttpResponse:
    """GET /lens/as-of/?as_of=2026-11-30: what agents remembered about the login's people then."""
    moment, error = _requested_moment(request)
    context = {
        "as_of": request.GET.get("as_of", ""),
        "moment": moment,
        "error": error,
        "today": timezone.now().date().isoformat(),
        "people": _people_then(request, moment) if moment is not None else [],
    }
    return render(request, "memory/lens_as_of.html", context, status=400 if error else 200)


@require_GET
@login_required
def note_as_of(request: LensRequest, note_id: int) -> HttpResponse:
    """GET /m/<id>/as-of?as_of=2026-11-30: one note as it stood then, or that it did not exist yet or
    was deleted by then. The note may be gone now: the log still knows it (unless it was erased)."""
    moment, error = _requested_moment(request)
    then = as_of.note_as_of(note_id=note_id, moment=moment or timezone.now(), banks=_past_banks(request))
    if then is None:
        raise Http404("No such note here.")
    person = then.bank.person
    where = plain.bank_title(
        then.bank,
        yours=person is not None and person.user_id == request.user.pk,
        name=str(person) if person is not None else "",
    )
    context = {
        "note_id": note_id,
        "then": then if moment is not None else None,
        "moment": moment,
        "as_of": request.GET.get("as_of", ""),
        "error": error,
        "where": where,
        "exists_now": Note.objects.filter(team_id=then.bank.team_id, pk=note_id).exists(),
        "today": timezone.now().date().isoformat(),
    }
    template = "memory/note_as_of.html"
    if request.htmx:
        # 422 carries the form's message and is swapped in (base.html's htmx config); a 400 would not be.
        return render(request, template + "#note-as-of", context, status=422 if error else 200)
    return render(request, template, context, status=400 if error else 200)
