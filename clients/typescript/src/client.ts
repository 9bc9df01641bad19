import { ConnectionFailed, errorFromResponse, type MnemoError } from "./errors.js";
import type {
  Bank,
  BankPolicy,
  Context,
  Conversation,
  ConversationImportJob,
  ConversationImportLine,
  EditNoteArgs,
  ForgetMemoryArgs,
  ImportReport,
  Me,
  MemoryPackage,
  MemoryPackageInput,
  Message,
  Mute,
  MutesCreated,
  MuteTarget,
  Note,
  NoteAsOf,
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
  ToolName,
  ToolSignatures,
  TurnComposition,
  Webhook,
  WebhookCreated,
  WebhookDelivery,
  WebhookEventType,
  WriteResult,
} from "./types.js";

export const DEFAULT_URL = "http://127.0.0.1:8000";
export const DEFAULT_TIMEOUT_MS = 30_000;
/** The server's largest page is API_MAX_PAGE_SIZE (200 by default). */
export const DEFAULT_PAGE_SIZE = 100;
export const USER_AGENT = "mnemo-client-ts/0.1.0";

/**
 * When a 429 or 503 is retried: at most `maxRetries` times, sleeping at most `maxWait` seconds in all.
 *
 * The wait is the answer's Retry-After when it gives one, else a short exponential backoff
 * (`backoff` seconds, doubling each retry, at most 8 s). A wait that would take the total past
 * `maxWait` is not slept at all: the error is thrown at once, carrying `retryAfter`, so the caller
 * can decide (queue the work, tell the person).
 */
export interface RetryPolicy {
  maxRetries?: number;
  maxWait?: number;
  backoff?: number;
}

export const DEFAULT_RETRY: Required<RetryPolicy> = { maxRetries: 3, maxWait: 60, backoff: 0.5 };

/** Seconds to sleep before the next try, or null to throw `error` now. */
export function retryDelay(
  policy: Required<RetryPolicy>,
  error: MnemoError,
  retriesDone: number,
  waited: number,
): number | null {
  if ((error.status !== 429 && error.status !== 503) || retriesDone >= policy.maxRetries) return null;
  // Mnemo recorded the person's message before composing failed: sending the turn again would
  // record the message twice. The caller decides.
  if (error.code === "memory_unavailable") return null;
  const wait = error.retryAfter ?? Math.min(8, policy.backoff * 2 ** retriesDone);
  if (waited + wait > policy.maxWait) return null;
  return wait;
}

export interface MnemoOptions {
  /** Mnemo's base URL; else MNEMO_URL (in Node), else http://127.0.0.1:8000. */
  baseUrl?: string;
  /** An agent's API key; else MNEMO_KEY (in Node). */
  apiKey?: string;
  /** Per request, in milliseconds (default 30 s). */
  timeoutMs?: number;
  retry?: RetryPolicy;
  headers?: Record<string, string>;
  /** A fetch of your own (a proxy, a test double); the global fetch by default. */
  fetch?: typeof fetch;
}

type Query = Record<string, string | number | boolean | Date | null | undefined>;

/** The filters of the notes list. */
export interface NotesQuery {
  person?: string;
  bank?: string;
  category?: string;
}

interface Call {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  path: string;
  params?: Query | undefined;
  body?: unknown;
}

function env(name: string): string | undefined {
  // Browsers have no process; bundlers may define an empty one.
  const proc = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return proc?.env?.[name] || undefined;
}

/** A path segment: bank ids and person ids may hold ':' or '/', so everything is escaped. */
function segment(value: string | number): string {
  return encodeURIComponent(String(value));
}

/** Parameters or a body without the ones left undefined or null ("not given"). */
function given<T extends Record<string, unknown>>(values: T): Partial<T> {
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined && value !== null)) as Partial<T>;
}

const sleep = (seconds: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, seconds * 1000));

/**
 * The pages of a list, fetched one after another as you iterate. Iterate it for the items
 * (`for await (const note of mnemo.iterNotes({ person: "ada" }))`), or `.pages()` for whole pages.
 */
export class Paginator<T> implements AsyncIterable<T> {
  constructor(
    private readonly fetchPage: (limit: number, offset: number) => Promise<Page<T>>,
    private readonly pageSize: number,
  ) {}

