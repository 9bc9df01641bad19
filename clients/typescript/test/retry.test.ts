// Retries on 429 and 503 against a tiny local server that answers what each test scripts.
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";

import { ConnectionFailed, Mnemo, RateLimited, ServerError, Unavailable } from "../src/index.js";

type Answer = { status: number; body?: unknown; headers?: Record<string, string> };

let server: Server;
let baseUrl: string;
let script: Answer[] = [];
let requests: { method: string; url: string; authorization: string | undefined }[] = [];

before(async () => {
  server = createServer((request, response) => {
    requests.push({ method: request.method ?? "", url: request.url ?? "", authorization: request.headers.authorization });
    const answer = script.shift() ?? { status: 200, body: { ok: true } };
    const text = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body ?? {});
    response.writeHead(answer.status, { "Content-Type": "application/json", ...answer.headers });
    response.end(text);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => server.close());

function answering(...answers: Answer[]): Mnemo {
  script = answers;
  requests = [];
  return new Mnemo({ baseUrl, apiKey: "mnemo_test", retry: { backoff: 0.01 } });
}

const throttled = (retryAfter: string): Answer => ({
  status: 429,
  body: { error: { code: "throttled", message: "Slow down." } },
  headers: { "Retry-After": retryAfter },
});

describe("retries", () => {
  test("a 429 is retried after Retry-After, then the answer is returned", async () => {
    const mnemo = answering(throttled("0"), throttled("0.05"), { status: 200, body: { team: "t" } });
    const started = performance.now();
    assert.deepEqual(await mnemo.me(), { team: "t" });
    assert.equal(requests.length, 3);
    assert.ok(performance.now() - started >= 50);
    assert.equal(requests[0]?.authorization, "Bearer mnemo_test");
  });

  test("a 503 without Retry-After is retried with backoff", async () => {
    const mnemo = answering({ status: 503, body: { error: { code: "unavailable", message: "busy" } } }, { status: 200, body: {} });
    await mnemo.me();
    assert.equal(requests.length, 2);
  });

  test("after maxRetries the error is thrown, counting the attempts", async () => {
    const mnemo = answering(throttled("0"), throttled("0"), throttled("0"), throttled("0"), throttled("0"));
    await assert.rejects(mnemo.me(), (error: unknown) => {
      assert.ok(error instanceof RateLimited);
      assert.deepEqual([error.status, error.code, error.attempts, error.retryAfter], [429, "throttled", 4, 0]);
      return true;
    });
    assert.equal(requests.length, 4);
  });

  test("a wait past the budget is not slept: the error comes at once with retryAfter", async () => {
    const mnemo = answering(throttled("120"));
    const started = performance.now();
    await assert.rejects(mnemo.me(), (error: unknown) => error instanceof RateLimited && error.retryAfter === 120);
    assert.ok(performance.now() - started < 1000);
    assert.equal(requests.length, 1);
  });

  test("an HTTP-date Retry-After counts from now", async () => {
    const mnemo = answering(throttled(new Date(Date.now() + 600_000).toUTCString()));
    await assert.rejects(mnemo.me(), (error: unknown) => {
      assert.ok(error instanceof RateLimited && error.retryAfter !== null);
      assert.ok(error.retryAfter > 590 && error.retryAfter <= 600, String(error.retryAfter));
      return true;
    });
  });

  test("503 memory_unavailable from a turn is never retried: the message is already recorded", async () => {
    const mnemo = answering({ status: 503, body: { error: { code: "memory_unavailable", message: "no memory" } }, headers: { "Retry-After": "0" } });
    await assert.rejects(mnemo.takeTurn({ person: "ada", message: "hi" }), Unavailable);
    assert.deepEqual(requests.map((r) => r.method), ["POST"]);
  });

  test("other errors are not retried; a non-JSON 502 is a ServerError with the page's start", async () => {
    const mnemo = answering({ status: 502, body: "<html>Bad gateway</html>", headers: { "Content-Type": "text/html" } });
    await assert.rejects(mnemo.me(), (error: unknown) => {
      assert.ok(error instanceof ServerError);
      assert.deepEqual([error.status, error.code, error.message], [502, "error", "<html>Bad gateway</html>"]);
      return true;
    });
    assert.equal(requests.length, 1);
  });

  test("an empty error body still says what failed", async () => {
    const mnemo = answering({ status: 500, body: "" });
    await assert.rejects(mnemo.me(), (error: unknown) => {
      assert.ok(error instanceof ServerError);
      assert.equal(String(error), "ServerError: 500 error: GET /api/v1/me answered 500.");
      return true;
    });
  });

  test("query parameters and path segments are escaped", async () => {
    const mnemo = answering({ status: 200, body: {} }, { status: 200, body: { count: 0, results: [] } });
    await mnemo.getBank("user:auth0|42/x");
    await mnemo.listReads({ person: "a b", since: new Date("2026-01-02T03:04:05Z") });
    assert.deepEqual(requests.map((r) => r.url), [
      "/api/v1/banks/user%3Aauth0%7C42%2Fx",
      "/api/v1/reads?person=a+b&since=2026-01-02T03%3A04%3A05.000Z",
    ]);
  });

  test("no server: ConnectionFailed without a status", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    await assert.rejects(new Mnemo({ baseUrl: `http://127.0.0.1:${port}`, apiKey: "k" }).me(), (error: unknown) => {
      assert.ok(error instanceof ConnectionFailed);
      assert.deepEqual([error.status, error.code], [null, "connection_failed"]);
      return true;
    });
  });
});
