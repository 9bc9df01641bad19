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
from django.core.exceptions import BadRequest, PermissionDenied
from django.core.paginator import Page, Paginator
from django.db.models import Exists, OuterRef, Q, QuerySet, Window
from django.db.models.functions import RowNumber
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from accounts.models import Agent, Membership, Person
from config.exceptions import DomainError
from config.middleware import checks_form_encoding, form_encoding_problem
from config.text import InvalidText, query_id
from memory import plain
from memory.exceptions import NoteNotFound
from memory.forms import CategoryMuteForm, ErasePersonForm, NoteEditForm
from memory.models import Bank, Mute, Note, Revision
from memory.provenance import origins_of, source_count
from memory.queries import Digest, build_digest
from memory.recall import Hit, recall_for_owner
from memory.review import ReviewPanel, review_panel
from memory.services import (
    Actor,
    edit_note,
    erase_note,
    erase_person,
    mute_category,
    mute_for_agents,
    record_refused_call,
    unmute_category,
    unmute_note,
)
from memory.text import word_diff

REMOVALS_SHOWN = 50  # removals and refusals listed per person, newest first
TEAM_PEOPLE_PER_PAGE = 20  # a team admin's lens lists the team's people a page at a time
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


def requested_id(request: HttpRequest, name: str, *, noun: str = "an id") -> int | None:
    """An id (or a page number) from the lens's query string, read as the API reads one
    (config.text.query_id): a malformed one answers a 400 page (config.urls.handler400), never a 500."""
    try:
        return query_id(request.GET, name, noun=noun)
    except InvalidText as exc:
        raise BadRequest(exc.message) from None


def requested_page[T](request: HttpRequest, paginator: Paginator[T]) -> Page[T]:
    """The page ?page= asks for (the first when absent, the last past the end); a malformed number is a 400."""
    return paginator.get_page(requested_id(request, "page", noun="a page number") or 1)


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
    title: str
    read_only: bool = False  # a shared bank, and this login is not an admin of its team

    @property
    def count_words(self) -> str:
        return plain.count_words(self.count, self.bank)

    @property
    def limit_words(self) -> str:
        return plain.limit_words(self.bank)

    @property
    def scope_words(self) -> str:
        return plain.scope_words(self.bank.scope)


@dataclass
class LogEntry:
    """A removal or a refusal as a person reads it; the revision keeps the engine's words for admins."""

    revision: Revision
    sentence: str


@dataclass
class PersonLens:
    person: Person
    agents: list[Agent]
    yours: bool  # the signed-in login's own person, rather than someone in a team it administers
    admin: bool  # the login administers this person's team: the engine's terms are shown too
    banks: list[BankSummary] = field(default_factory=list)
    removed: list[LogEntry] = field(default_factory=list)
    refused: list[LogEntry] = field(default_factory=list)
    digests: list[tuple[Agent, Digest]] = field(default_factory=list)
    review: ReviewPanel | None = None  # the review toggle and what waits for the person's approval

    @property
    def note_count(self) -> int:
        return sum(summary.count for summary in self.banks if summary.bank.person_id == self.person.pk)


@dataclass
class TeamPeople:
    """The other people of a team the login administers, each with something remembered."""

    team_name: str
    lenses: list[PersonLens]


# Narrowest first, as reads walk them.
BANK_KIND_ORDER: list[str] = [Bank.Kind.PRIVATE, Bank.Kind.SHARED, Bank.Kind.GLOBAL]


def _bank_order(bank: Bank) -> tuple[int, str]:
    return (BANK_KIND_ORDER.index(bank.kind), bank.address)


def team_people_of(request: LensRequest) -> QuerySet[Person]:
    """The people of the teams this login administers, other than its own, that agents remember something about."""
    admin_of = Membership.objects.filter(user=request.user, role=Membership.Role.ADMIN).values("team")
    remembered = Note.objects.filter(bank__person=OuterRef("pk"))
    return (
        Person.objects.filter(team__in=admin_of)
        .exclude(user=request.user)
        .filter(Exists(remembered))
        .select_related("team")
        .order_by("team__name", "external_id", "pk")
    )