  async *pages(): AsyncGenerator<Page<T>, void, undefined> {
    let offset = 0;
    while (true) {
      const page = await this.fetchPage(this.pageSize, offset);
      yield page;
      offset += page.results.length;
      if (page.results.length === 0 || offset >= page.count) return;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const page of this.pages()) yield* page.results;
  }

  /** Every item, in one array. */
  async toArray(): Promise<T[]> {
    const items: T[] = [];
    for await (const item of this) items.push(item);
    return items;
  }
}

/**
 * A client for one Mnemo agent key.
 *
 *     const mnemo = new Mnemo({ baseUrl: "http://127.0.0.1:8000", apiKey: "mnemo_..." }); // or MNEMO_URL / MNEMO_KEY
 *     await mnemo.remember({ person: "ada", key: "home-city", description: "Where Ada lives", content: "Oslo" });
 *
 * 429 and 503 answers are retried per `retry` (see RetryPolicy); every other error is thrown at
 * once as a MnemoError subclass.
 */
export class Mnemo {
  readonly baseUrl: string;
  readonly retry: Required<RetryPolicy>;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(options: MnemoOptions = {}) {
    this.baseUrl = (options.baseUrl || env("MNEMO_URL") || DEFAULT_URL).replace(/\/+$/, "");
    const apiKey = options.apiKey || env("MNEMO_KEY");
    if (!apiKey) {
      throw new Error("Pass apiKey or set MNEMO_KEY to an agent's API key (manage.py create_api_key prints one).");
    }
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.fetchImpl = options.fetch ?? ((input, init) => fetch(input, init));
    this.headers = {
      Authorization: `Bearer ${apiKey}`,
      Accept: "application/json",
      ...options.headers,
    };
    // Browsers refuse to set User-Agent on fetch; Node sends it.
    if (!("document" in globalThis)) this.headers["User-Agent"] = USER_AGENT;
  }

  // --- the one way out ------------------------------------------------------------------------

  /** Send one call; return its decoded JSON body or throw a MnemoError. Retries 429/503 per the policy. */
  async request<T>(call: Call): Promise<T> {
    const url = new URL(this.baseUrl + call.path);
    for (const [name, value] of Object.entries(call.params ?? {})) {
      if (value === undefined || value === null) continue;
      url.searchParams.set(name, value instanceof Date ? value.toISOString() : String(value));
    }
    const headers = call.body === undefined ? this.headers : { ...this.headers, "Content-Type": "application/json" };
    const body = call.body === undefined ? undefined : JSON.stringify(call.body);
    let waited = 0;
    let retries = 0;
    while (true) {
      let response: Response;
      try {
        response = await this.fetchImpl(url, {
          method: call.method,
          headers,
          body,
          signal: AbortSignal.timeout(this.timeoutMs),
        });
      } catch (cause) {
        throw new ConnectionFailed(`${call.method} ${call.path}: ${String(cause)}`, {
          code: "connection_failed",
          cause,
          attempts: retries + 1,
        });
      }
      if (response.ok) {
        const text = await response.text();
        return (response.status === 204 || !text ? undefined : JSON.parse(text)) as T;
      }
      const error = await errorFromResponse(response, call, retries + 1);
      const delay = retryDelay(this.retry, error, retries, waited);
      if (delay === null) throw error;
      await sleep(delay);
      waited += delay;
      retries += 1;
    }
  }

  private paginate<T>(path: string, params: Query, pageSize: number): Paginator<T> {
    return new Paginator<T>((limit, offset) => this.request<Page<T>>({ method: "GET", path, params: { ...params, limit, offset } }), pageSize);
  }

  // --- who am I, and people -------------------------------------------------------------------

  /** The team and agent this key acts as, and whether it may administer banks. */
  me(): Promise<Me> {
    return this.request({ method: "GET", path: "/api/v1/me" });
  }

  /** Make a person known ahead of their first conversation (tools also create people on first sight). */
  registerPerson(person: string, options: { displayName?: string } = {}): Promise<Person> {
    return this.request({ method: "POST", path: "/api/v1/people", body: given({ person, display_name: options.displayName }) });
  }

  getPerson(person: string): Promise<Person> {
    return this.request({ method: "GET", path: `/api/v1/people/${segment(person)}` });
  }

