from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from accounts.models import Agent, ApiKey, Membership, Person, Team
from accounts.services import create_agent, issue_api_key, revoke_api_key


class MembershipInline(admin.TabularInline[Membership, Team]):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin[Team]):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin[Membership]):
    list_display = ["user", "team", "role", "created_at"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "team__slug"]
    autocomplete_fields = ["user", "team"]


class ApiKeyInline(admin.TabularInline[ApiKey, Agent]):
    """The agent's keys, read only: a key is issued (and its secret shown once) on the API key page,
    and revoked there; its hash is never shown."""

    model = ApiKey
    fk_name = "agent"
    fields = ["prefix", "name", "can_admin", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "name", "can_admin", "created_at", "last_used_at", "revoked_at"]
    extra = 0
    show_change_link = True
    verbose_name_plural = "API keys (issue one with “Add API key”; revoke from the API keys list)"

    def has_add_permission(self, request: HttpRequest, obj: Agent | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Agent | None = None) -> bool:
        return False


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin[Agent]):
    list_display = ["slug", "name", "team", "created_at"]
    list_filter = ["team"]
    search_fields = ["slug", "name", "team__slug"]
    autocomplete_fields = ["team"]
    inlines = [ApiKeyInline]
    readonly_fields = ["issue_key"]

    @admin.display(description="API keys")
    def issue_key(self, agent: Agent) -> str:
        if agent._state.adding:
            return "Save the agent first; then issue it a key here."
        url = reverse("admin:accounts_apikey_add") + "?" + urlencode({"agent": agent.pk})
        return format_html('<a class="addlink" href="{}">Issue a new API key for this agent</a>', url)

    def get_inlines(
        self, request: HttpRequest, obj: Agent | None
    ) -> list[type[admin.options.InlineModelAdmin[Any, Any]]]:
        return [] if obj is None else list(self.inlines)

    def save_model(self, request: HttpRequest, obj: Agent, form: forms.ModelForm[Agent], change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        # The one write path for a new agent, as `manage.py create_agent` takes it.
        created = create_agent(team=obj.team, slug=obj.slug, name=obj.name, persona=obj.persona)
        for field in ("id", "slug", "name", "created_at"):
            setattr(obj, field, getattr(created, field))
        obj._state.adding = False


@admin.register(Person)
class PersonAdmin(admin.ModelAdmin[Person]):
    list_display = ["external_id", "display_name", "team", "user", "created_at"]
    list_filter = ["team"]
    search_fields = ["external_id", "display_name", "user__username"]
    autocomplete_fields = ["team", "user"]
    list_select_related = ["team", "user"]


class ApiKeyAddForm(forms.ModelForm[ApiKey]):
    class Meta:
        model = ApiKey
        fields = ["agent", "name", "can_admin"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin[ApiKey]):
    list_display = ["prefix", "name", "agent", "team", "can_admin", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["team", "can_admin", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["prefix", "name", "agent__slug", "team__slug"]
    list_select_related = ["agent", "team"]
    readonly_fields = ["team", "agent", "prefix", "created_at", "last_used_at", "revoked_at"]
    change_fields = ("team", "agent", "name", "prefix", "can_admin", "created_at", "last_used_at", "revoked_at")
    add_fields = ("agent", "name", "can_admin")
    fields = change_fields
    actions = ["revoke_selected"]

    def get_form(
        self, request: HttpRequest, obj: ApiKey | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm[ApiKey]]:
        if obj is None:
            kwargs["form"] = ApiKeyAddForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> tuple[str, ...]:
        return self.add_fields if obj is None else self.change_fields

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str] | tuple[str, ...]:
        return [] if obj is None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: ApiKey, form: forms.ModelForm[ApiKey], change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        issued = issue_api_key(agent=obj.agent, name=obj.name, can_admin=obj.can_admin)
        # Hand the saved row back to the admin so its redirect and log entry point at it.
        for field in ("id", "team_id", "prefix", "secret_hash", "created_at"):
            setattr(obj, field, getattr(issued.api_key, field))
        obj._state.adding = False
        # Shown by response_add on the page this request answers, and kept nowhere else: a message
        # would carry it to the next page in a cookie (or the session table).
        request._mnemo_new_key = issued.plaintext  # type: ignore[attr-defined]

    def response_add(self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None) -> HttpResponse:
        plaintext = getattr(request, "_mnemo_new_key", None)
        if plaintext is None:
            return super().response_add(request, obj, post_url_continue)
        context = {**self.admin_site.each_context(request), "api_key": obj, "plaintext": plaintext, "title": "New key"}
        response = TemplateResponse(request, "admin/accounts/apikey/issued.html", context)
        response["Cache-Control"] = "no-store"  # not kept by the browser's cache either
        return response

    @admin.action(description="Revoke the selected keys")
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for api_key in queryset:
            revoke_api_key(api_key=api_key)
        messages.success(request, f"Revoked {queryset.count()} key(s).")
