"""The shapes Mnemo sends and takes, as TypedDicts: plain dicts at run time, typed for editors and checkers.

Results are the JSON bodies as Mnemo answers them (timestamps stay ISO 8601 strings); the
OpenAPI schema at /api/schema/ is the contract they follow. The *Args dicts are the tools'
keyword arguments: every tool takes `person`, and optionally `scope` and `context`.
"""

from datetime import date, datetime
from typing import Any, Generic, Literal, NotRequired, Required, TypedDict, TypeVar

T = TypeVar("T")

NoteKind = Literal["identity", "preference", "fact", "ephemeral", "page", "daily"]
BankChoice = Literal["private", "shared", "global"]
Profile = Literal["full", "memory_only"]
Role = Literal["user", "assistant"]
ToolFormat = Literal["mnemo", "openai", "anthropic"]


class Context(TypedDict, total=False):
    """What a turn is about: concrete refs ({"project": ["P"]}) and ontology tags; decides which notes apply."""

    refs: dict[str, list[str]]
    tags: list[str]


# --- tool arguments ---------------------------------------------------------------------------


class ToolArgs(TypedDict, total=False):
    person: Required[str]  # the agent platform's id for the person; created on first sight
    scope: str  # where the conversation happens, e.g. "project:apollo"
    context: Context


class SourcedArgs(ToolArgs, total=False):
    source_messages: list[int]  # ids of your messages with this person the note was learned from
    turn: int  # the turn the note is written during


class RememberArgs(SourcedArgs, total=False):
    key: Required[str]  # normalised to a slug: "Home City" and home_city are both home-city
    description: Required[str]
    content: Required[str]
    kind: NoteKind
    category: str
    bank: BankChoice
    scope_refs: dict[str, list[str]]
    semantics: list[str]
    expires_at: datetime | str  # a datetime with a timezone, or ISO 8601 text


AsOf = datetime | date | str
"""A past moment: a datetime (naive is read as UTC), a date (the end of that day, UTC) or ISO 8601 text."""


class RecallMemoriesArgs(ToolArgs, total=False):
    query: Required[str]
    limit: int
    as_of: AsOf  # answer with the notes as they stood then


class ForgetMemoryArgs(ToolArgs, total=False):
    key: Required[str]
    reason: str


class RememberAboutUserArgs(SourcedArgs, total=False):
    observation: Required[str]
    category: Required[str]
    summary: str


class RememberAboutProjectArgs(RememberAboutUserArgs, total=False):
    project: Required[str]


class EditNoteArgs(SourcedArgs, total=False):
    id: Required[int]
    mode: Required[Literal["find_replace", "replace"]]
    content: Required[str]
    find: str


class SearchArgs(ToolArgs, total=False):
    query: Required[str]
    limit: int
    as_of: AsOf  # answer with the notes as they stood then


class RecallArgs(ToolArgs, total=False):
    query: Required[str]
    budget_chars: int
    depth: int
    max_per_source: int
    as_of: AsOf  # answer with the notes as they stood then


class RecentMessagesArgs(ToolArgs, total=False):
    conversation: int
    limit: int


class SearchConversationArgs(ToolArgs, total=False):
    query: str  # a query, or around, or both
    limit: int
    around: int  # a message id: that message and its neighbours, whole


# --- tool results -----------------------------------------------------------------------------


class Evicted(TypedDict):
    id: int
    key: str
    kind: str
    reason: str


class WriteResult(TypedDict):
    """What a write did: action is created, updated, unchanged or deleted; or, while the person
    reviews what is kept (HTTP 202), proposed: status is "proposed", id is None and `proposal` is
    the id of what waits for their approval."""

    id: int | None
    bank: str
    key: str
    action: str
    evicted: list[Evicted]
    status: NotRequired[Literal["proposed"]]
    proposal: NotRequired[int]
    message: NotRequired[str]


class RecallMemoriesHit(TypedDict):
    id: int
    bank: str
    key: str
    description: str
    content: str
    score: float


class RecallMemoriesResult(TypedDict):
    results: list[RecallMemoriesHit]
    degraded: list[str]


class SearchHit(TypedDict):
    id: int
    bank: str
    key: str
    snippet: str
    score: float