  /**
   * Erase everything held about a person in this team (notes, what shared banks say of them,
   * revisions' content, mutes, conversations); needs an admin-capable key. The person stays as a
   * tombstone unless `hard`. Returns what was erased, counted by kind.
   */
  erasePerson(person: string, options: { hard?: boolean } = {}): Promise<PersonErased> {
    const params = options.hard ? { hard: "true" } : undefined;
    return this.request({ method: "DELETE", path: `/api/v1/people/${segment(person)}`, params });
  }

  /**
   * Turn review on or off for a person (needs an admin-capable key): while it is on, what agents and
   * the curator learn about them waits as proposals (listProposals) until it is kept.
   */
  setReviewWrites(person: string, review: boolean): Promise<Person> {
    return this.request({ method: "PATCH", path: `/api/v1/people/${segment(person)}`, body: { review_writes: review } });
  }

  // --- the ten tools --------------------------------------------------------------------------

  /** The tool schemas: mnemo `{name, description, parameters}`, openai or anthropic function-calling form. */
  async tools(format: ToolFormat = "mnemo"): Promise<Record<string, unknown>[]> {
    const answer = await this.request<{ tools: Record<string, unknown>[] }>({ method: "GET", path: "/api/v1/tools", params: { format } });
    return answer.tools;
  }

  /** Run any tool by name with an object of arguments, e.g. the arguments a model wrote. */
  callTool<N extends ToolName>(name: N, args: ToolSignatures[N][0]): Promise<ToolSignatures[N][1]>;
  callTool(name: string, args: Record<string, unknown>): Promise<Record<string, unknown>>;
  callTool(name: string, args: object): Promise<unknown> {
    return this.request({ method: "POST", path: `/api/v1/tools/${segment(name)}`, body: given(args as Record<string, unknown>) });
  }

  /** Create or replace (by key) a note in the private (default), shared or global bank. */
  remember(args: RememberArgs): Promise<WriteResult> {
    return this.callTool("remember", args);
  }

  /** Notes relevant to a query with their full content (BM25 fused with vectors). */
  recallMemories(args: RecallMemoriesArgs): Promise<RecallMemoriesResult> {
    return this.callTool("recall_memories", args);
  }

  /** Delete the note with this key from the narrowest applicable bank that holds it. */
  forgetMemory(args: ForgetMemoryArgs): Promise<WriteResult> {
    return this.callTool("forget_memory", args);
  }

  /** Append an observation to the person's note for a category (in their global bank). */
  rememberAboutUser(args: RememberAboutUserArgs): Promise<WriteResult> {
    return this.callTool("remember_about_user", args);
  }

  /** Append an observation to the project's shared note for a category. */
  rememberAboutProject(args: RememberAboutProjectArgs): Promise<WriteResult> {
    return this.callTool("remember_about_project", args);
  }

  /** Edit a note by id: find_replace (empty content removes the found text) or replace. */
  editNote(args: EditNoteArgs): Promise<WriteResult> {
    return this.callTool("edit_note", args);
  }

  /** Ranked snippets with scores and ids; search before writing to reuse a key. */
  search(args: SearchArgs): Promise<SearchResult> {
    return this.callTool("search", args);
  }

  /** Relevant notes plus their [[key]] neighbours, packed within a character budget. */
  recall(args: RecallArgs): Promise<RecallResult> {
    return this.callTool("recall", args);
  }

  /** The latest messages of this agent's conversations with the person, oldest first. */
  recentMessages(args: RecentMessagesArgs): Promise<RecentMessagesResult> {
    return this.callTool("recent_messages", args);
  }

  /** Search what was said in this agent's conversations with the person. */
  searchConversation(args: SearchConversationArgs): Promise<SearchConversationResult> {
    return this.callTool("search_conversation", args);
  }

  // --- turns ----------------------------------------------------------------------------------

  /** Record the person's message and get what the model is given this turn (POST /api/v1/turns). */
  takeTurn(turn: {
    person: string;
    message: string;
    conversation?: number;
    scope?: string;
    context?: Context;
    profile?: Profile;
    persona?: string;
  }): Promise<TurnComposition> {
    return this.request({ method: "POST", path: "/api/v1/turns", body: given(turn) });
  }

