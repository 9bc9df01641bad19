/**
 * Typed errors. Every error Mnemo answers, `{"error": {"code", "message", "field"?}}`, becomes one of
 * these; catch `MnemoError` for all of them, or a subclass for one case:
 *
 *     try {
 *       await mnemo.remember({ person: "ada", key: "home", description: "Where Ada lives", content: text });
 *     } catch (error) {
 *       if (error instanceof BankFull) { ... }      // 409 bank_full: offer the person to drop something old
 *       else if (error instanceof TooLong) { ... }  // 422 too_long: error.field names the input
 *       else throw error;
 *     }
 */

export interface MnemoErrorInit {
  status?: number | null;
  code?: string;
  field?: string | null;
  retryAfter?: number | null;
  requestId?: string | null;
  attempts?: number;
  body?: unknown;
  cause?: unknown;
}

/**
 * An error answered by Mnemo (or the failure to reach it).
 *
 * `status`: the HTTP status (null when no answer came back); `code`, `message`, `field`: from the
 * error body; `retryAfter`: the seconds the server asked to wait (429, 503), when it said;
 * `requestId`: the X-Request-ID to quote when asking an operator; `attempts`: requests made,
 * retries included; `body`: the answer's body as it came.
 */
export class MnemoError extends Error {
  readonly status: number | null;
  readonly code: string;
  readonly field: string | null;
  readonly retryAfter: number | null;
  readonly requestId: string | null;
  readonly attempts: number;
  readonly body: unknown;

  constructor(message: string, init: MnemoErrorInit = {}) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.status = init.status ?? null;
    this.code = init.code ?? "error";
    this.field = init.field ?? null;
    this.retryAfter = init.retryAfter ?? null;
    this.requestId = init.requestId ?? null;
    this.attempts = init.attempts ?? 1;
    this.body = init.body;
  }

  override toString(): string {
    const where = this.field ? ` (${this.field})` : "";
    const status = this.status !== null ? `${this.status} ` : "";
    return `${this.name}: ${status}${this.code}${where}: ${this.message}`;
  }
}

/** Mnemo could not be reached, or did not answer in time (no status). */
export class ConnectionFailed extends MnemoError {}

/** 400: malformed input; `field` names the parameter or argument to fix. */
export class Invalid extends MnemoError {}

/** 401: the API key is missing, unknown, revoked or malformed. */
export class AuthenticationError extends MnemoError {}

/** 403: the key may not do this (changing a bank needs an admin-capable key). */
export class PermissionDenied extends MnemoError {}

/** 404: nothing with that id in your team (another team's ids are not found either). */
export class NotFound extends MnemoError {}

/** 409: the write conflicts with what is stored (code `conflict`, or a subclass below). */
export class Conflict extends MnemoError {}

/** 409 bank_full: the bank latched FULL; offer the person to drop something old first. */
export class BankFull extends Conflict {}

/** 409 refused: a bounded bank kept what it holds; the message names its weakest note. */
export class Refused extends Conflict {}

/** 413: the request body is over the server's API_MAX_BODY_BYTES. */
export class TooLarge extends MnemoError {}

/** 422: a rule of the domain refused the input (unknown_ontology_id, ...); logged in the revision log. */
export class Unprocessable extends MnemoError {}

/** 422 too_long: a cap (key 64, description 200, content 2,000, ...); the message names the field and limit. */
export class TooLong extends Unprocessable {}

/** 429: over the key's API_RATE; `retryAfter` says when to try again. */
export class RateLimited extends MnemoError {}

/** 503: Mnemo (or what fronts it) cannot serve this now. */
export class Unavailable extends MnemoError {}

/** Any other 5xx: Mnemo failed; the request id finds it in the logs. */
export class ServerError extends MnemoError {}

type ErrorClass = new (message: string, init?: MnemoErrorInit) => MnemoError;

const BY_STATUS: Record<number, ErrorClass> = {
  400: Invalid,
  401: AuthenticationError,
  403: PermissionDenied,
  404: NotFound,
  409: Conflict,
  413: TooLarge,
  422: Unprocessable,
  429: RateLimited,
  503: Unavailable,
};

const BY_CODE: Record<string, ErrorClass> = {
  bank_full: BankFull,
  refused: Refused,
  too_long: TooLong,
};

const CODE_BY_STATUS: Record<number, string> = {
  400: "invalid",
  401: "not_authenticated",
  403: "permission_denied",
  404: "not_found",
  409: "conflict",
  413: "too_large",
  422: "unprocessable",
  429: "throttled",
  503: "unavailable",
};

/** Retry-After as seconds: a number, or an HTTP date (counted from now). */
export function parseRetryAfter(value: string | null | undefined): number | null {
  if (!value) return null;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text);
  const when = Date.parse(text);
  if (Number.isNaN(when)) return null;
  return Math.max(0, (when - Date.now()) / 1000);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The typed error for a non-2xx answer; a body without Mnemo's error shape still gets its status's class. */
export async function errorFromResponse(
  response: Response,
  request: { method: string; path: string },
  attempts = 1,
): Promise<MnemoError> {
  const status = response.status;
  const text = await response.text().catch(() => "");
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON (a proxy's page): kept whole in .body; the message shows its start
  }
  let code = CODE_BY_STATUS[status] ?? "error";
  let message = "";
  let field: string | null = null;
  const error = isRecord(body) ? body["error"] : undefined;
  if (isRecord(error)) {
    code = typeof error["code"] === "string" && error["code"] ? error["code"] : code;
    message = typeof error["message"] === "string" ? error["message"] : "";
    field = typeof error["field"] === "string" && error["field"] ? error["field"] : null;
  }
  if (!message) {
    const trimmed = text.trim();
    message = trimmed ? trimmed.slice(0, 300) : `${request.method} ${request.path} answered ${status}.`;
  }
  const byCode = status === 409 || status === 422 ? BY_CODE[code] : undefined;
  const cls = byCode ?? BY_STATUS[status] ?? (status >= 500 ? ServerError : MnemoError);
  return new cls(message, {
    status,
    code,
    field,
    retryAfter: parseRetryAfter(response.headers.get("Retry-After")),
    requestId: response.headers.get("X-Request-ID"),
    attempts,
    body,
  });
}
