"""AsyncMnemo: the asynchronous client, with the same methods as Mnemo (mnemo_client._sync), awaited."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from typing import Any, Unpack

import httpx

from mnemo_client import _core
from mnemo_client._core import Call, RetryPolicy, query, segment, tool_call
from mnemo_client.errors import ConnectionFailed, error_from_response
from mnemo_client.types import (
    AsOf,
    Bank,
    Context,
    Conversation,
    ConversationImportJob,
    EditNoteArgs,
    ForgetMemoryArgs,
    ImportReport,
    Me,
    MemoryPackage,
    Message,
    Mute,
    Note,
    NoteDeleted,
    Page,
    Person,
    PersonErased,
    Profile,
    Proposal,
    ProposalKept,
    ProposalStatus,
    Read,
    RecallArgs,
    RecallMemoriesArgs,
    RecallMemoriesResult,
    RecallResult,
    RecentMessagesArgs,
    RecentMessagesResult,
    RememberAboutProjectArgs,
    RememberAboutUserArgs,
    RememberArgs,
    Revision,
    Role,
    SearchArgs,
    SearchConversationArgs,
    SearchConversationResult,
    SearchResult,
    ToolFormat,
    TurnComposition,
    Webhook,
    WebhookCreated,
    WebhookDelivery,
    WriteResult,
)


class AsyncMnemo:
    """A client for one Mnemo agent key.

        async with AsyncMnemo("http://127.0.0.1:8000", api_key="mnemo_...") as mnemo:  # or MNEMO_URL / MNEMO_KEY
            await mnemo.remember(person="ada", key="home-city", description="Where Ada lives", content="Oslo")

    429 and 503 answers are retried per `retry` (see RetryPolicy); every other error is raised
    at once as a MnemoError subclass. Use it as an async context manager, or await close().
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = _core.DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url, api_key = _core.settings(base_url, api_key)
        self.retry = retry if retry is not None else RetryPolicy()
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._headers = _core.headers(api_key, headers)

    async def close(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncMnemo:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- the one way out ----------------------------------------------------------------------

    async def request(self, call: Call) -> Any:
        """Send one call; return its decoded JSON body or raise a MnemoError. Retries 429/503 per the policy."""
        waited, retries = 0.0, 0
        while True:
            try:
                response = await self._http.request(
                    call.method, self.base_url + call.path, params=call.params, json=call.body, headers=self._headers
                )
            except httpx.TransportError as exc:
                raise ConnectionFailed(f"{call.method} {call.path}: {exc!r}", code="connection_failed") from exc
            if response.is_success:
                return _core.decode(response)
            error = error_from_response(response, attempts=retries + 1)
            delay = self.retry.delay(error, retries_done=retries, waited=waited)
            if delay is None:
                raise error
            await asyncio.sleep(delay)
            waited += delay
            retries += 1

    async def _pages(self, path: str, params: dict[str, Any], page_size: int) -> AsyncIterator[Any]:
        offset = 0
        while True:
            page = await self.request(Call("GET", path, params={**params, "limit": page_size, "offset": offset}))
            for item in page["results"]:
                yield item
            offset += len(page["results"])
            if not page["results"] or offset >= page["count"]:
                return

    # --- who am I ------------------------------------------------------------------------------

    async def me(self) -> Me:
        """The team and agent this key acts as, and whether it may administer banks."""
        return await self.request(Call("GET", "/api/v1/me"))

    async def register_person(self, person: str, *, display_name: str | None = None) -> Person:
        """Make a person known ahead of their first conversation (tools also create people on first sight)."""
        return await self.request(Call("POST", "/api/v1/people", body=query(person=person, display_name=display_name)))

    async def get_person(self, person: str) -> Person:
        return await self.request(Call("GET", f"/api/v1/people/{segment(person)}"))

    async def erase_person(self, person: str, *, hard: bool = False) -> PersonErased:
        """Erase everything held about a person in this team (notes, what shared banks say of them,
        revisions' content, mutes, conversations); needs an admin-capable key. The person stays as a
        tombstone unless hard=True. Returns what was erased, counted by kind."""
        params = {"hard": "true"} if hard else None
        return await self.request(Call("DELETE", f"/api/v1/people/{segment(person)}", params=params))

    async def set_review_writes(self, person: str, review: bool) -> Person:
        """Turn review on or off for a person (needs an admin-capable key): while it is on, what agents
        and the curator learn about them waits as proposals (list_proposals) until it is kept."""
        return await self.request(Call("PATCH", f"/api/v1/people/{segment(person)}", body={"review_writes": review}))

    # --- the ten tools -------------------------------------------------------------------------

    async def tools(self, format: ToolFormat = "mnemo") -> list[dict[str, Any]]:
        """The tool schemas: mnemo {name, description, parameters}, openai or anthropic function-calling form."""
        return (await self.request(Call("GET", "/api/v1/tools", params={"format": format})))["tools"]

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Run any tool by name with a dict of arguments, e.g. the arguments a model wrote."""
        return await self.request(tool_call(name, arguments))

    async def remember(self, **args: Unpack[RememberArgs]) -> WriteResult:
        """Create or replace (by key) a note in the private (default), shared or global bank."""
        return await self.request(tool_call("remember", args))

    async def recall_memories(self, **args: Unpack[RecallMemoriesArgs]) -> RecallMemoriesResult:
        """Notes relevant to a query with their full content (BM25 fused with vectors)."""
        return await self.request(tool_call("recall_memories", args))

    async def forget_memory(self, **args: Unpack[ForgetMemoryArgs]) -> WriteResult:
        """Delete the note with this key from the narrowest applicable bank that holds it."""
        return await self.request(tool_call("forget_memory", args))

    async def remember_about_user(self, **args: Unpack[RememberAboutUserArgs]) -> WriteResult:
        """Append an observation to the person's note for a category (in their global bank)."""
        return await self.request(tool_call("remember_about_user", args))

    async def remember_about_project(self, **args: Unpack[RememberAboutProjectArgs]) -> WriteResult:
        """Append an observation to the project's shared note for a category."""
        return await self.request(tool_call("remember_about_project", args))

    async def edit_note(self, **args: Unpack[EditNoteArgs]) -> WriteResult:
        """Edit a note by id: find_replace (empty content removes the found text) or replace."""
        return await self.request(tool_call("edit_note", args))

    async def search(self, **args: Unpack[SearchArgs]) -> SearchResult:
        """Ranked snippets with scores and ids; search before writing to reuse a key."""
        return await self.request(tool_call("search", args))

    async def recall(self, **args: Unpack[RecallArgs]) -> RecallResult:
        """Relevant notes plus their [[key]] neighbours, packed within a character budget."""
        return await self.request(tool_call("recall", args))

    async def recent_messages(self, **args: Unpack[RecentMessagesArgs]) -> RecentMessagesResult:
        """The latest messages of this agent's conversations with the person, oldest first."""
        return await self.request(tool_call("recent_messages", args))

    async def search_conversation(self, **args: Unpack[SearchConversationArgs]) -> SearchConversationResult:
        """Search what was said in this agent's conversations with the person."""
        return await self.request(tool_call("search_conversation", args))

    # --- turns ---------------------------------------------------------------------------------

    async def take_turn(
        self,
        *,
        person: str,
        message: str,
        conversation: int | None = None,
        scope: str | None = None,
        context: Context | None = None,
        profile: Profile | None = None,
        persona: str | None = None,
    ) -> TurnComposition:
        """Record the person's message and get what the model is given this turn (POST /api/v1/turns)."""
        body = query(
            person=person, message=message, conversation=conversation, scope=scope, context=context,
            profile=profile, persona=persona,
        )  # fmt: skip
        return await self.request(Call("POST", "/api/v1/turns", body=body))

    async def reply(self, turn: int, content: str) -> Message:
        """Record the agent's reply to a turn (once; a second reply is a Conflict)."""
        return await self.request(Call("POST", f"/api/v1/turns/{segment(turn)}/reply", body={"content": content}))

    # --- conversations and messages ------------------------------------------------------------

    async def start_conversation(self, person: str) -> Conversation:
        return await self.request(Call("POST", "/api/v1/conversations", body={"person": person}))

    async def list_conversations(
        self, *, person: str | None = None, limit: int | None = None, offset: int | None = None
    ) -> Page[Conversation]:
        """This agent's conversations, newest first."""
        return await self.request(
            Call("GET", "/api/v1/conversations", params=query(person=person, limit=limit, offset=offset))
        )

    def iter_conversations(
        self, *, person: str | None = None, page_size: int = _core.DEFAULT_PAGE_SIZE
    ) -> AsyncIterator[Conversation]:
        return self._pages("/api/v1/conversations", query(person=person), page_size)

    async def get_conversation(self, conversation: int) -> Conversation:
        return await self.request(Call("GET", f"/api/v1/conversations/{segment(conversation)}"))

    async def end_conversation(self, conversation: int) -> Conversation:
        """Close the conversation; the curator reads whatever it has not read yet."""
        return await self.request(Call("POST", f"/api/v1/conversations/{segment(conversation)}/end"))

    async def delete_conversation(self, conversation: int) -> None:
        await self.request(Call("DELETE", f"/api/v1/conversations/{segment(conversation)}"))

    async def add_message(
        self, conversation: int, *, role: Role, content: str, external_id: str | None = None
    ) -> Message:
        """Record a message without composing a turn (history, or a message the agent sent on its own)."""
        body = query(role=role, content=content, external_id=external_id)
        return await self.request(Call("POST", f"/api/v1/conversations/{segment(conversation)}/messages", body=body))

    async def list_messages(
        self, conversation: int, *, limit: int | None = None, offset: int | None = None
    ) -> Page[Message]:
        path = f"/api/v1/conversations/{segment(conversation)}/messages"
        return await self.request(Call("GET", path, params=query(limit=limit, offset=offset)))

    def iter_messages(self, conversation: int, *, page_size: int = _core.DEFAULT_PAGE_SIZE) -> AsyncIterator[Message]:
        return self._pages(f"/api/v1/conversations/{segment(conversation)}/messages", {}, page_size)

    async def delete_message(self, conversation: int, message: int) -> None:
        """Erase a message from the record and from every search; a summary it fed is marked stale."""
        await self.request(Call("DELETE", f"/api/v1/conversations/{segment(conversation)}/messages/{segment(message)}"))

    # --- history import ------------------------------------------------------------------------

    async def import_conversations(self, lines: list[dict[str, Any]]) -> ConversationImportJob:
        """Import conversation history (one dict per JSON line), idempotent by external id.

        The messages are recorded at once (a bad line is refused with its number and nothing is
        written); the returned job then shows how far embedding has come (get_conversation_import).
        """
        return await self.request(Call("POST", "/api/v1/conversations/import", body=lines))

    async def get_conversation_import(self, job: int) -> ConversationImportJob:
        """A history import's counts and embedding progress."""
        return await self.request(Call("GET", f"/api/v1/conversations/imports/{segment(job)}"))

    # --- notes ---------------------------------------------------------------------------------

    async def list_notes(
        self,
        *,
        person: str | None = None,
        bank: str | None = None,
        category: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        as_of: AsOf | None = None,
    ) -> Page[Note]:
        """The notes that match; with as_of, as they stood then (rebuilt from the revision log)."""
        params = query(person=person, bank=bank, category=category, limit=limit, offset=offset, as_of=as_of)
        return await self.request(Call("GET", "/api/v1/notes", params=params))

    def iter_notes(
        self,
        *,
        person: str | None = None,
        bank: str | None = None,
        category: str | None = None,
        page_size: int = _core.DEFAULT_PAGE_SIZE,
        as_of: AsOf | None = None,
    ) -> AsyncIterator[Note]:
        """Every note that matches, page after page (oldest first)."""
        return self._pages("/api/v1/notes", query(person=person, bank=bank, category=category, as_of=as_of), page_size)

    async def get_note(self, note: int) -> Note:
        return await self.request(Call("GET", f"/api/v1/notes/{segment(note)}"))

    async def delete_note(self, note: int, *, erase: bool = False) -> NoteDeleted:
        """Delete a note and its vector; the revision log keeps the event and what the note said.
        With erase=True (an admin-capable key), erase it, as the lens does: its content leaves the log
        too, the messages it was learned from are erased and the summaries they fed cleared; the
        answer's `erased` counts what went."""
        params = {"erase": "true"} if erase else None
        return await self.request(Call("DELETE", f"/api/v1/notes/{segment(note)}", params=params))

    # --- banks and revisions -------------------------------------------------------------------

    async def list_banks(
        self, *, person: str | None = None, limit: int | None = None, offset: int | None = None
    ) -> Page[Bank]:
        return await self.request(Call("GET", "/api/v1/banks", params=query(person=person, limit=limit, offset=offset)))

    def iter_banks(self, *, person: str | None = None, page_size: int = _core.DEFAULT_PAGE_SIZE) -> AsyncIterator[Bank]:
        return self._pages("/api/v1/banks", query(person=person), page_size)

    async def get_bank(self, bank: str) -> Bank:
        """A bank by id, e.g. user:ada, user:ada:project:apollo or scope:project:apollo."""
        return await self.request(Call("GET", f"/api/v1/banks/{segment(bank)}"))

    async def update_bank(
        self,
        bank: str,
        *,
        policy: str | None = None,
        soft_limit: int | None = None,
        hard_limit: int | None = None,
        capacity: int | None = None,
    ) -> Bank:
        """Change a bank's policy (curated, bounded) or limits; needs an admin-capable key."""
        body = query(policy=policy, soft_limit=soft_limit, hard_limit=hard_limit, capacity=capacity)
        return await self.request(Call("PATCH", f"/api/v1/banks/{segment(bank)}", body=body))

    async def list_revisions(
        self,
        *,
        note: int | None = None,
        person: str | None = None,
        bank: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> Page[Revision]:
        params = query(note=note, person=person, bank=bank, limit=limit, offset=offset)
        return await self.request(Call("GET", "/api/v1/revisions", params=params))

    def iter_revisions(
        self,
        *,
        note: int | None = None,
        person: str | None = None,
        bank: str | None = None,
        page_size: int = _core.DEFAULT_PAGE_SIZE,
    ) -> AsyncIterator[Revision]:
        return self._pages("/api/v1/revisions", query(note=note, person=person, bank=bank), page_size)

    async def reads(
        self,
        person: str | None = None,
        *,
        agent: str | None = None,
        tool: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> Page[Read]:
        """The retrieval audit, newest first: what agents looked up (about `person`, by `agent`, with
        `tool`, in [since, until)) and what came back, as ids. Needs an admin-capable key."""
        params = query(person=person, agent=agent, tool=tool, since=since, until=until, limit=limit, offset=offset)
        return await self.request(Call("GET", "/api/v1/reads", params=params))

    def iter_reads(
        self,
        person: str | None = None,
        *,
        agent: str | None = None,
        tool: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        page_size: int = _core.DEFAULT_PAGE_SIZE,
    ) -> AsyncIterator[Read]:
        params = query(person=person, agent=agent, tool=tool, since=since, until=until)
        return self._pages("/api/v1/reads", params, page_size)

    # --- proposals (review) ---------------------------------------------------------------------

    async def list_proposals(
        self,
        *,
        person: str | None = None,
        status: ProposalStatus | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> Page[Proposal]:
        """What waits for (or was decided on) people's review, oldest first; needs an admin-capable key."""
        params = query(person=person, status=status, limit=limit, offset=offset)
        return await self.request(Call("GET", "/api/v1/proposals", params=params))

    def iter_proposals(
        self,
        *,
        person: str | None = None,
        status: ProposalStatus | None = None,
        page_size: int = _core.DEFAULT_PAGE_SIZE,
    ) -> AsyncIterator[Proposal]:
        return self._pages("/api/v1/proposals", query(person=person, status=status), page_size)

    async def approve_proposal(self, proposal: int, *, content: str | None = None) -> ProposalKept:
        """Keep a proposal: it is written through the write path (caps and the FULL latch apply, and
        refuse as for any write), with `content` instead of the proposed text when given."""
        return await self.request(
            Call("POST", f"/api/v1/proposals/{segment(proposal)}/approve", body=query(content=content))
        )

    async def reject_proposal(self, proposal: int) -> Proposal:
        """Don't keep a proposal: nothing is written, and its words are blanked."""
        return await self.request(Call("POST", f"/api/v1/proposals/{segment(proposal)}/reject"))

    # --- mutes ---------------------------------------------------------------------------------

    async def list_mutes(
        self,
        *,
        person: str | None = None,
        agent: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> Page[Mute]:
        """The team's mutes, oldest first; needs an admin-capable key."""
        params = query(person=person, agent=agent, limit=limit, offset=offset)
        return await self.request(Call("GET", "/api/v1/mutes", params=params))

    async def mute(
        self, person: str, *, category: str | None = None, note: int | None = None, agent: str | None = None
    ) -> list[Mute]:
        """Mute a category, or one note (its id), of what is known about a person for one agent (its
        slug), or for every agent of the team: that agent is not given the notes, the messages they
        were learned from or the summaries built from those until unmuted. Nothing is deleted. Name
        exactly one of category and note; needs an admin-capable key. Answers one mute per agent."""
        body = query(person=person, category=category, note=note, agent=agent)
        created = await self.request(Call("POST", "/api/v1/mutes", body=body))
        return list(created["mutes"])

    async def unmute(self, mute: int) -> None:
        """Remove a mute: the agent is given everything it withheld again."""
        await self.request(Call("DELETE", f"/api/v1/mutes/{segment(mute)}"))

    # --- memory packages -----------------------------------------------------------------------

    async def import_memories(self, package: MemoryPackage | list[dict[str, Any]]) -> ImportReport:
        """Import a memory package (idempotent by key); refused notes are reported, the rest import."""
        return await self.request(Call("POST", "/api/v1/imports", body=_core.jsonable(package)))

    async def export_memories(self, person: str) -> MemoryPackage:
        """Everything memory holds about one person, as a package import_memories takes back."""
        return await self.request(Call("GET", "/api/v1/exports", params={"person": person}))

    # --- webhooks (an admin-capable key) -------------------------------------------------------

    async def webhooks(self, *, limit: int | None = None, offset: int | None = None) -> Page[Webhook]:
        """The team's webhook subscriptions (never their secrets)."""
        return await self.request(Call("GET", "/api/v1/webhooks", params=query(limit=limit, offset=offset)))

    async def subscribe_webhook(self, url: str, events: list[str], *, secret: str | None = None) -> WebhookCreated:
        """POST events of these types (note.created, note.updated, note.deleted, note.erased, person.erased,
        proposal.created) about the team's people to url. The answer's `secret` signs every delivery and
        is shown this once (without one given, Mnemo makes one); check deliveries with verify_signature."""
        body = query(url=url, events=list(events), secret=secret)
        return await self.request(Call("POST", "/api/v1/webhooks", body=body))

    async def delete_webhook(self, webhook: int) -> None:
        """Unsubscribe: nothing more is sent, and the delivery log goes."""
        await self.request(Call("DELETE", f"/api/v1/webhooks/{segment(webhook)}"))

    async def webhook_deliveries(
        self, webhook: int, *, limit: int | None = None, offset: int | None = None
    ) -> Page[WebhookDelivery]:
        """A subscription's delivery log, newest first: status, attempts, last answer, next try."""
        params = query(limit=limit, offset=offset)
        return await self.request(Call("GET", f"/api/v1/webhooks/{segment(webhook)}/deliveries", params=params))