  /** Record the agent's reply to a turn (once; a second reply is a Conflict). */
  reply(turn: number, content: string): Promise<Message> {
    return this.request({ method: "POST", path: `/api/v1/turns/${segment(turn)}/reply`, body: { content } });
  }

  // --- conversations and messages -------------------------------------------------------------

  startConversation(person: string): Promise<Conversation> {
    return this.request({ method: "POST", path: "/api/v1/conversations", body: { person } });
  }

  /** This agent's conversations, newest first. */
  listConversations(options: { person?: string; limit?: number; offset?: number } = {}): Promise<Page<Conversation>> {
    return this.request({ method: "GET", path: "/api/v1/conversations", params: options });
  }

  iterConversations(options: { person?: string; pageSize?: number } = {}): Paginator<Conversation> {
    return this.paginate("/api/v1/conversations", { person: options.person }, options.pageSize ?? DEFAULT_PAGE_SIZE);
  }

  getConversation(conversation: number): Promise<Conversation> {
    return this.request({ method: "GET", path: `/api/v1/conversations/${segment(conversation)}` });
  }

  /** Close the conversation; the curator reads whatever it has not read yet. */
  endConversation(conversation: number): Promise<Conversation> {
    return this.request({ method: "POST", path: `/api/v1/conversations/${segment(conversation)}/end` });
  }

  async deleteConversation(conversation: number): Promise<void> {
    await this.request({ method: "DELETE", path: `/api/v1/conversations/${segment(conversation)}` });
  }

  /** Record a message without composing a turn (history, or a message the agent sent on its own). */
  addMessage(conversation: number, message: { role: Role; content: string; externalId?: string }): Promise<Message> {
    const body = given({ role: message.role, content: message.content, external_id: message.externalId });
    return this.request({ method: "POST", path: `/api/v1/conversations/${segment(conversation)}/messages`, body });
  }

  listMessages(conversation: number, options: { limit?: number; offset?: number } = {}): Promise<Page<Message>> {
    return this.request({ method: "GET", path: `/api/v1/conversations/${segment(conversation)}/messages`, params: options });
  }

  iterMessages(conversation: number, options: { pageSize?: number } = {}): Paginator<Message> {
    return this.paginate(`/api/v1/conversations/${segment(conversation)}/messages`, {}, options.pageSize ?? DEFAULT_PAGE_SIZE);
  }

  /** Erase a message from the record and from every search; a summary it fed is marked stale. */
  async deleteMessage(conversation: number, message: number): Promise<void> {
    await this.request({ method: "DELETE", path: `/api/v1/conversations/${segment(conversation)}/messages/${segment(message)}` });
  }

  // --- history import -------------------------------------------------------------------------

  /**
   * Import conversation history (one object per JSON line), idempotent by external id.
   *
   * The messages are recorded at once (a bad line is refused with its number and nothing is
   * written); the returned job then shows how far embedding has come (getConversationImport).
   */
  importConversations(lines: ConversationImportLine[]): Promise<ConversationImportJob> {
    return this.request({ method: "POST", path: "/api/v1/conversations/import", body: lines });
  }

  /** A history import's counts and embedding progress. */
  getConversationImport(job: number): Promise<ConversationImportJob> {
    return this.request({ method: "GET", path: `/api/v1/conversations/imports/${segment(job)}` });
  }

  // --- notes ----------------------------------------------------------------------------------

  /**
   * One page of notes. With `asOf` (a past moment, or a date: the end of that day in UTC), the notes
   * as they stood then, rebuilt from the revision log; an erased note is in no past view.
   */
  listNotes(options: NotesQuery & { asOf: string | Date; limit?: number; offset?: number }): Promise<Page<NoteAsOf>>;
  listNotes(options?: NotesQuery & { limit?: number; offset?: number }): Promise<Page<Note>>;
  listNotes(
    options: NotesQuery & { asOf?: string | Date; limit?: number; offset?: number } = {},
  ): Promise<Page<Note | NoteAsOf>> {
    const { asOf, ...filters } = options;
    return this.request({ method: "GET", path: "/api/v1/notes", params: { ...filters, as_of: asOf } });
  }

  /** Every note that matches, page after page (oldest first). */
  iterNotes(options: { person?: string; bank?: string; category?: string; pageSize?: number } = {}): Paginator<Note> {
    const { pageSize, ...filters } = options;
    return this.paginate("/api/v1/notes", filters, pageSize ?? DEFAULT_PAGE_SIZE);
  }

