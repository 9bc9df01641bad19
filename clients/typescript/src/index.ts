export {
  DEFAULT_PAGE_SIZE,
  DEFAULT_RETRY,
  DEFAULT_TIMEOUT_MS,
  DEFAULT_URL,
  Mnemo,
  Paginator,
  retryDelay,
  type MnemoOptions,
  type NotesQuery,
  type RetryPolicy,
} from "./client.js";
export * from "./errors.js";
export * from "./types.js";
export { verifySignature } from "./webhooks.js";
export type { components, operations, paths } from "./schema.js";
export { TOOL_SCHEMAS } from "./tool-schemas.js";
