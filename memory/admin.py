"""Admin for memory. Notes are read-only here: every change goes through the write path
(the API, the lens or the tools), so the admin can never bypass caps or the revision log."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, TypedDict

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Count, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.html import format_html, format_html_join
from django.utils.text import slugify
from django_stubs_ext import WithAnnotations

from accounts.admin import AgentAdmin, PersonAdmin
from accounts.models import Agent, Person
from accounts.usage import Usage, usage_windows, window_starts
from memory.exceptions import NoteNotFound
from memory.models import Bank, Mute, Note, OntologyNode, Revision
from memory.packages import export_person
from memory.queries import notes_written_by
from memory.services import (
    Actor,
    clear_latch,
    delete_note,
    erase_note,
    erase_person,
    mute_category,
    mute_note,
    remove_mute,
    update_bank_settings,
)
from memory.services.mutes import notes_they_may_mute


def _admin_actor(request: HttpRequest) -> Actor:
    return Actor(Revision.Actor.ADMIN, f"user:{request.user.get_username()}", getattr(request, "request_id", ""))


def _erase_confirmation(
    model_admin: admin.ModelAdmin[Any],
    request: HttpRequest,
    *,
    title: str,
    warning: str,
    items: list[tuple[int, str]],
    confirm: str,
) -> TemplateResponse:
    """Like Django's own delete: a page that says what an erase action will take, and asks once more
    (its form posts the action again with confirm=yes)."""
    return TemplateResponse(
        request,
        "admin/erase_confirmation.html",
        {
            **model_admin.admin_site.each_context(request),
            "title": title,
            "warning": warning,
            "items": items,
            "confirm": confirm,
            "opts": model_admin.model._meta,
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        },
    )


class NoteTotal(TypedDict):
    note_total: int


@admin.register(Bank)
class BankAdmin(admin.ModelAdmin[Bank]):
    list_display = [
        "address",
        "team",
        "kind",
        "policy",
        "note_count",
        "soft_limit",
        "hard_limit",
        "capacity",
        "is_full",
    ]
    list_filter = ["team", "kind", "policy", "is_full", "consolidation_pending"]
    search_fields = ["address", "scope", "person__external_id"]
    list_select_related = ["team", "person"]
    fields = [
        "team", "address", "kind", "person", "scope", "policy", "soft_limit", "hard_limit", "capacity", "is_full",
        "full_since", "consolidation_pending", "consolidation_requested_at", "last_consolidation_at",
        "last_consolidation_outcome",
    ]  # fmt: skip
    readonly_fields = [
        "team", "address", "kind", "person", "scope", "is_full", "full_since", "consolidation_pending",
        "consolidation_requested_at", "last_consolidation_at", "last_consolidation_outcome",
    ]  # fmt: skip
    actions = ["clear_full_latch"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[WithAnnotations[Bank, NoteTotal]]:
        return super().get_queryset(request).annotate(note_total=Count("notes"))

    @admin.display(description="notes", ordering="note_total")
    def note_count(self, bank: WithAnnotations[Bank, NoteTotal]) -> int:
        return bank.note_total

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # banks are created on first use

    def save_model(self, request: HttpRequest, obj: Bank, form: ModelForm[Bank], change: bool) -> None:
        changed = {name: getattr(obj, name) for name in form.changed_data}
        if changed:
            update_bank_settings(bank=obj, actor=_admin_actor(request), changes=changed)

    @admin.action(description="Clear the FULL latch (logged)")
    def clear_full_latch(self, request: HttpRequest, queryset: QuerySet[Bank]) -> None:
        cleared = 0
        for bank in queryset.filter(is_full=True):
            clear_latch(bank=bank, actor=_admin_actor(request), reason="cleared by an admin")
            cleared += 1
        messages.success(request, f"Cleared the FULL latch on {cleared} bank(s).")


@admin.register(Note)
class NoteAdmin(admin.ModelAdmin[Note]):
    list_display = ["key", "bank", "team", "kind", "category", "source", "updated_at"]
    list_filter = ["team", "kind", "source", "bank__policy"]
    search_fields = ["key", "description", "bank__address"]
    list_select_related = ["bank", "team"]
    date_hierarchy = "updated_at"
    actions = ["delete_through_write_path", "erase_selected"]

    def get_readonly_fields(self, request: HttpRequest, obj: Note | None = None) -> list[str]:
        return [field.name for field in Note._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Note | None = None) -> bool:
        return False  # the bulk action below deletes through the write path instead

    def get_actions(
        self, request: HttpRequest, action_location: admin.ActionLocation = admin.ActionLocation.CHANGE_LIST
    ) -> dict[str, admin.Action | None]:
        actions = super().get_actions(request, action_location)
        actions.pop("delete_selected", None)
        return actions

    @admin.action(description="Delete the selected notes (logged, through the write path)")
    def delete_through_write_path(self, request: HttpRequest, queryset: QuerySet[Note]) -> None:
        count = 0
        for note in queryset.select_related("bank"):
            delete_note(note=note, actor=_admin_actor(request), reason="deleted by an admin")
            count += 1
        messages.success(request, f"Deleted {count} note(s).")

    @admin.action(description="Erase the selected notes, with the messages they were learned from")
    def erase_selected(self, request: HttpRequest, queryset: QuerySet[Note]) -> TemplateResponse | None:
        notes = list(queryset.select_related("bank", "team").order_by("pk"))
        if request.POST.get("confirm") != "yes":
            return _erase_confirmation(
                self,
                request,
                title="Erase these notes?",
                warning=(
                    "These notes will be erased, as the lens and the API erase a note: each note and its vector, "
                    "its content in every revision of its bank and key, the messages it was learned from (they "
                    "stay as tombstones in their conversations) and the conversation summaries those messages fed "
                    "(cleared, then rebuilt from what is left). The revision log keeps its events without "
                    "content. This cannot be undone."
                ),
                # Named by id, not by key: a key can be built from what the note says.
                items=[(note.pk, f"{note.team.slug} / {note.bank.address} / note {note.pk}") for note in notes],
                confirm="Yes, erase these notes",
            )
        for note in notes:
            try:
                erased = erase_note(note=note, actor=_admin_actor(request))
            except NoteNotFound:  # deleted since the confirmation page was shown
                messages.warning(request, f"Note {note.pk} was deleted meanwhile; nothing to erase.")
                continue
            messages.success(request, f"Erased note {note.pk} ({note.bank.address}): {erased.summary()}")
        return None


@admin.register(Revision)
class RevisionAdmin(admin.ModelAdmin[Revision]):
    list_display = ["created_at", "action", "bank_ref", "note_key", "actor", "actor_ref", "team"]
    list_filter = ["team", "action", "actor", "erased"]
    search_fields = ["bank_ref", "note_key", "actor_ref", "request_id", "reason"]
    list_select_related = ["team"]
    date_hierarchy = "created_at"

    def get_readonly_fields(self, request: HttpRequest, obj: Revision | None = None) -> list[str]:
        return [field.name for field in Revision._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Revision | None = None) -> bool:
        return False


@admin.register(OntologyNode)
class OntologyNodeAdmin(admin.ModelAdmin[OntologyNode]):
    list_display = ["node_id", "label", "kind", "parent", "team"]
    list_filter = ["team", "kind"]
    search_fields = ["node_id", "label", "glossary"]
    autocomplete_fields = ["parent", "source", "target"]
    list_select_related = ["parent", "team"]


class MuteForm(ModelForm[Mute]):
    class Meta:
        model = Mute
        fields = ["person", "agent", "category", "note"]  # the team is the person's

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        person, agent = cleaned.get("person"), cleaned.get("agent")
        if person is not None and agent is not None and person.team_id != agent.team_id:
            raise ValidationError("That agent is not in this person's team: choose one of the person's team.")
        note = cleaned.get("note")
        if bool(cleaned.get("category")) == (note is not None):
            raise ValidationError("Mute either a category or one note: fill in exactly one of the two.")
        if (
            note is not None
            and person is not None
            and not Note.objects.filter(notes_they_may_mute(person), pk=note.pk).exists()
        ):
            raise ValidationError("That note is not about this person: choose one of their notes.")
        return cleaned


@admin.register(Mute)
class MuteAdmin(admin.ModelAdmin[Mute]):
    """Mutes are added and removed through the services, which tell every turn and recall that
    what the person's banks show changed (a new bank version); a mute is never edited in place."""

    form = MuteForm
    list_display = ["person", "agent", "category", "note", "team", "created_at"]
    list_filter = ["team", "agent"]
    search_fields = ["person__external_id", "category"]
    list_select_related = ["person", "agent", "team", "note"]
    raw_id_fields = ["note"]

    def has_change_permission(self, request: HttpRequest, obj: Mute | None = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Mute, form: ModelForm[Mute], change: bool) -> None:
        if obj.note is not None:
            saved = mute_note(person=obj.person, agent=obj.agent, note=obj.note)
        else:
            saved = mute_category(person=obj.person, agent=obj.agent, category=obj.category)
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: Mute) -> None:
        remove_mute(mute=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Mute]) -> None:
        for mute in queryset.select_related("person", "agent"):
            self.delete_model(request, mute)