  getNote(note: number): Promise<Note> {
    return this.request({ method: "GET", path: `/api/v1/notes/${segment(note)}` });
  }

  /**
   * Delete a note and its vector; the revision log keeps the event and what the note said. With
   * `erase` (an admin-capable key), erase it, as the lens does: its content leaves the log too, the
   * messages it was learned from are erased and the summaries they fed cleared; the answer's
   * `erased` counts what went.
   */
  deleteNote(note: number, options: { erase?: boolean } = {}): Promise<NoteDeleted> {
    const params = options.erase ? { erase: "true" } : undefined;
    return this.request({ method: "DELETE", path: `/api/v1/notes/${segment(note)}`, params });
  }

  // --- banks and revisions --------------------------------------------------------------------

  listBanks(options: { person?: string; limit?: number; offset?: number } = {}): Promise<Page<Bank>> {
    return this.request({ method: "GET", path: "/api/v1/banks", params: options });
  }

  iterBanks(options: { person?: string; pageSize?: number } = {}): Paginator<Bank> {
    return this.paginate("/api/v1/banks", { person: options.person }, options.pageSize ?? DEFAULT_PAGE_SIZE);
  }

  /** A bank by id, e.g. user:ada, user:ada:project:apollo or scope:project:apollo. */
  getBank(bank: string): Promise<Bank> {
    return this.request({ method: "GET", path: `/api/v1/banks/${segment(bank)}` });
  }

  /** Change a bank's policy (curated, bounded) or limits; needs an admin-capable key. */
  updateBank(
    bank: string,
    changes: { policy?: BankPolicy; softLimit?: number; hardLimit?: number; capacity?: number },
  ): Promise<Bank> {
    const body = given({
      policy: changes.policy,
      soft_limit: changes.softLimit,
      hard_limit: changes.hardLimit,
      capacity: changes.capacity,
    });
    return this.request({ method: "PATCH", path: `/api/v1/banks/${segment(bank)}`, body });
  }

  listRevisions(
    options: { note?: number; person?: string; bank?: string; limit?: number; offset?: number } = {},
  ): Promise<Page<Revision>> {
    return this.request({ method: "GET", path: "/api/v1/revisions", params: options });
  }

  iterRevisions(options: { note?: number; person?: string; bank?: string; pageSize?: number } = {}): Paginator<Revision> {
    const { pageSize, ...filters } = options;
    return this.paginate("/api/v1/revisions", filters, pageSize ?? DEFAULT_PAGE_SIZE);
  }

  // --- memory packages ------------------------------------------------------------------------

  /** Import a memory package (idempotent by key); refused notes are reported, the rest import. */
  importMemories(memoryPackage: MemoryPackageInput | MemoryPackage | Record<string, unknown>[]): Promise<ImportReport> {
    return this.request({ method: "POST", path: "/api/v1/imports", body: memoryPackage });
  }

  /** Everything memory holds about one person, as a package importMemories takes back. */
  exportMemories(person: string): Promise<MemoryPackage> {
    return this.request({ method: "GET", path: "/api/v1/exports", params: { person } });
  }

  // --- review: proposals (admin-capable key) ---------------------------------------------------

  /** What waits for (or was decided on) people's review, oldest first. */
  listProposals(options: { person?: string; status?: ProposalStatus; limit?: number; offset?: number } = {}): Promise<Page<Proposal>> {
    return this.request({ method: "GET", path: "/api/v1/proposals", params: options });
  }

  iterProposals(options: { person?: string; status?: ProposalStatus; pageSize?: number } = {}): Paginator<Proposal> {
    const { pageSize, ...filters } = options;
    return this.paginate("/api/v1/proposals", filters, pageSize ?? DEFAULT_PAGE_SIZE);
  }

  /**
   * Keep a proposal: it is written through the write path (caps and the FULL latch apply, and refuse
   * as for any write), with `content` instead of the proposed text when given.
   */
  approveProposal(proposal: number, options: { content?: string } = {}): Promise<ProposalKept> {
    return this.request({ method: "POST", path: `/api/v1/proposals/${segment(proposal)}/approve`, body: given(options) });
  }