class SearchResult(TypedDict):
    results: list[SearchHit]
    degraded: list[str]


class RecallItem(TypedDict):
    id: int
    bank: str
    key: str
    content: str
    via: str
    truncated: bool


class Omitted(TypedDict):
    id: int
    key: str
    chars: int
    reason: str


class RecallResult(TypedDict):
    items: list[RecallItem]
    used_chars: int
    omitted: list[Omitted]
    degraded: list[str]


class ToolMessage(TypedDict):
    id: int
    conversation: int
    role: str
    content: str
    created_at: str


class RecentMessagesResult(TypedDict):
    messages: list[ToolMessage]


class MessageWindow(TypedDict):
    start: int
    end: int
    length: int


class ConversationHit(TypedDict):
    message_id: int
    conversation: int
    role: str
    snippet: str  # the message whole, or the sentences of it that match best
    window: MessageWindow  # where the snippet sits in the message
    score: float
    created_at: str


class SearchConversationResult(TypedDict):
    results: list[ConversationHit]
    around: NotRequired[list[ToolMessage]]  # with around: the message and its neighbours


# --- resources --------------------------------------------------------------------------------


class Page(TypedDict, Generic[T]):
    """One page of a list: `count` is the total; iterate every page with the iter_* methods."""

    count: int
    next: str | None
    previous: str | None
    results: list[T]


class Me(TypedDict):
    team: str
    agent: str
    agent_name: str
    key_prefix: str
    can_admin: bool


class Person(TypedDict):
    person: str
    display_name: str
    review_writes: bool  # what agents learn about them waits for their approval
    created_at: str


class Block(TypedDict):
    layer: str  # persona, last_exchange, summary, notes, passages, deeper_window
    text: str
    chars: int


class ChatMessage(TypedDict):
    role: Role
    content: str


class TurnComposition(TypedDict):
    """What the model is given this turn: blocks (system text by layer) and messages (the window)."""

    turn: int
    conversation: int
    blocks: list[Block]
    messages: list[ChatMessage]
    costs: dict[str, int]
    ceiling: int
    degraded: list[str]
    notes_used: list[int]


class Conversation(TypedDict):
    id: int
    person: str
    agent: str
    started_at: str
    ended_at: str | None
    summary: str
    summary_updated_at: str | None
    summary_stale: bool
    curation_pending: bool
    last_curated_at: str | None
    last_curation_outcome: str


class Message(TypedDict):
    id: int
    conversation: int
    role: str
    content: str
    order: int
    created_at: str
    external_id: str
    erased_at: str | None  # set when the message was erased: content is then ""


class ConversationImportJob(TypedDict):
    """A history import: what it recorded and skipped, and how far embedding has come.

    status is "embedding" while messages wait for their vectors, "done" when none wait, and
    "not_embedding" when the server has no embedder configured.
    """

    id: int
    url: str
    created_at: str
    status: str
    lines: int
    conversations_created: int
    conversations_matched: int
    messages_created: int
    messages_present: int
    messages_embedded: int
    passages_embedded: int
    messages_waiting: int
    messages_deleted: int
    embedder: str


class Note(TypedDict):
    id: int
    bank: str
    person: str | None
    key: str
    description: str
    content: str
    kind: str
    category: str
    scope_refs: dict[str, list[str]]
    semantics: list[str]
    source: NotRequired[str]  # absent as of a date: the revision log does not keep it
    repetitions: NotRequired[int]  # absent as of a date, likewise
    created_at: str
    updated_at: str
    expires_at: str | None
    as_of: NotRequired[str]  # present as of a date: the moment the note stood like this


class NoteErased(TypedDict):
    """What erasing a note took with it, besides the note and its vector."""

    revisions: int  # revisions whose content was blanked
    messages: int  # messages it was learned from, now tombstones
    summaries: int  # conversation summaries those messages fed, cleared until rebuilt


class NoteDeleted(TypedDict):
    id: int
    bank: str
    key: str
    action: str  # deleted, or erased
    erased: NotRequired[NoteErased]  # only when erased


class PersonErased(TypedDict):
    """What erase_person removed: counts by kind (notes, revisions, conversations, messages, ...)."""

    person: str
    erased: dict[str, int]
    person_row: str  # tombstone, or deleted