# People are accounts' model; erasing one is memory's service (accounts may not import memory),
# so the erasure action is added here, to the same admin page.
admin.site.unregister(Person)


@admin.register(Person)
class PersonErasureAdmin(PersonAdmin):
    list_display = [*PersonAdmin.list_display, "erased_at"]
    actions = ["export_selected", "erase_selected"]

    @admin.action(description="Export everything about the selected person (a JSON download)")
    def export_selected(self, request: HttpRequest, queryset: QuerySet[Person]) -> HttpResponse | None:
        people = list(queryset.select_related("team")[:2])
        if len(people) != 1:
            messages.error(request, "Select exactly one person to export: each export is one person's file.")
            return None
        [person] = people
        # The same package GET /api/v1/exports gives an admin-capable key: nothing left out.
        package = export_person(team=person.team, person=person)
        self.log_change(request, person, "Exported everything held about them (a memory package download).")
        response = HttpResponse(
            json.dumps(package, cls=DjangoJSONEncoder, ensure_ascii=False, indent=2),
            content_type="application/json; charset=utf-8",
        )
        filename = slugify(f"mnemo-export-{person.team.slug}-{person.external_id}") or "mnemo-export"
        response["Content-Disposition"] = f'attachment; filename="{filename}.json"'
        return response

    @admin.action(description="Erase everything about the selected people (keeps a tombstone)")
    def erase_selected(self, request: HttpRequest, queryset: QuerySet[Person]) -> TemplateResponse | None:
        people = list(queryset.select_related("team"))
        if request.POST.get("confirm") != "yes":
            return _erase_confirmation(
                self,
                request,
                title="Erase everything about these people?",
                warning=(
                    "Everything held about these people will be erased: their notes, what shared banks say of "
                    "them, the content of their revisions, their mutes, and their conversations with messages, "
                    "summaries and turns. The revision log keeps its events without content; each person row "
                    "stays as a tombstone. This cannot be undone; export first if they asked for a copy."
                ),
                items=[(person.pk, f"{person.team.slug} / {person.external_id}") for person in people],
                confirm="Yes, erase everything about them",
            )
        for person in people:
            report = erase_person(team=person.team, person=person, actor=_admin_actor(request))
            messages.success(request, f"{person.team.slug}/{person.external_id}: {report.summary()}")
        return None


