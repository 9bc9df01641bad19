"""The Memory lens: a person sees, corrects, mutes and deletes what agents remember about them.

What a login may see is decided here, in the querysets (`about_user`): the banks of the people
linked to that login and nothing of another person or team (404, never 403, so ids reveal
nothing). What it may change is narrower (`changeable_by`): a shared bank's notes hold what
everyone in the scope said, so only a team admin edits or deletes them, or reads their earlier
versions; anyone else is refused with 403. Every change goes through the write path with the
owner as actor, so it lands in the revision log like any other write.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet, Window
from django.db.models.functions import RowNumber
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from accounts.models import Agent, Membership, Person
from config.exceptions import DomainError
from config.middleware import checks_form_encoding, form_encoding_problem
from memory.exceptions import NoteNotFound
from memory.forms import CategoryMuteForm, NoteEditForm
from memory.models import Bank, CategoryMute, Note, Revision
from memory.queries import Digest, build_digest
from memory.recall import Hit, recall_for_owner
from memory.services import Actor, edit_note, erase_note, mute_category, record_refused_call, unmute_category
from memory.text import word_diff

REMOVALS_SHOWN = 50  # refusals and evictions listed per person, newest first
SEARCH_RESULTS = 10


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


class LensRequest(HtmxHttpRequest):
    """A request to a lens view: every one is login_required, so there is a signed-in user."""

    user: User


def owner_actor(request: LensRequest) -> Actor:
    return Actor(Revision.Actor.OWNER, f"user:{request.user.get_username()}", getattr(request, "request_id", ""))


def people_of(request: LensRequest) -> QuerySet[Person]:
    """The people this login may open the lens of: their own, and everyone in teams they administer."""
    admin_of = Membership.objects.filter(user=request.user, role=Membership.Role.ADMIN).values("team")
    return Person.objects.filter(Q(user=request.user) | Q(team__in=admin_of))


# --- the lens ---------------------------------------------------------------------------------


@dataclass
class CategoryGroup:
    category: str
    notes: list[Note]
    muted_for: list[Agent]
    unmuted_agents: list[Agent]


@dataclass
class BankSummary:
    bank: Bank
    count: int
    categories: list[CategoryGroup]
    read_only: bool = False  # a shared bank, and this login is not an admin of its team


@dataclass
class PersonLens:
    person: Person
    agents: list[Agent]
    banks: list[BankSummary] = field(default_factory=list)
    removals: list[Revision] = field(default_factory=list)
    digests: list[tuple[Agent, Digest]] = field(default_factory=list)


# Narrowest first, as reads walk them.
BANK_KIND_ORDER: list[str] = [Bank.Kind.PRIVATE, Bank.Kind.SHARED, Bank.Kind.GLOBAL]


def _bank_order(bank: Bank) -> tuple[int, str]:
    return (BANK_KIND_ORDER.index(bank.kind), bank.address)


def build_lens(request: LensRequest) -> list[PersonLens]:
    """Every bank that holds memories about the signed-in login's people, grouped by category."""
    people = list(people_of(request).select_related("team").order_by("team__name", "external_id"))
    banks = sorted(Bank.objects.about_user(request.user), key=_bank_order)
    admin_of = set(
        Membership.objects.filter(user=request.user, role=Membership.Role.ADMIN).values_list("team_id", flat=True)
    )
    teams = {person.team_id for person in people}
    notes = Note.objects.filter(team__in=teams, bank__in=banks).order_by("category", "key")
    agents = list(Agent.objects.filter(team__in=teams).order_by("name"))
    mutes = (
        CategoryMute.objects.filter(team__in=teams, person__in=people).select_related("agent").order_by("agent__name")
    )
    removals = (
        Revision.objects.filter(
            team__in=teams, person__in=people, action__in=[Revision.Action.REFUSED, Revision.Action.EVICT]
        )
        # Every refused write is logged, so this grows without bound: read only the newest per person.
        .annotate(newest=Window(RowNumber(), partition_by="person", order_by=["-created_at", "-id"]))
        .filter(newest__lte=REMOVALS_SHOWN)
        .order_by("-created_at", "-id")
    )

    notes_by_bank: dict[int, list[Note]] = {}
    for note in notes:
        notes_by_bank.setdefault(note.bank_id, []).append(note)
    muted: dict[tuple[int, str], list[Agent]] = {}
    for mute in mutes:
        muted.setdefault((mute.person_id, mute.category), []).append(mute.agent)

    lenses = []
    for person in people:
        lens = PersonLens(person=person, agents=[agent for agent in agents if agent.team_id == person.team_id])
        scopes = {bank.scope for bank in banks if bank.person_id == person.pk and bank.kind == Bank.Kind.PRIVATE}
        for bank in banks:
            if bank.team_id != person.team_id:
                continue
            if bank.person_id != person.pk and not (bank.kind == Bank.Kind.SHARED and bank.scope in scopes):
                continue
            held = notes_by_bank.get(bank.pk, [])
            groups: dict[str, list[Note]] = {}
            for note in held:
                groups.setdefault(note.category, []).append(note)
            categories = []
            for category, grouped in groups.items():
                muted_for = muted.get((person.pk, category), [])
                unmuted = [agent for agent in lens.agents if agent not in muted_for]
                categories.append(CategoryGroup(category, grouped, muted_for, unmuted))
            read_only = bank.kind == Bank.Kind.SHARED and bank.team_id not in admin_of
            lens.banks.append(BankSummary(bank=bank, count=len(held), categories=categories, read_only=read_only))
        lenses.append(lens)

    by_person = {lens.person.pk: lens for lens in lenses}
    for revision in removals:
        assert revision.person_id is not None  # removals are read for these people only
        by_person[revision.person_id].removals.append(revision)
    for lens in lenses:
        # What each agent's turns start with (outside any scope): the person sees a mute take effect.
        lens.digests = [
            (agent, build_digest(team=lens.person.team, person=lens.person, agent=agent)) for agent in lens.agents
        ]
    return lenses


