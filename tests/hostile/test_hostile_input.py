"""Hostile input on every surface, as a table: every surface by every kind of bad input that applies to it.

Surfaces: every REST tool, every API resource (read and write), imports, exports, MCP tool calls and
the /mcp endpoint, and the lens forms. Kinds: NUL, lone surrogates, other control characters, bidi
controls in ids, huge / overflowing / negative / non-ASCII-digit numbers, deeply nested JSON, the
wrong content type, oversize bodies with and without Content-Length, empty and non-object bodies.

Each answer is a 4xx (the API's error shape on the JSON API), never a 500; nothing changes but the
revision log; and every refused note write is in it, with what was refused stored escaped. The two
exceptions, by design: bodies over the size limit are refused before they are read (and so before
they are attributed to anyone), and bidi controls are allowed in free text (see docs/api.md).

Adding a surface adds every kind that applies to it; `test_every_route_is_a_surface` fails when an
API or lens route has no surface here.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import pytest
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from accounts.models import Person
from config.mcp import call_tool
from conversations import services as conversations
from conversations.models import Conversation, ConversationImport, Message, Turn
from memory.models import Bank, Mute, Note, Revision
from memory.package_format import FORMAT
from memory.services import Actor, remember
from memory.tools import REGISTRY
from tests.hostile.test_body_limit import assert_too_large, post_while_sending
from tests.support.fixtures import Tenant, make_tenant
from webhooks.models import Subscription

# --- the world every case runs against --------------------------------------------------------


@dataclass
class World:
    tenant: Tenant
    person: Person
    note: Note
    conversation: Conversation
    message: Message
    turn: Turn
    user: Any
    job: ConversationImport

    @cached_property
    def lens(self) -> Client:  # signed in as the person's login; only the lens cases need one
        client = Client()
        client.force_login(self.user)
        return client

    def fill(self, path: str, **override: str) -> str:
        values = {
            "note": str(self.note.pk),
            "conversation": str(self.conversation.pk),
            "message": str(self.message.pk),
            "turn": str(self.turn.pk),
            "job": str(self.job.pk),
            "bank": urllib.parse.quote(self.note.bank.address, safe=":"),
            "person": "ada",
            "person_pk": str(self.person.pk),
        }
        return path.format(**{**values, **override})


@pytest.fixture
def world(db: None, django_user_model: Any) -> World:
    tenant = make_tenant(can_admin=True)
    team = tenant.team
    user = django_user_model.objects.create_user("ada-login")  # no password: hashing one costs 0.6 s a case
    person = Person.objects.create(team=team, external_id="ada", user=user)
    note = remember(
        team=team, person=person, actor=Actor.for_agent(tenant.agent), key="home-city",
        description="Where Ada lives", content="Ada lives in Oslo.", category="home",
    ).note  # fmt: skip
    assert note is not None
    conversation = conversations.start_conversation(team=team, agent=tenant.agent, person=person)
    message = conversations.record_message(conversation=conversation, role="user", content="Where do I live?")
    # A turn as take_turn leaves it, without composing (which the cases never read).
    turn = Turn.objects.create(team=team, conversation=conversation, message=message, profile="full")
    job = ConversationImport.objects.create(team=team, agent=tenant.agent)  # as an accepted import leaves one
    return World(tenant, person, note, conversation, message, turn, user, job)


def state(world: World) -> dict[str, Any]:
    """Everything a refused request must leave as it was (the revision log may only gain refusals)."""
    team = world.tenant.team
    return {
        "notes": sorted(Note.objects.filter(team=team).values_list("pk", "key", "description", "content")),
        "banks": sorted(Bank.objects.filter(team=team).values_list("address", "policy", "soft_limit", "hard_limit")),
        "people": sorted(Person.objects.filter(team=team).values_list("external_id", "display_name")),
        "conversations": Conversation.objects.filter(team=team).count(),
        "messages": sorted(Message.objects.filter(team=team).values_list("pk", "content")),
        "turns": sorted(Turn.objects.filter(team=team).values_list("pk", "reply_id")),
        "mutes": Mute.objects.filter(team=team).count(),
        "webhooks": Subscription.objects.filter(team=team).count(),
        "revisions": Revision.objects.filter(team=team).exclude(action=Revision.Action.REFUSED).count(),
    }


def refusals(world: World) -> list[Revision]:
    return list(Revision.objects.filter(team=world.tenant.team, action=Revision.Action.REFUSED).order_by("id"))


# --- kinds ------------------------------------------------------------------------------------

OVERFLOW = "@@1e400@@"  # replaced by the bare JSON number 1e400 (Python reads it as infinity)


@dataclass(frozen=True)
class Value:
    json: Any  # as a JSON value
    url: str  # percent-encoded, for a query, a path or a form


TEXT_KINDS = {
    "nul": Value("Oslo\x00Bergen", "Oslo%00Bergen"),
    "surrogate": Value("Oslo\ud800Bergen", "Oslo%ED%A0%80Bergen"),
    "control": Value("Oslo\x1bBergen", "Oslo%1BBergen"),
}
ID_KINDS = {"bidi": Value("ada\u202eevil", "ada%E2%80%AEevil")}
NUMBER_KINDS = {
    "huge": Value(10**30, "1" + "0" * 30),
    "overflow": Value(OVERFLOW, "1e20"),
    "negative": Value(-1, "-1"),
    "non_ascii_digits": Value("٣", "%C2%B2"),  # Arabic-Indic three; superscript two
}
BODY_KINDS = ["nested", "wrong_content_type", "oversize", "empty", "non_object"]
# The one kind that needs a real server (no Content-Length is possible only over a socket).
CHUNKED_OVERSIZE = "oversize_chunked"


# --- surfaces ---------------------------------------------------------------------------------

Where = Literal["body", "query", "path", "form"]


@dataclass(frozen=True)
class Loc:
    where: Where
    name: str  # a body field (dotted, for nested ones), query parameter, path placeholder or form field
    field: str | None = None  # the field an error names, when not `name`

    @property
    def error_field(self) -> str:
        return self.field or self.name


@dataclass(frozen=True)
class Surface:
    name: str
    method: str
    route: str  # the URL pattern it covers
    path: str  # with {note}, {conversation}, {message}, {turn}, {bank}, {person}, {person_pk}
    body: Callable[[World], dict[str, Any]] | None = None
    text: Loc | None = None  # where free text goes
    ident: Loc | None = None  # where an id goes
    number: Loc | None = None  # where a number goes
    writes_notes: bool = False  # its refusals must be in the revision log
    html: bool = False  # a lens page: HTML answers, form bodies
    expect: dict[str, tuple[int, ...]] = field(default_factory=dict)  # answers that differ by design

    def kinds(self) -> list[str]:
        kinds: list[str] = []
        if self.text:
            kinds += TEXT_KINDS
        if self.ident:
            kinds += ID_KINDS
        if self.number:
            kinds += NUMBER_KINDS
        if self.body:
            kinds += [k for k in BODY_KINDS if not (self.html and k in ("nested", "non_object"))]
        return kinds


def body(**fields: Any) -> Callable[[World], dict[str, Any]]:
    return lambda world: dict(fields)


TOOL_SURFACES: dict[str, dict[str, Any]] = {
    "remember": {
        "body": body(person="ada", key="pet", description="Ada's pet", content="A cat named Miso."),
        "text": Loc("body", "description"), "ident": Loc("body", "person"),
    },
    "recall_memories": {
        "body": body(person="ada", query="where does Ada live"),
        "text": Loc("body", "query"), "ident": Loc("body", "person"), "number": Loc("body", "limit"),
    },
    "forget_memory": {
        "body": body(person="ada", key="home-city", reason="asked to"),
        "text": Loc("body", "reason"), "ident": Loc("body", "key"),
    },
    "remember_about_user": {
        "body": body(person="ada", observation="Drinks green tea.", category="preferences"),
        "text": Loc("body", "observation"), "ident": Loc("body", "category"),
    },
    "remember_about_project": {
        "body": body(person="ada", project="apollo", observation="Ships on Fridays.", category="cadence"),
        "text": Loc("body", "observation"), "ident": Loc("body", "project"),
    },
    "edit_note": {
        "body": lambda w: {"person": "ada", "id": w.note.pk, "mode": "replace", "content": "Ada lives in Bergen."},
        "text": Loc("body", "content"), "ident": Loc("body", "person"), "number": Loc("body", "id"),
    },
    "search": {
        "body": body(person="ada", query="Oslo"),
        "text": Loc("body", "query"), "ident": Loc("body", "scope"), "number": Loc("body", "limit"),
    },
    "recall": {
        "body": body(person="ada", query="Oslo"),
        "text": Loc("body", "query"), "ident": Loc("body", "person"), "number": Loc("body", "budget_chars"),
    },
    "recent_messages": {
        "body": body(person="ada"),
        "text": Loc("body", "person"), "ident": Loc("body", "scope"), "number": Loc("body", "conversation"),
    },
    "search_conversation": {
        "body": body(person="ada", query="live"),
        "text": Loc("body", "query"), "ident": Loc("body", "person"), "number": Loc("body", "limit"),
    },
}  # fmt: skip


def package(world: World) -> dict[str, Any]:
    note = {"key": "pet", "description": "Ada's pet", "content": "A cat named Miso."}
    return {
        "format": FORMAT,
        "version": 1,
        "banks": [{"kind": "global", "person": "ada", "scope": "", "notes": [note]}],
    }


SURFACES: list[Surface] = [
    *[
        Surface(f"tool {name}", "POST", f"api/v1/tools/{name}", f"/api/v1/tools/{name}",
                writes_notes=REGISTRY[name].writes, **TOOL_SURFACES[name])
        for name in REGISTRY
    ],
    Surface("tools list", "GET", "api/v1/tools", "/api/v1/tools",
            text=Loc("query", "format"), ident=Loc("query", "format")),
    Surface("me", "GET", "api/v1/me", "/api/v1/me"),
    Surface("people register", "POST", "api/v1/people", "/api/v1/people",
            body=body(person="bob", display_name="Bob"), text=Loc("body", "display_name"),
            ident=Loc("body", "person")),
    Surface("people detail", "GET", "api/v1/people/<path:external_id>", "/api/v1/people/{person}",
            text=Loc("path", "person"), ident=Loc("path", "person"),
            expect={"surrogate": (404,)}),
    Surface("person erase", "DELETE", "api/v1/people/<path:external_id>", "/api/v1/people/{person}",
            text=Loc("path", "person"), ident=Loc("path", "person"),
            expect={"surrogate": (404,)}),
    Surface("person review", "PATCH", "api/v1/people/<path:external_id>", "/api/v1/people/{person}",
            body=body(review_writes=True), text=Loc("path", "person"), ident=Loc("path", "person"),
            expect={"surrogate": (404,)}),
    Surface("notes list", "GET", "api/v1/notes", "/api/v1/notes",
            text=Loc("query", "person"), ident=Loc("query", "bank")),
    Surface("notes list as of", "GET", "api/v1/notes", "/api/v1/notes", text=Loc("query", "as_of")),
    Surface("note detail", "GET", "api/v1/notes/<int:note_id>", "/api/v1/notes/{note}",
            number=Loc("path", "note")),
    Surface("note delete", "DELETE", "api/v1/notes/<int:note_id>", "/api/v1/notes/{note}",
            number=Loc("path", "note")),
    Surface("banks list", "GET", "api/v1/banks", "/api/v1/banks",
            text=Loc("query", "person"), ident=Loc("query", "person")),
    Surface("bank detail", "GET", "api/v1/banks/<path:bank_id>", "/api/v1/banks/{bank}",
            text=Loc("path", "bank"), ident=Loc("path", "bank"), expect={"surrogate": (404,)}),
    Surface("bank update", "PATCH", "api/v1/banks/<path:bank_id>", "/api/v1/banks/{bank}",
            body=body(soft_limit=30), text=Loc("body", "policy"), ident=Loc("path", "bank"),
            number=Loc("body", "soft_limit")),
    Surface("revisions list", "GET", "api/v1/revisions", "/api/v1/revisions",
            text=Loc("query", "person"), ident=Loc("query", "bank"), number=Loc("query", "note")),
    Surface("reads list", "GET", "api/v1/reads", "/api/v1/reads",
            text=Loc("query", "tool"), ident=Loc("query", "agent")),
    Surface("mutes list", "GET", "api/v1/mutes", "/api/v1/mutes",
            text=Loc("query", "person"), ident=Loc("query", "agent")),
    Surface("mute", "POST", "api/v1/mutes", "/api/v1/mutes", body=body(person="ada", category="health"),
            text=Loc("body", "category"), ident=Loc("body", "person"), number=Loc("body", "note")),
    Surface("mute a note", "POST", "api/v1/mutes", "/api/v1/mutes",
            body=lambda w: {"person": "ada", "note": w.note.pk}, ident=Loc("body", "person"),
            number=Loc("body", "note")),
    Surface("mute delete", "DELETE", "api/v1/mutes/<int:mute_id>", "/api/v1/mutes/{note}",
            number=Loc("path", "note")),
    Surface("webhooks list", "GET", "api/v1/webhooks", "/api/v1/webhooks"),
    # No valid case reaches the URL's resolution: every kind is refused before it.
    Surface("webhook subscribe", "POST", "api/v1/webhooks", "/api/v1/webhooks",
            body=body(url="https://example.com/hook", events=["note.created"], secret="s" * 20),
            text=Loc("body", "url"), ident=Loc("body", "events.0", "events")),
    Surface("webhook delete", "DELETE", "api/v1/webhooks/<int:webhook_id>", "/api/v1/webhooks/{note}",
            number=Loc("path", "note")),
    Surface("webhook deliveries", "GET", "api/v1/webhooks/<int:webhook_id>/deliveries",
            "/api/v1/webhooks/{note}/deliveries", number=Loc("path", "note")),
    # The world's note id stands for a proposal id: no proposal has it, and every kind is refused first.
    Surface("proposals list", "GET", "api/v1/proposals", "/api/v1/proposals",
            text=Loc("query", "person"), ident=Loc("query", "status")),
    Surface("proposal approve", "POST", "api/v1/proposals/<int:proposal_id>/approve",
            "/api/v1/proposals/{note}/approve", body=body(content="Green."), text=Loc("body", "content"),
            number=Loc("path", "note"),
            # No body keeps the proposal as proposed: well-formed, so the (absent) proposal answers.
            expect={"empty": (404,)}),
    Surface("proposal reject", "POST", "api/v1/proposals/<int:proposal_id>/reject",
            "/api/v1/proposals/{note}/reject", number=Loc("path", "note")),
    Surface("imports", "POST", "api/v1/imports", "/api/v1/imports", body=package,
            text=Loc("body", "banks.0.notes.0.content", "banks[0].notes[0].content"),
            ident=Loc("body", "banks.0.person"), number=Loc("body", "version"), writes_notes=True,
            # Import refuses a malformed note one by one and imports the rest (memory.packages):
            # a person id with a bidi control is reported in a 200 and logged, not a 400.
            expect={"bidi": (200,)}),
    Surface("exports", "GET", "api/v1/exports", "/api/v1/exports",
            text=Loc("query", "person"), ident=Loc("query", "person")),
    Surface("conversations list", "GET", "api/v1/conversations", "/api/v1/conversations",
            text=Loc("query", "person"), ident=Loc("query", "person")),
    Surface("conversation start", "POST", "api/v1/conversations", "/api/v1/conversations",
            body=body(person="ada"), text=Loc("body", "person"), ident=Loc("body", "person")),
    Surface("conversation detail", "GET", "api/v1/conversations/<int:conversation_id>",
            "/api/v1/conversations/{conversation}", number=Loc("path", "conversation")),
    Surface("conversation delete", "DELETE", "api/v1/conversations/<int:conversation_id>",
            "/api/v1/conversations/{conversation}", number=Loc("path", "conversation")),
    Surface("conversation end", "POST", "api/v1/conversations/<int:conversation_id>/end",
            "/api/v1/conversations/{conversation}/end", number=Loc("path", "conversation")),
    Surface("messages list", "GET", "api/v1/conversations/<int:conversation_id>/messages",
            "/api/v1/conversations/{conversation}/messages", number=Loc("path", "conversation")),
    Surface("message record", "POST", "api/v1/conversations/<int:conversation_id>/messages",
            "/api/v1/conversations/{conversation}/messages", body=body(role="user", content="Hello."),
            text=Loc("body", "content"), ident=Loc("body", "external_id"), number=Loc("path", "conversation")),
    Surface("conversations import", "POST", "api/v1/conversations/import", "/api/v1/conversations/import",
            body=lambda world: [{"person": "ada", "external_id": "c1", "messages": [  # type: ignore[arg-type, return-value]  # a JSON array body
                {"role": "user", "content": "Hello.", "created_at": "2023-05-08T13:56:00Z", "external_id": "m1"}]}],
            text=Loc("body", "0.messages.0.content", "[0].messages[0].content"),
            ident=Loc("body", "0.person", "[0].person")),
    Surface("conversations import job", "GET", "api/v1/conversations/imports/<int:import_id>",
            "/api/v1/conversations/imports/{job}", number=Loc("path", "job")),
    Surface("message delete", "DELETE", "api/v1/conversations/<int:conversation_id>/messages/<int:message_id>",
            "/api/v1/conversations/{conversation}/messages/{message}", number=Loc("path", "message")),
    Surface("turn", "POST", "api/v1/turns", "/api/v1/turns",
            body=body(person="ada", message="Where do I live now?"), text=Loc("body", "message"),
            ident=Loc("body", "person"), number=Loc("body", "conversation")),
    Surface("turn reply", "POST", "api/v1/turns/<int:turn_id>/reply", "/api/v1/turns/{turn}/reply",
            body=body(content="You live in Oslo."), text=Loc("body", "content"), number=Loc("path", "turn")),
    # --- the lens (HTML, forms) ---
    Surface("lens search", "GET", "lens/", "/lens/", text=Loc("query", "q"), html=True),
    Surface("lens reads", "GET", "lens/reads/", "/lens/reads/", number=Loc("query", "agent"), html=True),
    Surface("lens conversation", "GET", "lens/conversations/<int:conversation_id>", "/lens/conversations/{conversation}",
            number=Loc("path", "conversation"), html=True),
    Surface("lens note", "GET", "m/<int:note_id>", "/m/{note}", number=Loc("path", "note"), html=True),
    Surface("lens note as of", "GET", "m/<int:note_id>/as-of", "/m/{note}/as-of", number=Loc("path", "note"),
            text=Loc("query", "as_of"), html=True),
    Surface("lens as of", "GET", "lens/as-of/", "/lens/as-of/", text=Loc("query", "as_of"), html=True),
    Surface("lens edit", "POST", "m/<int:note_id>/edit", "/m/{note}/edit", html=True, writes_notes=True,
            body=body(description="Where Ada lives", content="Ada lives in Bergen."),
            text=Loc("form", "content"), number=Loc("path", "note")),
    Surface("lens delete", "POST", "m/<int:note_id>/delete", "/m/{note}/delete", html=True,
            number=Loc("path", "note")),
    # A page number that is not one is the first page, one past the end the last (Paginator.get_page).
    Surface("lens conversations", "GET", "lens/conversations/", "/lens/conversations/", html=True,
            number=Loc("query", "page"), expect=dict.fromkeys(NUMBER_KINDS, (200, 400))),
    Surface("lens conversation", "GET", "lens/conversations/<int:conversation_id>", "/lens/conversations/{conversation}",
            html=True, number=Loc("path", "conversation")),
    Surface("lens conversation delete", "POST", "lens/conversations/<int:conversation_id>/delete",
            "/lens/conversations/{conversation}/delete", html=True, number=Loc("path", "conversation")),
    Surface("lens message delete", "POST", "lens/conversations/<int:conversation_id>/messages/<int:message_id>/delete",
            "/lens/conversations/{conversation}/messages/{message}/delete", html=True, number=Loc("path", "message")),
    # Every hostile case replaces the typed phrase or the path: none of them may erase anything.
    Surface("lens erase person", "POST", "lens/people/<int:person_id>/erase", "/lens/people/{person_pk}/erase",
            html=True, body=body(confirmation="delete everything"), text=Loc("form", "confirmation"),
            number=Loc("path", "person_pk")),
    Surface("lens review", "POST", "lens/people/<int:person_id>/review", "/lens/people/{person_pk}/review",
            html=True, body=body(review="on"), text=Loc("form", "review"), number=Loc("path", "person_pk")),
    Surface("lens proposal keep", "POST", "lens/proposals/<int:proposal_id>/keep", "/lens/proposals/{note}/keep",
            html=True, body=body(content="Green."), text=Loc("form", "content"), number=Loc("path", "note")),
    Surface("lens proposal reject", "POST", "lens/proposals/<int:proposal_id>/reject",
            "/lens/proposals/{note}/reject", html=True, number=Loc("path", "note")),
    *[
        Surface(f"lens {action}", "POST", f"lens/{action}", f"/lens/{action}", html=True,
                body=lambda w: {"person": w.person.pk, "agent": w.tenant.agent.pk, "category": "home"},
                text=Loc("form", "category"), ident=Loc("form", "category"), number=Loc("form", "person"))
        for action in ("mute", "unmute")
    ],
    *[
        Surface(f"lens note {action}", "POST", f"m/<int:note_id>/{action}", f"/m/{{note}}/{action}", html=True,
                body=lambda w: {"agent": w.tenant.agent.pk}, number=Loc("form", "agent"))
        for action in ("mute", "unmute")
    ],
]  # fmt: skip

CASES = [pytest.param(surface, kind, id=f"{surface.name}-{kind}") for surface in SURFACES for kind in surface.kinds()]


# --- building a request -----------------------------------------------------------------------


@dataclass
class Request:
    method: str
    path: str
    body: bytes | None = None
    content_type: str = "application/json"


def _set(data: Any, dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        data = data[int(part)] if isinstance(data, list) else data[part]
    if isinstance(data, list):
        data[int(last)] = value
    else:
        data[last] = value


def _json(data: Any) -> bytes:
    return json.dumps(data).replace(f'"{OVERFLOW}"', "1e400").encode()  # ensure_ascii: "\ud800" stays an escape


def _form(data: dict[str, Any], hostile: tuple[str, str] | None = None) -> bytes:
    pairs = [
        f"{urllib.parse.quote(k)}={urllib.parse.quote(str(v))}" for k, v in data.items() if k != (hostile or ("",))[0]
    ]
    if hostile:
        pairs.append(f"{hostile[0]}={hostile[1]}")
    return "&".join(pairs).encode()


def build(surface: Surface, kind: str, world: World) -> Request:
    base = surface.body(world) if surface.body else None
    content_type = "application/x-www-form-urlencoded" if surface.html else "application/json"
    encode = (lambda data: _form(data)) if surface.html else _json
    path = world.fill(surface.path)
    if kind in BODY_KINDS:
        assert base is not None
        if kind == "nested":
            return Request(surface.method, path, b"[" * 10_000 + b"]" * 10_000, content_type)
        if kind == "wrong_content_type":
            other = "application/json" if surface.html else "text/plain"
            return Request(surface.method, path, json.dumps(base).encode(), other)
        if kind == "oversize":
            return Request(surface.method, path, b"x" * (settings.API_MAX_BODY_BYTES + 1), content_type)
        if kind == "empty":
            return Request(surface.method, path, b"", content_type)
        if kind == "non_object":
            return Request(surface.method, path, b'["ada"]', content_type)
    value = {**TEXT_KINDS, **ID_KINDS, **NUMBER_KINDS}[kind]
    loc = surface.text if kind in TEXT_KINDS else surface.ident if kind in ID_KINDS else surface.number
    assert loc is not None
    raw = encode(base) if base is not None else None
    if loc.where == "body":
        assert base is not None
        _set(base, loc.name, value.json)
        raw = _json(base)
    elif loc.where == "form":
        assert base is not None
        raw = _form(base, (loc.name, value.url))
    elif loc.where == "query":
        path += f"?{loc.name}={value.url}"
    else:
        path = world.fill(surface.path, **{loc.name: value.url})
    return Request(surface.method, path, raw, content_type)


def send(client: Client, request: Request) -> Any:
    client.raise_request_exception = False  # a 500 must show as a 500 here, not as an exception
    if request.body is None:
        return client.generic(request.method, request.path)
    return client.generic(request.method, request.path, request.body, content_type=request.content_type)


# --- what each case must answer ---------------------------------------------------------------


def expected_status(surface: Surface, kind: str) -> tuple[int, ...]:
    if kind in surface.expect:
        return surface.expect[kind]
    if kind == "oversize":
        return (413,)
    if kind in ("wrong_content_type", "empty") and surface.html:
        # The note edit form re-renders with the refusal (422); a form that is not ours is 404
        # (memory.views._change_mute).
        return (404, 422)
    if kind == "wrong_content_type":
        return (415,)
    loc = surface.text if kind in TEXT_KINDS else surface.ident if kind in ID_KINDS else surface.number
    if loc is not None and loc.where == "path" and kind in NUMBER_KINDS:
        return (404,)  # ids in paths are ASCII digits by the URL pattern; anything else is no such page
    if surface.html:
        # The note edit form re-renders with the refusal (422); a form that is not ours is 404
        # (memory.views._change_mute); a request that cannot be read is 400.
        return (400, 404, 422)
    return (400,)


def assert_error_shape(response: Any, status: int) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) <= {"code", "message", "field"}, error
    assert isinstance(error["message"], str), error
    assert error["message"], error
    assert (
        error["code"] == {400: "invalid", 404: "not_found", 413: "too_large", 415: "unsupported_media_type"}[status]
    ), error
    return error


@pytest.mark.parametrize(("surface", "kind"), CASES)
def test_hostile_input_is_refused(world, surface, kind):
    request = build(surface, kind, world)
    before, refused_before = state(world), len(refusals(world))
    client = world.lens if surface.html else world.tenant.client

    response = send(client, request)

    assert response.status_code in expected_status(surface, kind), response.content[:300]
    if not surface.html and response.status_code != 200:
        error = assert_error_shape(response, response.status_code)
        loc = surface.text if kind in TEXT_KINDS else surface.ident if kind in ID_KINDS else surface.number
        if kind not in BODY_KINDS and response.status_code == 400 and loc is not None and loc.where != "path":
            assert error.get("field") == loc.error_field, error
    assert state(world) == before
    logged = refusals(world)[refused_before:]
    if surface.writes_notes and kind != "oversize" and response.status_code != 404:
        assert logged, "a refused write must be in the revision log"
        if kind in TEXT_KINDS:
            # Stored escaped: what Postgres cannot hold is written as \u0000, \ud800, \u001b.
            escaped = {"nul": "\\u0000", "surrogate": "\\ud800", "control": "\\u001b"}[kind]
            if surface.html and kind == "surrogate":
                escaped = "%ED%A0%80"  # a form that is not UTF-8 is logged as it came, percent-encoded
            assert any(escaped in json.dumps(r.after) + r.reason for r in logged), [(r.after, r.reason) for r in logged]
    else:
        assert not logged


def test_every_route_is_a_surface():
    covered = {(s.route, s.method) for s in SURFACES}

    def walk(patterns: list[Any], prefix: str = "") -> list[tuple[str, Any]]:
        found = []
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                found += walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                found.append((prefix + str(pattern.pattern), pattern.callback))
        return found

    routes = set()
    for route, view in walk(get_resolver().url_patterns):
        if not route.startswith(("api/v1/", "lens/", "m/")):
            continue
        view_class = getattr(view, "view_class", None) or getattr(view, "cls", None)
        if view_class is not None:
            methods = [m.upper() for m in ("get", "post", "patch", "put", "delete") if hasattr(view_class, m)]
        else:
            methods = sorted(s.method for s in SURFACES if s.route == route) or ["?"]
        routes |= {(route, method) for method in methods}
    assert routes - covered == set()
    assert {kind for s in SURFACES for kind in s.kinds()} == {*TEXT_KINDS, *ID_KINDS, *NUMBER_KINDS, *BODY_KINDS}


# --- MCP: the same tools, through the MCP call path --------------------------------------------

MCP_KINDS = [*TEXT_KINDS, *ID_KINDS, *NUMBER_KINDS, "nested", "empty", "non_object"]
MCP_CASES = [
    pytest.param(name, kind, id=f"mcp {name}-{kind}")
    for name in REGISTRY
    for kind in MCP_KINDS
    if kind not in NUMBER_KINDS or "number" in TOOL_SURFACES[name]
]


def mcp_arguments(name: str, kind: str, world: World) -> Any:
    spec = TOOL_SURFACES[name]
    arguments = spec["body"](world)
    if kind == "empty":
        return {}
    if kind == "non_object":
        return ["ada"]
    if kind == "nested":
        deep: Any = "Oslo"
        for _ in range(100):
            deep = [deep]
        arguments[spec["text"].name] = deep
        return arguments
    value = {**TEXT_KINDS, **ID_KINDS, **NUMBER_KINDS}[kind].json
    loc = spec["text"] if kind in TEXT_KINDS else spec["ident"] if kind in ID_KINDS else spec["number"]
    arguments[loc.name] = float("inf") if value == OVERFLOW else value
    return arguments


@pytest.mark.parametrize(("name", "kind"), MCP_CASES)
def test_hostile_mcp_tool_call_is_refused(world, name, kind):
    before, refused_before = state(world), len(refusals(world))

    body, is_error = call_tool(api_key=world.tenant.key.api_key, name=name, arguments=mcp_arguments(name, kind, world))

    assert is_error
    assert set(body) == {"error"}, body
    assert body["error"]["code"] == "invalid", body
    if kind not in ("nested", "empty", "non_object"):
        spec = TOOL_SURFACES[name]
        loc = spec["text"] if kind in TEXT_KINDS else spec["ident"] if kind in ID_KINDS else spec["number"]
        assert body["error"]["field"] == loc.name
    assert state(world) == before
    assert bool(refusals(world)[refused_before:]) == REGISTRY[name].writes


# --- over a real server: bodies without a Content-Length, and the /mcp endpoint ----------------

BODY_SURFACES = [pytest.param(s, id=s.name) for s in SURFACES if s.body is not None]


@pytest.mark.parametrize("surface", BODY_SURFACES)
def test_an_oversize_body_without_content_length_is_413(asgi_server, surface):
    path = surface.path.format(
        note=1, conversation=1, message=1, turn=1, job=1, bank="user:ada", person="ada", person_pk=1
    )
    chunks = [b" " * 65536] * ((settings.API_MAX_BODY_BYTES // 65536) + 2)
    answer = post_while_sending(asgi_server, path, chunks, headers={})
    if surface.html:
        assert answer.status == 413
    else:
        assert_too_large(answer)


def mcp_post(server: Any, key: str, raw: bytes, content_type: str = "application/json") -> Any:
    import httpx

    headers = {
        "Authorization": f"Bearer {key}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": content_type,
    }
    return httpx.post(f"{server.url}/mcp", content=raw, headers=headers, timeout=30)


@pytest.mark.django_db(transaction=True)
def test_hostile_input_to_the_mcp_endpoint_is_refused(asgi_server, subtests):
    log_before = asgi_server.log_size()  # the server is shared: judge only what this test sent
    tenant = make_tenant()
    key = tenant.key.plaintext

    def call(arguments: dict[str, Any], tool: str = "remember") -> bytes:
        return _json({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": tool, "arguments": arguments}})  # fmt: skip

    def tool_error(response: Any) -> dict[str, Any]:
        # A tool error is a result, as MCP has it, carrying the API's error body.
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        assert result["isError"] is True
        return json.loads(result["content"][0]["text"])["error"]

    good = {"person": "ada", "key": "pet", "description": "Ada's pet", "content": "A cat named Miso."}
    for kind, value in {**TEXT_KINDS, **ID_KINDS}.items():
        with subtests.test(kind=kind):
            field_name = "person" if kind in ID_KINDS else "description"
            error = tool_error(mcp_post(asgi_server, key, call({**good, field_name: value.json})))
            assert (error["code"], error["field"]) == ("invalid", field_name)
    for kind, value in NUMBER_KINDS.items():
        with subtests.test(kind=kind):
            edit = {"person": "ada", "id": value.json, "mode": "replace", "content": "Ada lives in Rome."}
            error = tool_error(mcp_post(asgi_server, key, call(edit, "edit_note")))
            assert (error["code"], error["field"]) == ("invalid", "id")
    transport = {
        "nested": (b"[" * 10_000 + b"]" * 10_000, "application/json"),
        "wrong_content_type": (call(good), "text/plain"),
        "empty": (b"", "application/json"),
        "non_object": (b'"tools/call"', "application/json"),
        "oversize": (b" " * (settings.API_MAX_BODY_BYTES + 1), "application/json"),
    }
    for kind, (raw, content_type) in transport.items():
        with subtests.test(kind=kind):
            response = mcp_post(asgi_server, key, raw, content_type)
            assert 400 <= response.status_code < 500, response.text
            if kind == "oversize":
                assert response.json()["error"]["code"] == "too_large"
    assert not Note.objects.filter(team=tenant.team).exists()
    refused = Revision.objects.filter(team=tenant.team, action=Revision.Action.REFUSED)
    assert refused.count() == len(TEXT_KINDS) + len(ID_KINDS) + len(NUMBER_KINDS)
    assert not Revision.objects.filter(team=tenant.team).exclude(action=Revision.Action.REFUSED).exists()
    assert "Traceback" not in asgi_server.log(since=log_before)