# Agents are accounts' model; what they wrote is memory's revision log, so the usage the console
# shows (accounts.usage's counters and the notes written) is added here, to the same admin page.
admin.site.unregister(Agent)

USAGE_COLUMNS = [
    ("requests", "Requests"),
    ("turns", "Turns"),
    ("tool_calls", "Tool calls"),
    ("notes_written", "Notes written"),
    ("rate_limited", "Rate-limited"),
]


def agent_usage(agents: list[Agent]) -> list[tuple[Agent, Usage, Usage]]:
    """Each agent's (last 24 hours, last 30 days): the counters, and the notes its writes created or changed."""
    now = datetime.now(UTC)
    day, month = usage_windows([agent.pk for agent in agents], now=now)
    for usage, since in zip((day, month), window_starts(now), strict=True):
        for agent_id, written in notes_written_by(agents, since).items():
            usage[agent_id].notes_written = written
    return [(agent, day[agent.pk], month[agent.pk]) for agent in agents]


@admin.register(Agent)
class AgentConsoleAdmin(AgentAdmin):
    readonly_fields = [*AgentAdmin.readonly_fields, "usage"]
    change_list_template = "admin/accounts/agent/change_list.html"

    @admin.display(description="Usage")
    def usage(self, agent: Agent) -> str:
        if agent._state.adding:
            return "None yet."
        [(_, day, month)] = agent_usage([agent])
        header = format_html_join("", "<th>{}</th>", ((label,) for _, label in USAGE_COLUMNS))
        rows = format_html_join(
            "",
            "<tr><th>{}</th>{}</tr>",
            (
                (window, format_html_join("", "<td>{}</td>", ((getattr(usage, name),) for name, _ in USAGE_COLUMNS)))
                for window, usage in (("Last 24 hours", day), ("Last 30 days", month))
            ),
        )
        return format_html('<table class="agent-usage"><tr><td></td>{}</tr>{}</table>', header, rows)

    def get_urls(self) -> list[URLPattern]:
        usage = path("usage/", self.admin_site.admin_view(self.usage_view), name="accounts_agent_usage")
        return [usage, *super().get_urls()]

    def usage_view(self, request: HttpRequest) -> TemplateResponse:
        """Every agent the admin may see, with its usage: the console's usage list."""
        agents = list(self.get_queryset(request).select_related("team").order_by("team__slug", "slug"))
        return TemplateResponse(
            request,
            "admin/accounts/agent/usage.html",
            {
                **self.admin_site.each_context(request),
                "title": "Agent usage",
                "opts": self.model._meta,
                "columns": [label for _, label in USAGE_COLUMNS],
                "rows": [
                    (
                        agent,
                        [getattr(day, name) for name, _ in USAGE_COLUMNS],
                        [getattr(month, name) for name, _ in USAGE_COLUMNS],
                    )
                    for agent, day, month in agent_usage(agents)
                ],
            },
        )