def search_lens(request: LensRequest, query: str) -> tuple[list[Hit], list[str]]:
    """The recall agents use, over everything about each of the login's people, best first."""
    hits: list[Hit] = []
    degraded: list[str] = []
    for person in people_of(request).select_related("team"):
        ranked = recall_for_owner(person=person, query=query, limit=SEARCH_RESULTS)
        hits.extend(ranked.hits)
        degraded.extend(layer for layer in ranked.degraded if layer not in degraded)
    hits.sort(key=lambda hit: -hit.score)
    return hits[:SEARCH_RESULTS], degraded


@require_GET
@login_required
def lens(request: LensRequest) -> HttpResponse:
    template = "memory/bank_list.html"
    query = request.GET.get("q", "").strip()
    hits, degraded = search_lens(request, query) if query else ([], [])
    context: dict[str, object] = {"q": query, "hits": hits, "degraded": degraded}
    # A history restore (Back after a search, htmx's cache missed) needs the whole page.
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, template + "#search-results", context)
    return render(request, template, {**context, "lenses": build_lens(request)})


def _change_mute(request: LensRequest, *, mute: bool) -> HttpResponse:
    form = CategoryMuteForm(request.POST, people=people_of(request))
    if not form.is_valid():
        # A person, agent or category that is not this login's: nothing to say about it.
        raise Http404("No such person, agent or category here.")
    person, agent, category = form.cleaned_data["person"], form.cleaned_data["agent"], form.cleaned_data["category"]
    try:
        if mute:
            mute_category(person=person, agent=agent, category=category)
        else:
            unmute_category(person=person, agent=agent, category=category)
    except DomainError as exc:  # a category with no letters or digits: the form was not ours
        return HttpResponseBadRequest(exc.message)
    if request.htmx:
        return render(request, "memory/bank_list.html#lens-banks", {"lenses": build_lens(request)})
    return redirect("lens")


@require_POST
@login_required
def category_mute(request: LensRequest) -> HttpResponse:
    return _change_mute(request, mute=True)


@require_POST
@login_required
def category_unmute(request: LensRequest) -> HttpResponse:
    return _change_mute(request, mute=False)


# --- one note ---------------------------------------------------------------------------------


@dataclass
class RevisionEntry:
    revision: Revision
    content_diff: list[tuple[str, str]]
    description_diff: list[tuple[str, str]]
    content_withheld: bool = False


READ_ONLY_SHARED = (
    "This note is in a shared bank: everyone in {scope} shares it, so only a team admin can change "
    "or delete it, or see its earlier versions."
)


def _snapshot_text(snapshot: dict[str, object] | None, name: str) -> str:
    value = (snapshot or {}).get(name)
    return value if isinstance(value, str) else ""


def revision_entries(note: Note, *, with_content: bool = True) -> list[RevisionEntry]:
    """The note's history, newest first. Without content (a shared note, for someone who may not
    change it) only the events remain: earlier versions hold other people's observations."""
    entries = []
    for revision in Revision.objects.filter(team_id=note.team_id, note_id=note.pk).order_by("-created_at", "-id"):
        if not with_content:
            entries.append(
                RevisionEntry(revision=revision, content_diff=[], description_diff=[], content_withheld=True)
            )
            continue
        before_description = _snapshot_text(revision.before, "description")
        after_description = _snapshot_text(revision.after, "description")
        entries.append(
            RevisionEntry(
                revision=revision,
                content_diff=word_diff(
                    _snapshot_text(revision.before, "content"), _snapshot_text(revision.after, "content")
                ),
                description_diff=(
                    word_diff(before_description, after_description) if before_description != after_description else []
                ),
            )
        )
    return entries


