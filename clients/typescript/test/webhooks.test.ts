// Webhook subscriptions against the live server, and verifySignature against node:crypto's HMAC.
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { describe, test } from "node:test";

import { Invalid, NotFound, PermissionDenied, verifySignature, type WebhookEventType } from "../src/index.js";
import { admin, client } from "./live.js";

// A public address written as one: the live server checks it without asking DNS. Nothing is written in
// the team while subscribed (the tests run one at a time), so nothing is ever sent there.
const PUBLIC_URL = "https://1.1.1.1/mnemo-hook";

describe("webhooks against a live Mnemo", () => {
  test("an admin key subscribes, lists, reads the log and unsubscribes; the secret is shown once", async () => {
    const boss = admin();
    const created = await boss.subscribeWebhook({ url: PUBLIC_URL, events: ["note.erased", "note.created"] });
    try {
      assert.ok(created.secret.length >= 32, created.secret);
      assert.deepEqual([created.url, created.events], [PUBLIC_URL, ["note.created", "note.erased"]]);
      assert.equal(created.agent, (await boss.me()).agent);

      const listed = await boss.listWebhooks();
      const mine = listed.results.find((webhook) => webhook.id === created.id);
      assert.deepEqual(mine && [mine.url, mine.events], [PUBLIC_URL, ["note.created", "note.erased"]]);
      assert.ok(!("secret" in mine!), JSON.stringify(mine));
      assert.ok((await boss.iterWebhooks({ pageSize: 1 }).toArray()).some((webhook) => webhook.id === created.id));

      const deliveries = await boss.webhookDeliveries(created.id);
      assert.deepEqual([deliveries.count, deliveries.results], [0, []]);
      assert.deepEqual(await boss.iterWebhookDeliveries(created.id).toArray(), []);
    } finally {
      await boss.deleteWebhook(created.id);
    }
    assert.ok(!(await boss.listWebhooks()).results.some((webhook) => webhook.id === created.id));
    await assert.rejects(boss.deleteWebhook(created.id), NotFound);
    await assert.rejects(boss.webhookDeliveries(created.id), NotFound);
  });

  test("a secret of one's own is the one answered", async () => {
    const boss = admin();
    const created = await boss.subscribeWebhook({ url: PUBLIC_URL, events: ["person.erased"], secret: "my-own-secret-1234" });
    await boss.deleteWebhook(created.id);
    assert.equal(created.secret, "my-own-secret-1234");
  });

  test("a plain key gets PermissionDenied; a private URL or an unknown event is Invalid with its field", async () => {
    const plain = client();
    await assert.rejects(plain.listWebhooks(), PermissionDenied);
    await assert.rejects(plain.subscribeWebhook({ url: PUBLIC_URL, events: ["note.created"] }), (error: unknown) => {
      assert.ok(error instanceof PermissionDenied);
      assert.deepEqual([error.status, error.code], [403, "permission_denied"]);
      return true;
    });
    const boss = admin();
    await assert.rejects(boss.subscribeWebhook({ url: "http://127.0.0.1:9/hook", events: ["note.created"] }), (error: unknown) => {
      assert.ok(error instanceof Invalid);
      assert.deepEqual([error.status, error.code, error.field], [400, "invalid", "url"]);
      assert.ok(error.message);
      return true;
    });
    await assert.rejects(
      boss.subscribeWebhook({ url: PUBLIC_URL, events: ["note.read" as WebhookEventType] }),
      (error: unknown) => error instanceof Invalid && error.field === "events",
    );
  });
});

describe("verifySignature", () => {
  const body = '{"id":"e1","type":"note.created","created_at":"2026-12-04T10:00:00+00:00","data":{"content":"Ada lives in Bergen ☔"}}';
  const header = "sha256=" + createHmac("sha256", "s3cret").update(body).digest("hex");

  test("accepts Mnemo's signature over the body as text or as bytes", async () => {
    assert.equal(await verifySignature(body, header, "s3cret"), true);
    const bytes = new TextEncoder().encode(body);
    assert.equal(await verifySignature(bytes, header, "s3cret"), true);
    assert.equal(await verifySignature(bytes.buffer, header, "s3cret"), true);
    // What express.raw() hands over: a small Buffer, a view into Node's shared pool.
    assert.equal(await verifySignature(Buffer.from(body), header, "s3cret"), true);
    // A view into a larger buffer: only the view's bytes are signed.
    const padded = new Uint8Array(bytes.length + 8);
    padded.set(bytes, 4);
    assert.equal(await verifySignature(padded.subarray(4, 4 + bytes.length), header, "s3cret"), true);
  });

  test("refuses another secret, a tampered body, and a header not of the form sha256=<hex>", async () => {
    assert.equal(await verifySignature(body, header, "other-secret"), false);
    assert.equal(await verifySignature(body + " ", header, "s3cret"), false);
    assert.equal(await verifySignature(body.replace("Bergen", "Oslo"), header, "s3cret"), false);
    assert.equal(await verifySignature(body, header.slice("sha256=".length), "s3cret"), false);
    assert.equal(await verifySignature(body, header.slice(0, -2), "s3cret"), false);
    assert.equal(await verifySignature(body, "sha256=zz" + header.slice(9), "s3cret"), false);
    assert.equal(await verifySignature(body, null, "s3cret"), false);
    assert.equal(await verifySignature(body, "", "s3cret"), false);
  });

  test("without a secret it says what to pass", async () => {
    await assert.rejects(verifySignature(body, header, ""), /needs the subscription's secret/);
  });
});