class Consolidation(TypedDict):
    pending: bool
    requested_at: str | None
    last_run_at: str | None
    last_outcome: str


class Bank(TypedDict):
    id: str  # user:<person>:<scope> (private), scope:<scope> (shared), user:<person> (global)
    kind: str
    person: str | None
    scope: str
    policy: str  # curated or bounded
    count: int
    soft_limit: int
    hard_limit: int
    capacity: int
    full: bool
    full_since: str | None
    consolidation: Consolidation


class Revision(TypedDict):
    id: int
    bank: str
    note: int | None
    note_key: str
    action: str
    actor: str
    actor_ref: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    reason: str
    request_id: str
    erased: bool
    created_at: str


class RankedNote(TypedDict):
    id: int
    rank: int  # 1 for the best-ranked result


class RankedMessage(TypedDict):
    id: int
    rank: int
    conversation: int  # 0 if the message was erased since


class Read(TypedDict):
    """One read of the retrieval audit: what an agent looked up about a person, ids and counts only."""

    id: int
    tool: str  # the read tool called, or "turn" for a composed turn
    agent: str
    person: str
    query: str  # empty for a turn, and once blanked by an erasure
    query_erased: bool
    turn: int | None
    as_of: str | None  # the past moment an as_of read asked about; None for the present
    notes: list[RankedNote]
    messages: list[RankedMessage]
    note_count: int
    message_count: int
    degraded: list[str]
    latency_ms: float
    created_at: str


ProposalStatus = Literal["pending", "kept", "rejected", "expired"]


class Proposal(TypedDict):
    """A write waiting for (or decided on) the person's review; a decided one's words are blank."""

    id: int
    person: str
    agent: str | None
    writer: str  # agent or curator
    operation: str  # remember, append, edit or daily
    status: ProposalStatus
    bank: str
    note: int | None  # an edit's note; once kept, the note it wrote
    key: str
    description: str
    content: str
    find: str
    kind: str
    category: str
    source_messages: list[int]
    created_at: str
    expires_at: str | None
    decided_at: str | None


class ProposalKept(TypedDict):
    proposal: Proposal
    note: int | None
    bank: str
    key: str
    action: str


class Mute(TypedDict):
    """A person's mute for one agent: a category (note None) or one note (category None)."""

    id: int
    person: str
    agent: str
    category: str | None
    note: int | None
    created_at: str


class ImportRefusal(TypedDict):
    bank: str
    key: str
    code: str
    message: str


class ImportReport(TypedDict):
    created: int
    updated: int
    unchanged: int
    refused: int
    refusals: list[ImportRefusal]
    evicted: list[dict[str, Any]]


class MemoryPackage(TypedDict, total=False):
    """A memory package (format mnemo.memory-package, versioned): what export_memories returns and import_memories takes."""

    format: Required[str]
    version: Required[int]
    exported_at: str
    team: str
    person: dict[str, Any]
    mutes: list[dict[str, Any]]
    banks: Required[list[dict[str, Any]]]
    revisions: list[dict[str, Any]]
    withheld: dict[str, Any]
    conversations: list[dict[str, Any]]  # version 2


WebhookEventType = Literal[
    "note.created", "note.updated", "note.deleted", "note.erased", "person.erased", "proposal.created"
]


class Webhook(TypedDict):
    """A webhook subscription: events of these types about the team's people are POSTed to url."""

    id: int
    url: str
    events: list[str]
    agent: str
    created_at: str


class WebhookCreated(Webhook):
    """A new subscription, with the signing secret: shown this once (verify_signature needs it)."""

    secret: str


class WebhookDelivery(TypedDict):
    """One event for one subscription, and what became of sending it."""

    id: int  # sent as X-Mnemo-Delivery
    event: str  # the body's id
    type: str
    subject: str
    status: str  # pending, delivered or failed
    attempts: int
    last_status_code: int | None
    last_error: str
    last_attempt_at: str | None
    next_attempt_at: str | None
    delivered_at: str | None
    created_at: str


class WebhookEvent(TypedDict):
    """The JSON body a receiver gets."""

    id: str
    type: str
    created_at: str
    data: dict[str, Any]