def _visible_note(request: LensRequest, note_id: int) -> Note:
    return get_object_or_404(Note.objects.about_user(request.user).select_related("bank", "bank__person"), pk=note_id)


def _may_change(request: LensRequest, note: Note) -> bool:
    return Note.objects.changeable_by(request.user).filter(pk=note.pk).exists()


def _note_to_change(request: LensRequest, note_id: int) -> Note:
    """A note this login may edit or delete: 404 if it may not even see it, 403 if it may only read it."""
    note = _visible_note(request, note_id)
    if not _may_change(request, note):
        raise PermissionDenied(READ_ONLY_SHARED.format(scope=note.bank.scope))
    return note


def _edit_form(note: Note) -> NoteEditForm:
    return NoteEditForm(initial={"description": note.description, "content": note.content})


@require_GET
@login_required
def note_detail(request: LensRequest, note_id: int) -> HttpResponse:
    note = _visible_note(request, note_id)
    if _may_change(request, note):
        context = {"note": note, "form": _edit_form(note), "revisions": revision_entries(note)}
    else:
        context = {
            "note": note,
            "read_only": READ_ONLY_SHARED.format(scope=note.bank.scope),
            "revisions": revision_entries(note, with_content=False),
        }
    return render(request, "memory/note_detail.html", context)


@require_POST
@login_required
@checks_form_encoding
def note_edit(request: LensRequest, note_id: int) -> HttpResponse:
    """Replace a note's description and content. A refusal (over a cap, say) is shown in the form
    with what was typed kept; the note is unchanged and the refusal is in the revision log, like a
    form that does not parse (a field missing, or not UTF-8)."""
    note = _note_to_change(request, note_id)
    if (problem := form_encoding_problem(request)) is not None:
        field, message, as_sent = problem
        record_refused_call(
            team=note.team, actor=owner_actor(request), operation="edit", arguments={field: as_sent},
            message=f"{field} {message}", field=field, note=note,
        )  # fmt: skip
        return HttpResponseBadRequest(f"{field} {message}", content_type="text/plain; charset=utf-8")
    form = NoteEditForm(request.POST)
    if not form.is_valid():
        field, errors = next(iter(form.errors.items()))
        record_refused_call(
            team=note.team, actor=owner_actor(request), operation="edit",
            arguments={name: request.POST.get(name) for name in form.fields}, message=" ".join(map(str, errors)),
            field=field if field in form.fields else None, note=note,
        )  # fmt: skip
    else:
        try:
            result = edit_note(
                note=note,
                actor=owner_actor(request),
                mode="replace",
                content=form.cleaned_data["content"],
                description=form.cleaned_data["description"],
            )
        except DomainError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            assert result.note is not None
            if not request.htmx:
                return redirect("lens-note", note_id=note.pk)
            note = result.note
            context = {"note": note, "form": _edit_form(note), "saved": result.action == "updated"}
            card = render_to_string("memory/note_detail.html#note-card", context, request=request)
            # The history gained a row: send it along, swapped out of band.
            history = render_to_string(
                "memory/note_detail.html#revision-list",
                {"revisions": revision_entries(note), "swap_oob": True},
                request=request,
            )
            return HttpResponse(card + history)
    context = {"note": note, "form": form, "editing": True}
    if request.htmx:
        return render(request, "memory/note_detail.html#note-card", context, status=422)
    return render(request, "memory/note_detail.html", {**context, "revisions": revision_entries(note)}, status=422)


@require_http_methods(["GET", "POST"])
@login_required
def note_delete(request: LensRequest, note_id: int) -> HttpResponse:
    """GET asks for confirmation; POST erases the note through the write path: the note, its vector
    and the content of its revisions go; the log keeps who did what, and when."""
    note = _note_to_change(request, note_id)
    if request.method == "GET":
        return render(request, "memory/note_confirm_delete.html", {"note": note})
    try:
        erase_note(note=note, actor=owner_actor(request))
    except NoteNotFound as exc:  # deleted meanwhile, by another tab or an agent
        raise Http404(exc.message) from exc
    messages.success(request, f"Deleted {note.identity}. The log keeps that it was deleted, not what it said.")
    if request.htmx:
        return HttpResponseClientRedirect(reverse("lens"))
    return redirect("lens")
