/**
 * The shapes Mnemo sends and takes, named from the generated OpenAPI types (src/schema.ts).
 *
 * Results are the JSON bodies as Mnemo answers them (timestamps stay ISO 8601 strings). Tool
 * arguments keep the API's snake_case names (`source_messages`, `expires_at`): they are the same
 * objects a model writes against the tools' JSON schemas.
 */
import type { components } from "./schema.js";
import type { TOOL_SCHEMAS } from "./tool-schemas.js";

type Schemas = components["schemas"];

/** The ten agent tools, in the order GET /api/v1/tools lists them. */
export const TOOL_NAMES = [
  "remember",
  "recall_memories",
  "forget_memory",
  "remember_about_user",
  "remember_about_project",
  "edit_note",
  "search",
  "recall",
  "recent_messages",
  "search_conversation",
] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

type ToolRequired<N extends ToolName> = Extract<(typeof TOOL_SCHEMAS)[number], { name: N }>["parameters"]["required"][number];

/**
 * A tool's arguments: the OpenAPI request type, with only what the tool's JSON schema requires
 * required (the OpenAPI schema lists every argument as required, most as nullable).
 */
type ToolArgs<N extends ToolName, T> = Pick<T, ToolRequired<N> & keyof T> & Partial<Omit<T, ToolRequired<N>>>;

export type RememberArgs = ToolArgs<"remember", Schemas["RememberArgsRequest"]>;
export type RecallMemoriesArgs = ToolArgs<"recall_memories", Schemas["RecallMemoriesArgsRequest"]>;
export type ForgetMemoryArgs = ToolArgs<"forget_memory", Schemas["ForgetMemoryArgsRequest"]>;
export type RememberAboutUserArgs = ToolArgs<"remember_about_user", Schemas["RememberAboutUserArgsRequest"]>;
export type RememberAboutProjectArgs = ToolArgs<"remember_about_project", Schemas["RememberAboutProjectArgsRequest"]>;
export type EditNoteArgs = ToolArgs<"edit_note", Schemas["EditNoteArgsRequest"]>;
export type SearchArgs = ToolArgs<"search", Schemas["SearchArgsRequest"]>;
export type RecallArgs = ToolArgs<"recall", Schemas["RecallArgsRequest"]>;
export type RecentMessagesArgs = ToolArgs<"recent_messages", Schemas["RecentMessagesArgsRequest"]>;
export type SearchConversationArgs = ToolArgs<"search_conversation", Schemas["SearchConversationArgsRequest"]>;

/** Each tool's arguments and result, by name (for callTool and the AI SDK helper). */
export interface ToolSignatures {
  remember: [RememberArgs, WriteResult];
  recall_memories: [RecallMemoriesArgs, RecallMemoriesResult];
  forget_memory: [ForgetMemoryArgs, WriteResult];
  remember_about_user: [RememberAboutUserArgs, WriteResult];
  remember_about_project: [RememberAboutProjectArgs, WriteResult];
  edit_note: [EditNoteArgs, WriteResult];
  search: [SearchArgs, SearchResult];
  recall: [RecallArgs, RecallResult];
  recent_messages: [RecentMessagesArgs, RecentMessagesResult];
  search_conversation: [SearchConversationArgs, SearchConversationResult];
}

/**
 * What a write did: `action` is created, updated, unchanged or deleted; or, while the person reviews
 * what is kept (HTTP 202), a Proposed answer: `status` "proposed", `id` null and `proposal` the id of
 * what waits for their approval (approveProposal / rejectProposal).
 */
export type WriteResult = Schemas["WriteOut"] | Proposed;
/** A write made while the person reviews what is kept: it waits as a proposal (HTTP 202). */
export type Proposed = Schemas["ProposedOut"];
export type RecallMemoriesResult = Schemas["RecallMemoriesOut"];
export type SearchResult = Schemas["SearchOut"];
export type RecallResult = Schemas["RecallOut"];
export type RecentMessagesResult = Schemas["RecentMessagesOut"];
export type SearchConversationResult = Schemas["SearchConversationOut"];

export type Me = Schemas["WhoAmIOutput"];
export type Person = Schemas["PersonOutput"];
export type PersonErased = Schemas["PersonErased"];
export type Context = Schemas["ContextInputRequest"];
export type Profile = Schemas["ProfileEnum"];
export type Role = Schemas["RoleEnum"];
export type TurnComposition = Schemas["TurnComposition"];
export type Conversation = Schemas["ConversationOutput"];
export type Message = Schemas["MessageOutput"];
export type ConversationImportLine = Schemas["ConversationImportLineRequest"];
export type ConversationImportJob = Schemas["ImportJobOutput"];
export type Note = Schemas["NoteOutput"];
/** A note as it stood at a past moment (`listNotes({ asOf })`): no source or repetitions, which the log does not keep. */
export type NoteAsOf = Schemas["NoteAsOfOutput"];
export type NoteDeleted = Schemas["NoteDeleted"];
export type Bank = Schemas["BankOutput"];
export type BankPolicy = Schemas["PolicyEnum"];
export type Revision = Schemas["RevisionOutput"];
export type MemoryPackage = Schemas["MemoryPackage"];
export type MemoryPackageInput = Schemas["MemoryPackageRequest"];
export type ImportReport = Schemas["ImportReport"];
export type Read = Schemas["ReadOutput"];
export type Mute = Schemas["MuteOutput"];
export type MutesCreated = Schemas["MutesCreated"];
/** What to mute: a category, or one note (its id), never both; for one agent (slug) or, without one, every agent. */
export type MuteTarget =
  | { person: string; category: string; note?: never; agent?: string }
  | { person: string; note: number; category?: never; agent?: string };
/** A write waiting for (or decided on) the person's review; a decided proposal's words are blank. */
export type Proposal = Schemas["ProposalOutput"];
export type ProposalStatus = Schemas["ProposalOutputStatusEnum"];
/** A kept proposal and what its write did. */
export type ProposalKept = Schemas["ProposalKept"];
export type WebhookEventType = Schemas["EventsEnum"];
/** A webhook subscription: events of these types about the team's people are POSTed to url. */
export type Webhook = Schemas["SubscriptionOutput"];
/** A new subscription, with the signing secret: shown this once (verifySignature needs it). */
export type WebhookCreated = Schemas["SubscriptionCreated"];
/** One event for one subscription, and what became of sending it. */
export type WebhookDelivery = Schemas["DeliveryOutput"];
export type ToolFormat = "mnemo" | "openai" | "anthropic";

/** The JSON body a webhook receiver gets (check X-Mnemo-Signature with verifySignature before parsing it). */
export interface WebhookEvent {
  id: string;
  type: WebhookEventType;
  created_at: string;
  data: Record<string, unknown>;
}

/** One page of a list: `{count, next, previous, results}`. */
export interface Page<T> {
  count: number;
  next?: string | null;
  previous?: string | null;
  results: T[];
}
