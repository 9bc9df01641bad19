"""The agent tools: one definition per tool (arguments, result, handler) serves REST and MCP.

Arguments are pydantic models so each tool's JSON schema comes from the same definition that
validates a call. Caps appear in the schemas (maxLength) so callers know them, but pydantic does
not enforce them: the write path does, answering 422 too_long and logging the refusal, the same
for every caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from time import perf_counter
from typing import Annotated, Any, Literal

from django.db import transaction
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from accounts.models import Agent, ApiKey, Person, Team
from accounts.services import get_or_create_person
from config.exceptions import DomainError
from config.text import INT64_MAX, AsOf, Identifier, Line, Text, find_unstorable
from memory import as_of, provenance, queries, recall, replica_reads, services
from memory.banks import applicable_banks
from memory.exceptions import InvalidArguments, NoteNotFound
from memory.models import CONTENT_MAX, DESCRIPTION_MAX, KEY_MAX, Bank, Note, Proposal
from memory.services.reads import record_read
from memory.validation import validate_scope


@dataclass(frozen=True)
class ToolContext:
    team: Team
    agent: Agent
    api_key: ApiKey | None
    request_id: str = ""

    @property
    def actor(self) -> services.Actor:
        return services.Actor.for_agent(self.agent, self.request_id)

    def record_read(self, *, person: Person, tool: str, started: float, **found: Any) -> None:
        """The retrieval audit's one call per read tool: what this agent asked about the person,
        and the ids that came back (memory.services.reads)."""
        record_read(
            team=self.team, agent=self.agent, person=person, tool=tool, started=started,
            request_id=self.request_id, **found,
        )  # fmt: skip


# --- argument models --------------------------------------------------------------------------


def _cap(limit: int) -> dict[str, Any]:
    """A cap shown in the schema but left to the write path to enforce (422 too_long, logged)."""
    return {"maxLength": limit}


class Context(BaseModel):
    model_config = ConfigDict(extra="forbid")
    refs: dict[Identifier, list[Identifier]] = Field(
        default_factory=dict, description='Concrete references of this turn, e.g. {"project": ["P"]}.'
    )
    tags: list[Identifier] = Field(default_factory=list, description="Ontology ids this turn is about.")


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    person: Identifier = Field(min_length=1, max_length=200, description="The agent platform's id for the person.")
    scope: Identifier | None = Field(
        default=None, max_length=200, description="Where the conversation happens, e.g. project:apollo."
    )
    context: Context | None = Field(default=None, description="What this turn is about; decides which notes apply.")

    def turn_context(self) -> queries.TurnContext:
        if self.context is None:
            return queries.TurnContext()
        return queries.TurnContext(refs=self.context.refs, tags=self.context.tags)


class SourcedArgs(ToolArgs):
    """A write that may say where it came from (the lens shows it; erasing the note erases them)."""

    source_messages: list[Annotated[int, Field(ge=1, le=INT64_MAX)]] | None = Field(
        default=None,
        max_length=50,
        description="Ids of your messages with this person the note was learned from (as recent_messages "
        "and search_conversation return them).",
    )
    turn: int | None = Field(default=None, ge=1, le=INT64_MAX, description="The turn this note is written during.")

    def source_request(self, ctx: ToolContext, person: Person) -> provenance.SourceRequest:
        return provenance.SourceRequest(ctx.team, ctx.agent, person, list(self.source_messages or []), self.turn)


class RememberArgs(SourcedArgs):
    key: Identifier = Field(
        description="A short slug naming the fact; remembering an existing key replaces it.",
        json_schema_extra=_cap(KEY_MAX),
    )
    description: Line = Field(
        description="One line saying what the note is (at most 200 characters).",
        json_schema_extra=_cap(DESCRIPTION_MAX),
    )
    content: Text = Field(
        description="The fact itself, plain text (at most 2,000 characters). Link notes with [[key]].",
        json_schema_extra=_cap(CONTENT_MAX),
    )
    kind: Literal["identity", "preference", "fact", "ephemeral", "page", "daily"] = "fact"
    category: Identifier | None = Field(
        default=None, description="A label such as preferences.", json_schema_extra=_cap(KEY_MAX)
    )
    bank: Literal["private", "shared", "global"] = Field(
        default="private",
        description="private: this person here; shared: everyone in the scope; global: this person everywhere.",
    )
    scope_refs: dict[Identifier, list[Identifier]] | None = Field(
        default=None, description='Limit the note to references, e.g. {"project": ["P"], "work_item": ["A", "B"]}.'
    )
    semantics: list[Identifier] | None = Field(default=None, description="Exact ontology ids the note is about.")
    expires_at: datetime | None = Field(
        default=None, description="When the note stops applying (ISO 8601); it is then removed and logged."
    )


AS_OF_DESCRIPTION = (
    "Answer with the notes as they stood at this past moment (ISO 8601 with a timezone, or a date: the end "
    "of that day, UTC), rebuilt from the revision log; erased notes never appear. Omit it for the present."
)


class RecallMemoriesArgs(ToolArgs):
    query: Text = Field(min_length=1, max_length=2000)
    limit: int = Field(default=5, ge=1, le=50)
    as_of: AsOf | None = Field(default=None, description=AS_OF_DESCRIPTION)


class ForgetMemoryArgs(ToolArgs):
    key: Identifier = Field(json_schema_extra=_cap(KEY_MAX))
    reason: Line | None = Field(default=None, max_length=500)


class RememberAboutUserArgs(SourcedArgs):
    observation: Text = Field(
        description="One observation to append to the category's note.", json_schema_extra=_cap(CONTENT_MAX)
    )
    category: Identifier = Field(
        description="A label such as preferences; one note per category.", json_schema_extra=_cap(KEY_MAX)
    )
    summary: Line | None = Field(
        default=None,
        description="A one-line digest of the whole category.",
        json_schema_extra=_cap(DESCRIPTION_MAX),
    )


class RememberAboutProjectArgs(RememberAboutUserArgs):
    project: Identifier = Field(
        min_length=1, max_length=150, description="The project's id; the note goes to its shared bank."
    )


class EditNoteArgs(SourcedArgs):
    id: int = Field(ge=1, le=INT64_MAX, description="The note's id, as returned by the remember tools.")
    mode: Literal["find_replace", "replace"]
    find: Text | None = Field(
        default=None, description="find_replace: the exact text to replace.", json_schema_extra=_cap(CONTENT_MAX)
    )
    content: Text = Field(
        description="The replacement (empty removes the found text) or the whole new content.",
        json_schema_extra=_cap(CONTENT_MAX),
    )


class SearchArgs(ToolArgs):
    query: Text = Field(min_length=1, max_length=2000)
    limit: int = Field(default=10, ge=1, le=50)
    as_of: AsOf | None = Field(default=None, description=AS_OF_DESCRIPTION)


class RecallArgs(ToolArgs):
    query: Text = Field(min_length=1, max_length=2000)
    budget_chars: int = Field(default=4000, ge=100, le=50_000)
    depth: int = Field(default=1, ge=0, le=3)
    max_per_source: int = Field(default=1000, ge=50, le=10_000)
    as_of: AsOf | None = Field(default=None, description=AS_OF_DESCRIPTION)


# --- result models ----------------------------------------------------------------------------


class Evicted(BaseModel):
    id: int
    key: str
    kind: str
    reason: str


class WriteOut(BaseModel):
    id: int | None
    bank: str
    key: str
    action: str
    evicted: list[Evicted] = Field(default_factory=list, description="Notes a bounded bank evicted to make room.")


class ProposedOut(WriteOut):
    """A write made while the person reviews what is kept: it waits for their approval (HTTP 202)."""

    status: Literal["proposed"] = "proposed"
    proposal: int = Field(description="The proposal's id; the person (or an admin) keeps it or not.")
    message: str = Field(description="What happens next, in words.")


class RecallMemoriesHit(BaseModel):
    id: int
    bank: str
    key: str
    description: str
    content: str
    score: float


class RecallMemoriesOut(BaseModel):
    results: list[RecallMemoriesHit]
    degraded: list[str] = Field(default_factory=list, description='Signals that could not be used, e.g. "vectors".')


class SearchHit(BaseModel):
    id: int
    bank: str
    key: str
    snippet: str
    score: float


class SearchOut(BaseModel):
    results: list[SearchHit]
    degraded: list[str] = Field(default_factory=list, description='Signals that could not be used, e.g. "vectors".')


class RecallItem(BaseModel):
    id: int
    bank: str
    key: str
    content: str
    via: str
    truncated: bool


class Omitted(BaseModel):
    id: int
    key: str
    chars: int
    reason: str


class RecallOut(BaseModel):
    items: list[RecallItem]
    used_chars: int
    omitted: list[Omitted]
    degraded: list[str] = Field(default_factory=list, description='Signals that could not be used, e.g. "vectors".')


# --- handlers ---------------------------------------------------------------------------------


def _person(ctx: ToolContext, args: ToolArgs) -> Person:
    return get_or_create_person(team=ctx.team, external_id=args.person)


def _write_out(result: services.WriteResult, note_id: int | None = None) -> dict[str, Any]:
    return WriteOut(
        id=result.note.pk if result.note is not None else note_id,
        bank=result.bank.address,
        key=result.key,
        action=result.action,
        evicted=[Evicted(**e) for e in result.evicted],
    ).model_dump()


def _checked_sources(ctx: ToolContext, args: SourcedArgs, person: Person, operation: str) -> provenance.Recorder | None:
    """The recorder of the sources a write names. A source that is not the caller's is refused
    before the write, and logged like any refused write."""
    try:
        return provenance.resolve_sources(args.source_request(ctx, person))
    except DomainError as exc:
        services.record_refused_call(
            team=ctx.team, actor=ctx.actor, operation=operation, arguments=args.model_dump(mode="json"),
            message=exc.message, field=exc.field,
        )  # fmt: skip
        raise


def _proposed(ctx: ToolContext, args: SourcedArgs, person: Person, tool: str, **what: Any) -> dict[str, Any]:
    """The write kept for the person's review (memory.services.proposals) instead of made, with the
    sources it names (checked as a write's are)."""
    _checked_sources(ctx, args, person, tool)
    proposal = services.propose(
        team=ctx.team, person=person, agent=ctx.agent, actor=ctx.actor, source_messages=args.source_messages or [],
        turn_id=args.turn, **what,
    )  # fmt: skip
    return ProposedOut(
        id=None,
        bank=proposal.bank_ref,
        key=proposal.key,
        action="proposed",
        proposal=proposal.pk,
        message="The person reviews what agents keep about them: this waits for their approval and is not "
        "remembered until they keep it.",
    ).model_dump()


def _sourced(
    ctx: ToolContext, args: SourcedArgs, person: Person, operation: str, write: Callable[[], services.WriteResult]
) -> services.WriteResult:
    """Run a write and record the sources it names in the same transaction. A source that is not the
    caller's is refused before the write, and logged like any refused write."""
    record = _checked_sources(ctx, args, person, operation)
    if record is None:
        return write()
    refused: DomainError | None = None
    with transaction.atomic():
        try:
            result = write()
        except DomainError as exc:  # the write path logged the refusal: that row must commit
            refused = exc
        else:
            if result.note is not None:
                record(result.note)
    if refused is not None:
        raise refused
    return result


def run_remember(ctx: ToolContext, args: RememberArgs) -> dict[str, Any]:
    person = _person(ctx, args)
    if services.under_review(person, ctx.actor):
        return _proposed(
            ctx, args, person, "remember", operation=Proposal.Operation.REMEMBER, bank=args.bank,
            scope=args.scope or "", key=args.key, description=args.description, content=args.content,
            kind=args.kind, category=args.category,
            details={"scope_refs": args.scope_refs, "semantics": args.semantics, "expires_at": args.expires_at},
        )  # fmt: skip
    result = _sourced(ctx, args, person, "remember", lambda: services.remember(
        team=ctx.team,
        person=person,
        actor=ctx.actor,
        key=args.key,
        description=args.description,
        content=args.content,
        scope=args.scope or "",
        bank=args.bank,
        kind=args.kind,
        category=args.category,
        scope_refs=args.scope_refs,
        semantics=args.semantics,
        expires_at=args.expires_at,
    ))  # fmt: skip
    return _write_out(result)


def _recall(ctx: ToolContext, args: RecallMemoriesArgs | SearchArgs, tool: str) -> recall.Ranked:
    """recall_memories and search rank the same way; they differ in what they return of each hit."""
    started = perf_counter()
    person = _person(ctx, args)
    if args.as_of is not None:  # the past: a separate path, never taken by a present-time read
        ranked = as_of.recall_memories_as_of(
            team=ctx.team, person=person, agent=ctx.agent, moment=args.as_of, query=args.query, limit=args.limit,
            scope=args.scope or "", context=args.turn_context(),
        )  # fmt: skip
    else:
        with replica_reads.reading_for(person):
            ranked = recall.recall_memories(
                team=ctx.team,
                person=person,
                agent=ctx.agent,
                query=args.query,
                limit=args.limit,
                scope=args.scope or "",
                context=args.turn_context(),
            )
    ctx.record_read(
        person=person, tool=tool, started=started, query=args.query, as_of=args.as_of,
        notes=[h.note.pk for h in ranked.hits], degraded=ranked.degraded,
    )  # fmt: skip
    return ranked


def run_recall_memories(ctx: ToolContext, args: RecallMemoriesArgs) -> dict[str, Any]:
    ranked = _recall(ctx, args, "recall_memories")
    return RecallMemoriesOut(
        degraded=ranked.degraded,
        results=[
            RecallMemoriesHit(
                id=h.note.pk,
                bank=h.note.bank.address,
                key=h.note.key,
                description=h.note.description,
                content=h.note.content,
                score=round(h.score, 6),
            )
            for h in ranked.hits
        ],
    ).model_dump()


def run_forget_memory(ctx: ToolContext, args: ForgetMemoryArgs) -> dict[str, Any]:
    result, note_id = services.forget(
        team=ctx.team,
        person=_person(ctx, args),
        actor=ctx.actor,
        key=args.key,
        scope=args.scope or "",
        context_refs=args.context.refs if args.context else None,
        reason=args.reason or "",
    )
    return _write_out(result, note_id)


def run_remember_about_user(ctx: ToolContext, args: RememberAboutUserArgs) -> dict[str, Any]:
    person = _person(ctx, args)
    if services.under_review(person, ctx.actor):
        return _proposed(
            ctx, args, person, "remember_about_user", operation=Proposal.Operation.APPEND, bank=Bank.Kind.GLOBAL,
            category=args.category, content=args.observation, description=args.summary or "",
        )  # fmt: skip
    result = _sourced(ctx, args, person, "remember_about_user", lambda: services.append_observation(
        team=ctx.team,
        person=person,
        actor=ctx.actor,
        category=args.category,
        observation=args.observation,
        summary=args.summary,
        bank=Bank.Kind.GLOBAL,
    ))  # fmt: skip
    return _write_out(result)


def run_remember_about_project(ctx: ToolContext, args: RememberAboutProjectArgs) -> dict[str, Any]:
    person = _person(ctx, args)
    if services.under_review(person, ctx.actor):
        return _proposed(
            ctx, args, person, "remember_about_project", operation=Proposal.Operation.APPEND, bank=Bank.Kind.SHARED,
            scope=f"project:{args.project}", category=args.category, content=args.observation,
            description=args.summary or "",
        )  # fmt: skip
    result = _sourced(ctx, args, person, "remember_about_project", lambda: services.append_observation(
        team=ctx.team,
        person=person,
        actor=ctx.actor,
        category=args.category,
        observation=args.observation,
        summary=args.summary,
        bank=Bank.Kind.SHARED,
        scope=f"project:{args.project}",
    ))  # fmt: skip
    return _write_out(result)


def reachable_note(ctx: ToolContext, person: Person, scope: str, note_id: int) -> Note:
    """A note this call may touch: in the person's own banks, or the shared bank of this scope, and
    not muted for this agent (editing by find_replace would otherwise reveal what a mute hides)."""
    note = (
        Note.objects.for_team(ctx.team)
        .unmuted_for(ctx.agent, person=person)
        .select_related("bank")
        .filter(pk=note_id)
        .filter(bank__in=applicable_banks(team=ctx.team, person=person, scope=scope) + list(person.banks.all()))
        .order_by("pk")
        .first()
    )
    if note is None:
        raise NoteNotFound(f"No note {note_id} is reachable for this person and scope.", field="id")
    return note


def run_edit_note(ctx: ToolContext, args: EditNoteArgs) -> dict[str, Any]:
    person = _person(ctx, args)
    note = reachable_note(ctx, person, validate_scope(args.scope), args.id)
    if services.under_review(person, ctx.actor):
        return _proposed(
            ctx, args, person, "edit_note", operation=Proposal.Operation.EDIT, note=note, content=args.content,
            find=args.find or "", details={"mode": args.mode},
        )  # fmt: skip
    result = _sourced(ctx, args, person, "edit_note", lambda: services.edit_note(
        note=note, actor=ctx.actor, mode=args.mode, find=args.find, content=args.content
    ))  # fmt: skip
    return _write_out(result)


def run_search(ctx: ToolContext, args: SearchArgs) -> dict[str, Any]:
    ranked = _recall(ctx, args, "search")
    return SearchOut(
        degraded=ranked.degraded,
        results=[
            SearchHit(
                id=h.note.pk,
                bank=h.note.bank.address,
                key=h.note.key,
                snippet=recall.snippet(h.note, h.matched),
                score=round(h.score, 6),
            )
            for h in ranked.hits
        ],
    ).model_dump()


def run_recall(ctx: ToolContext, args: RecallArgs) -> dict[str, Any]:
    started = perf_counter()
    person = _person(ctx, args)
    if args.as_of is not None:  # the past: a separate path, never taken by a present-time read
        bundle = as_of.recall_bundle_as_of(
            team=ctx.team, person=person, agent=ctx.agent, moment=args.as_of, query=args.query,
            budget_chars=args.budget_chars, depth=args.depth, max_per_source=args.max_per_source,
            scope=args.scope or "", context=args.turn_context(),
        )  # fmt: skip
    else:
        with replica_reads.reading_for(person):
            bundle = recall.recall_bundle(
                team=ctx.team,
                person=person,
                agent=ctx.agent,
                query=args.query,
                budget_chars=args.budget_chars,
                depth=args.depth,
                max_per_source=args.max_per_source,
                scope=args.scope or "",
                context=args.turn_context(),
            )
    ctx.record_read(
        person=person, tool="recall", started=started, query=args.query, as_of=args.as_of,
        notes=[i.note.pk for i in bundle.items], degraded=bundle.degraded,
    )  # fmt: skip
    return RecallOut(
        items=[
            RecallItem(
                id=i.note.pk,
                bank=i.note.bank.address,
                key=i.note.key,
                content=i.content,
                via=i.via,
                truncated=i.truncated,
            )
            for i in bundle.items
        ],
        used_chars=bundle.used_chars,
        omitted=[Omitted(**o) for o in bundle.omitted],
        degraded=bundle.degraded,
    ).model_dump()


# --- the registry -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args: type[ToolArgs]
    result: type[BaseModel]
    run: Callable[[ToolContext, Any], dict[str, Any]]
    # Error statuses this tool adds to those every call can meet (400, 401, 413, 415, 429): the schema documents them.
    errors: tuple[int, ...] = (422,)
    writes: bool = False  # a refused call of a writing tool is logged in the revision log
    # While the person reviews what is kept, the call answers 202 with a ProposedOut instead.
    proposes: bool = False

    def json_schema(self) -> dict[str, Any]:
        """The tool in function-calling form: name, description and JSON-schema parameters."""
        return {"name": self.name, "description": self.description, "parameters": self.args.model_json_schema()}

    def parse(self, data: Any) -> ToolArgs:
        """The call's arguments, or InvalidArguments naming the first bad field. REST and MCP both parse here."""
        if not isinstance(data, dict):
            raise InvalidArguments("The body must be a JSON object of arguments.")
        # REST bodies were checked by the parser already; MCP arguments arrive here unchecked.
        if (problem := find_unstorable(data)) is not None:
            raise _invalid_argument(problem.field, problem.message)
        try:
            return self.args.model_validate(data)
        except PydanticValidationError as exc:
            first = exc.errors()[0]
            location = ".".join(str(part) for part in first["loc"]) or "body"
            # Our own validators' messages (config.text) read better without "Value error, " before them.
            message = str(first["ctx"]["error"]) if first["type"] == "value_error" else first["msg"]
            raise _invalid_argument(location, message) from None

    def refuse(self, ctx: ToolContext, arguments: Any, *, message: str, field: str | None = None) -> None:
        """A writing tool's call refused before the write path (malformed arguments or body) is still a
        refused write: log it in the revision log like the refusals the write path logs itself."""
        if not self.writes:
            return
        services.record_refused_call(
            team=ctx.team, actor=ctx.actor, operation=self.name, arguments=arguments, message=message, field=field
        )


def _invalid_argument(field: str, message: str) -> InvalidArguments:
    # Worded as the API words every malformed field (config.errors): the message starts with the field.
    return InvalidArguments(f"{field}: {message}" if field else message, field=field or None)


REGISTRY: dict[str, Tool] = {}


def register(tool: Tool) -> Tool:
    if tool.name in REGISTRY:
        raise ValueError(f"Tool {tool.name} is registered twice.")
    REGISTRY[tool.name] = tool
    return tool


for _tool in [
    Tool(
        "remember",
        "Remember a fact about the person or the work under a short key. Remembering an existing key "
        "replaces it (a correction, not a second note). Search first to avoid synonyms.",
        RememberArgs,
        WriteOut,
        run_remember,
        errors=(409, 422),
        writes=True,
        proposes=True,
    ),
    Tool(
        "recall_memories",
        "Find remembered notes relevant to a query and return their full content.",
        RecallMemoriesArgs,
        RecallMemoriesOut,
        run_recall_memories,
    ),
    Tool(
        "forget_memory",
        "Forget the note with this key (the narrowest applicable bank that holds it).",
        ForgetMemoryArgs,
        WriteOut,
        run_forget_memory,
        errors=(404, 422),
        writes=True,
    ),
    Tool(
        "remember_about_user",
        "Append an observation about the person to their note for a category (one note per category, "
        "kept in their global bank).",
        RememberAboutUserArgs,
        WriteOut,
        run_remember_about_user,
        errors=(409, 422),
        writes=True,
        proposes=True,
    ),
    Tool(
        "remember_about_project",
        "Append an observation about a project to its shared note for a category.",
        RememberAboutProjectArgs,
        WriteOut,
        run_remember_about_project,
        errors=(409, 422),
        writes=True,
        proposes=True,
    ),
    Tool(
        "edit_note",
        "Edit a note by id: find_replace replaces the found text (empty content removes it); replace "
        "rewrites the whole content.",
        EditNoteArgs,
        WriteOut,
        run_edit_note,
        errors=(404, 422),
        writes=True,
        proposes=True,
    ),
    Tool(
        "search",
        "Ranked snippets of what is remembered, with scores and ids. Use it before writing to find an "
        "existing key or category.",
        SearchArgs,
        SearchOut,
        run_search,
    ),
    Tool(
        "recall",
        "Assemble context on a topic: relevant notes plus the notes they link to with [[key]], packed "
        "within a character budget.",
        RecallArgs,
        RecallOut,
        run_recall,
    ),
]:
    register(_tool)