def build_lens(request: LensRequest, people: list[Person]) -> list[PersonLens]:
    """Every bank that holds memories about these people (the login's own, and one page of its
    team's), grouped by category."""
    banks = sorted(
        Bank.objects.about_user(request.user).filter(Q(person__in=people) | Q(kind=Bank.Kind.SHARED)),
        key=_bank_order,
    )
    admin_of = set(
        Membership.objects.filter(user=request.user, role=Membership.Role.ADMIN).values_list("team_id", flat=True)
    )
    teams = {person.team_id for person in people}
    notes = Note.objects.filter(team__in=teams, bank__in=banks).order_by("category", "key")
    agents = list(Agent.objects.filter(team__in=teams).order_by("name"))
    mutes = Mute.objects.filter(team__in=teams, person__in=people).select_related("agent").order_by("agent__name")
    removals = (
        Revision.objects.filter(team__in=teams, person__in=people)
        .filter(
            Q(action__in=[Revision.Action.REFUSED, Revision.Action.EVICT, Revision.Action.DELETE])
            # A merge logs twice: the note that stays (with what it became) and each note merged away.
            | Q(action=Revision.Action.MERGE, after__isnull=True)
        )
        # An erased delete stays, saying only that a note was erased; other erased events have
        # nothing left to show, and a person erased whole leaves no list at all.
        .exclude(Q(erased=True) & ~Q(action=Revision.Action.DELETE))
        .exclude(person__erased_at__isnull=False)
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
        if mute.note_id is None:  # a note's own mute is shown on its page
            muted.setdefault((mute.person_id, mute.category), []).append(mute.agent)

    lenses = []
    for person in people:
        lens = PersonLens(
            person=person,
            agents=[agent for agent in agents if agent.team_id == person.team_id],
            yours=person.user_id == request.user.pk,
            admin=person.team_id in admin_of,
        )
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
            title = plain.bank_title(bank, yours=lens.yours, name=str(person))
            lens.banks.append(
                BankSummary(bank=bank, count=len(held), categories=categories, title=title, read_only=read_only)
            )
        lenses.append(lens)

    by_person = {lens.person.pk: lens for lens in lenses}
    viewer = request.user.get_username()
    for revision in removals:
        assert revision.person_id is not None  # removals are read for these people only
        lens = by_person[revision.person_id]
        names = {agent.slug: agent.name for agent in lens.agents}
        if revision.action == Revision.Action.REFUSED:
            sentence = plain.refusal_sentence(revision, viewer=viewer, agent_names=names)
            lens.refused.append(LogEntry(revision, sentence))
        else:
            lens.removed.append(LogEntry(revision, plain.removal_sentence(revision, viewer=viewer, agent_names=names)))
    for lens in lenses:
        # What each agent's turns start with (outside any scope): the person sees a mute take effect.
        lens.digests = [
            (agent, build_digest(team=lens.person.team, person=lens.person, agent=agent)) for agent in lens.agents
        ]
        lens.review = review_panel(lens.person, yours=lens.yours)
    return lenses


@dataclass
class LensHit:
    note: Note
    where: str  # the bank, in plain words; the score orders the hits and is not shown


def search_lens(request: LensRequest, query: str) -> tuple[list[LensHit], list[str]]:
    """The recall agents use, over everything about each of the login's people, best first."""
    hits: list[tuple[Hit, Person]] = []
    degraded: list[str] = []
    for person in people_of(request).select_related("team"):
        ranked = recall_for_owner(person=person, query=query, limit=SEARCH_RESULTS)
        hits.extend((hit, person) for hit in ranked.hits)
        degraded.extend(layer for layer in ranked.degraded if layer not in degraded)
    hits.sort(key=lambda pair: -pair[0].score)
    return [
        LensHit(hit.note, plain.bank_title(hit.note.bank, yours=person.user_id == request.user.pk, name=str(person)))
        for hit, person in hits[:SEARCH_RESULTS]
    ], degraded


def lens_context(request: LensRequest) -> dict[str, object]:
    """The login's own people first; then, per team it administers, one page of the others with
    something remembered (TEAM_PEOPLE_PER_PAGE, ?page=), found by name (?name=, contains)."""
    own_people = list(
        people_of(request).filter(user=request.user).select_related("team").order_by("team__name", "external_id")
    )
    name = request.GET.get("name", "").strip()
    others = team_people_of(request)
    administers = others.exists()
    if name:
        others = others.filter(Q(display_name__icontains=name) | Q(external_id__icontains=name))
    page = requested_page(request, Paginator(others, TEAM_PEOPLE_PER_PAGE))
    own: list[PersonLens] = []
    grouped: dict[str, list[PersonLens]] = {}
    for person_lens in build_lens(request, own_people + list(page.object_list)):
        if person_lens.yours:
            own.append(person_lens)
        else:
            grouped.setdefault(person_lens.person.team.name, []).append(person_lens)
    teams = [TeamPeople(team_name=team, lenses=lenses) for team, lenses in grouped.items()]
    return {
        "own_lenses": own,
        "team_people": teams,
        "several_teams": len({lens.person.team_id for lens in own}) > 1,
        "administers": administers,
        "people_name": name,
        "people_page": page,
        "lens_query": lens_query(request),
    }


def lens_query(request: HttpRequest) -> str:
    """The team page the lens shows (?name=, ?page=), carried by the mute forms so that the page
    they redraw, or go back to, is the one they were on."""
    state = {key: value for key in ("name", "page") if (value := request.GET.get(key, "").strip())}
    return f"?{urlencode(state)}" if state else ""


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
    return render(request, template, {**context, **lens_context(request)})


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
    if mute:
        done = f"Muted “{category}” for {agent.name}. {withheld_words(agent.name, one_note=False)}"
    else:
        done = (
            f"Unmuted “{category}” for {agent.name}: {agent.name} is given these notes, the messages they "
            "were learned from and the summaries built from those messages again."
        )
    if request.htmx:
        return render(request, "memory/bank_list.html#lens-banks", {**lens_context(request), "announce": done})
    messages.success(request, done)
    return redirect(reverse("lens") + lens_query(request))


@require_POST
@login_required
def category_mute(request: LensRequest) -> HttpResponse:
    return _change_mute(request, mute=True)


@require_POST
@login_required
def category_unmute(request: LensRequest) -> HttpResponse:
    return _change_mute(request, mute=False)


def withheld_words(who: str, *, one_note: bool) -> str:
    """What a mute does, in the words the lens uses wherever a mute is made (docs/privacy.md)."""
    what = (
        "this note, the messages it was learned from"
        if one_note
        else "these notes, the messages they were learned from"
    )
    return (
        f"{who} is not given {what}, or conversation summaries built from those messages: not in its turns, "
        "recall, search or conversation search. Nothing is deleted; you still see everything here, and "
        "Unmute gives it all back."
    )


# --- one note ---------------------------------------------------------------------------------


@dataclass
class NoteMutes:
    """Who may use a note, as its page shows it: the agents it is muted for, and the others."""

    person: Person
    muted: list[tuple[Mute, Agent]]
    unmuted: list[Agent]
    help: str = ""


def note_mutes(request: LensRequest, note: Note) -> NoteMutes | None:
    """The note's mutes, when it is about one of this login's people (a shared note is everyone's)."""
    person = note.bank.person
    if person is None or not people_of(request).filter(pk=person.pk).exists():
        return None
    agents = list(Agent.objects.filter(team_id=person.team_id).order_by("name"))
    mutes = {m.agent_id: m for m in Mute.objects.filter(team_id=person.team_id, person=person, note=note)}
    return NoteMutes(
        person=person,
        muted=[(mutes[agent.pk], agent) for agent in agents if agent.pk in mutes],
        unmuted=[agent for agent in agents if agent.pk not in mutes],
        help=withheld_words("That agent", one_note=True),
    )


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


def _where(request: LensRequest, note: Note) -> str:
    """The note's bank in plain words, from the signed-in login's side ("About you, everywhere")."""
    person = note.bank.person
    if person is None:
        return plain.bank_title(note.bank, yours=False, name="")
    return plain.bank_title(note.bank, yours=person.user_id == request.user.pk, name=str(person))


@require_GET
@login_required
def note_detail(request: LensRequest, note_id: int) -> HttpResponse:
    note = _visible_note(request, note_id)
    if _may_change(request, note):
        context = {
            "where": _where(request, note),
            "note": note,
            "form": _edit_form(note),
            "revisions": revision_entries(note),
            "origins": origins_of(note),
            "mutes": note_mutes(request, note),
        }
    else:  # a shared note's sources are other people's messages
        context = {
            "where": _where(request, note),
            "note": note,
            "read_only": READ_ONLY_SHARED.format(scope=note.bank.scope),
            "revisions": revision_entries(note, with_content=False),
        }
    return render(request, "memory/note_detail.html", context)


def _change_note_mute(request: LensRequest, note_id: int, *, mute: bool) -> HttpResponse:
    note = _visible_note(request, note_id)
    mutes = note_mutes(request, note)
    if mutes is None:
        raise PermissionDenied("Only a note about you (or a person of a team you administer) can be muted here.")
    person = mutes.person
    chosen = request.POST.get("agent", "")
    team_agents = Agent.objects.filter(team_id=person.team_id).order_by("name")
    if mute and chosen == "every":
        agents = list(team_agents)
    else:
        try:
            agent_id = query_id(request.POST, "agent", noun="an agent")
        except InvalidText:
            agent_id = None
        agent = team_agents.filter(pk=agent_id).first() if agent_id is not None else None
        if agent is None:  # a form that is not ours, as _change_mute answers it
            raise Http404("No such agent here.")
        agents = [agent]
    names = "every agent" if len(agents) > 1 else agents[0].name
    if mute:
        mute_for_agents(person=person, agents=agents, note=note)
        done = f"Muted this note for {names}. {withheld_words(names.capitalize(), one_note=True)}"
    else:
        unmute_note(person=person, agent=agents[0], note=note)
        done = (
            f"Unmuted this note for {names}: {names} is given this note, the messages it was learned from and "
            "the summaries built from those messages again."
        )
    if request.htmx:
        context = {"note": note, "mutes": note_mutes(request, note), "announce": done}
        return render(request, "memory/note_detail.html#note-mutes", context)
    messages.success(request, done)
    return redirect("lens-note", note_id=note.pk)


@require_POST
@login_required
def note_mute(request: LensRequest, note_id: int) -> HttpResponse:
    return _change_note_mute(request, note_id, mute=True)


@require_POST
@login_required
def note_unmute(request: LensRequest, note_id: int) -> HttpResponse:
    return _change_note_mute(request, note_id, mute=False)


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
            context = {
                "note": note, "form": _edit_form(note), "saved": result.action == "updated",
                "where": _where(request, note),
            }  # fmt: skip
            card = render_to_string("memory/note_detail.html#note-card", context, request=request)
            # The history gained a row: send it along, swapped out of band.
            history = render_to_string(
                "memory/note_detail.html#revision-list",
                {"revisions": revision_entries(note), "swap_oob": True},
                request=request,
            )
            return HttpResponse(card + history)
    context = {"note": note, "form": form, "editing": True, "where": _where(request, note)}
    if request.htmx:
        return render(request, "memory/note_detail.html#note-card", context, status=422)
    return render(request, "memory/note_detail.html", {**context, "revisions": revision_entries(note)}, status=422)


@require_http_methods(["GET", "POST"])
@login_required
def note_delete(request: LensRequest, note_id: int) -> HttpResponse:
    """GET asks for confirmation, saying how many messages the note was learned from; POST erases the
    note (erase_note: the note, its vector and the content of its revisions go, the log keeps who did
    what, and when) and the messages it was learned from, with the summaries they fed."""
    note = _note_to_change(request, note_id)
    if request.method == "GET":
        return render(request, "memory/note_confirm_delete.html", {"note": note, "source_count": source_count(note)})
    try:
        erased = erase_note(note=note, actor=owner_actor(request))
    except NoteNotFound as exc:  # deleted meanwhile, by another tab or an agent
        raise Http404(exc.message) from exc
    also = ""
    if erased.messages:
        also = f" and the {erased.messages} message{pluralize(erased.messages)} it was learned from"
    if erased.summaries:
        also += (
            f" (the conversation summar{pluralize(erased.summaries, 'y,ies')} they fed will be rebuilt without them)"
        )
    messages.success(
        request, f"Deleted the note{also}. What it said is erased; the log keeps only that it was deleted."
    )
    if request.htmx:
        return HttpResponseClientRedirect(reverse("lens"))
    return redirect("lens")


# --- whole-person erasure ---------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@login_required
def person_erase(request: LensRequest, person_id: int) -> HttpResponse:
    """GET asks the person to type a confirmation; POST erases everything held about them in their
    team (notes, what shared banks say of them, revisions' content, mutes, conversations), keeping
    the person row as a tombstone so their login still opens an (empty) lens."""
    person = get_object_or_404(people_of(request).select_related("team"), pk=person_id)
    context = {"person": person, "is_self": person.user_id == request.user.pk}
    if request.method == "GET":
        return render(request, "memory/person_confirm_erase.html", {**context, "form": ErasePersonForm()})
    form = ErasePersonForm(request.POST)
    if not form.is_valid():
        return render(request, "memory/person_confirm_erase.html", {**context, "form": form}, status=422)
    report = erase_person(team=person.team, person=person, actor=owner_actor(request))
    messages.success(request, f"Deleted everything about {person.external_id}. {report.summary()}")
    if request.htmx:
        return HttpResponseClientRedirect(reverse("lens"))
    return redirect("lens")