  /** Don't keep a proposal: nothing is written, and its words are blanked. */
  rejectProposal(proposal: number): Promise<Proposal> {
    return this.request({ method: "POST", path: `/api/v1/proposals/${segment(proposal)}/reject` });
  }

  // --- the retrieval audit and mutes (admin-capable key) --------------------------------------

  /** The team's reads, newest first: what each agent asked about a person and which notes came back. */
  listReads(
    options: { person?: string; agent?: string; tool?: string; since?: Date | string; until?: Date | string; limit?: number; offset?: number } = {},
  ): Promise<Page<Read>> {
    return this.request({ method: "GET", path: "/api/v1/reads", params: options });
  }

  iterReads(
    options: { person?: string; agent?: string; tool?: string; since?: Date | string; until?: Date | string; pageSize?: number } = {},
  ): Paginator<Read> {
    const { pageSize, ...filters } = options;
    return this.paginate("/api/v1/reads", filters, pageSize ?? DEFAULT_PAGE_SIZE);
  }

  /** The team's mutes, oldest first. */
  listMutes(options: { person?: string; agent?: string; limit?: number; offset?: number } = {}): Promise<Page<Mute>> {
    return this.request({ method: "GET", path: "/api/v1/mutes", params: options });
  }

  iterMutes(options: { person?: string; agent?: string; pageSize?: number } = {}): Paginator<Mute> {
    const { pageSize, ...filters } = options;
    return this.paginate("/api/v1/mutes", filters, pageSize ?? DEFAULT_PAGE_SIZE);
  }

  /**
   * Mute a category, or one note (its id), of what is known about a person for one agent (its slug),
   * or for every agent of the team when none is named: that agent is not given the notes, the
   * messages they were learned from or the summaries built from those until unmuted. Nothing is
   * deleted. Name exactly one of category and note. Answers one mute per agent.
   */
  mute(mute: MuteTarget): Promise<MutesCreated> {
    return this.request({ method: "POST", path: "/api/v1/mutes", body: given(mute) });
  }

  /** Remove a mute: the agent is given everything it withheld again. */
  async unmute(mute: number): Promise<void> {
    await this.request({ method: "DELETE", path: `/api/v1/mutes/${segment(mute)}` });
  }

  // --- webhooks (admin-capable key) -----------------------------------------------------------

  /** The team's webhook subscriptions, oldest first (never their secrets). */
  listWebhooks(options: { limit?: number; offset?: number } = {}): Promise<Page<Webhook>> {
    return this.request({ method: "GET", path: "/api/v1/webhooks", params: options });
  }

  iterWebhooks(options: { pageSize?: number } = {}): Paginator<Webhook> {
    return this.paginate("/api/v1/webhooks", {}, options.pageSize ?? DEFAULT_PAGE_SIZE);
  }

  /**
   * POST events of these types (note.created, note.updated, note.deleted, note.erased,
   * person.erased, proposal.created) about the team's people to `url`. The answer's `secret` signs
   * every delivery and is shown this once (without one given, Mnemo makes one); check deliveries
   * with verifySignature. A URL on a private address is refused (Invalid, field `url`).
   */
  subscribeWebhook(subscription: { url: string; events: WebhookEventType[]; secret?: string }): Promise<WebhookCreated> {
    return this.request({ method: "POST", path: "/api/v1/webhooks", body: given(subscription) });
  }

  /** Unsubscribe: nothing more is sent, and the delivery log goes. */
  async deleteWebhook(webhook: number): Promise<void> {
    await this.request({ method: "DELETE", path: `/api/v1/webhooks/${segment(webhook)}` });
  }

  /** A subscription's delivery log, newest first: status, attempts, last answer, next try. */
  webhookDeliveries(webhook: number, options: { limit?: number; offset?: number } = {}): Promise<Page<WebhookDelivery>> {
    return this.request({ method: "GET", path: `/api/v1/webhooks/${segment(webhook)}/deliveries`, params: options });
  }

  iterWebhookDeliveries(webhook: number, options: { pageSize?: number } = {}): Paginator<WebhookDelivery> {
    return this.paginate(`/api/v1/webhooks/${segment(webhook)}/deliveries`, {}, options.pageSize ?? DEFAULT_PAGE_SIZE);
  }
}
