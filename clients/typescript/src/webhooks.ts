/**
 * For a webhook receiver: check that a delivery came from Mnemo.
 *
 *     import { verifySignature } from "mnemo-client";
 *
 *     const body = await request.text(); // the raw body, before any JSON parsing
 *     if (!(await verifySignature(body, request.headers.get("X-Mnemo-Signature"), secret))) return new Response(null, { status: 401 });
 *
 * On Web Crypto (`crypto.subtle`), so it runs in Node 20+, browsers, Deno, Bun and edge runtimes.
 */

const encoder = new TextEncoder();

/** The bytes of a hex string, or null when it is not one (odd length, a non-hex character). */
function fromHex(hex: string): Uint8Array<ArrayBuffer> | null {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) return null;
  const bytes = new Uint8Array(hex.length / 2);
  for (let index = 0; index < bytes.length; index++) bytes[index] = parseInt(hex.slice(index * 2, index * 2 + 2), 16);
  return bytes;
}

/** A copy on an ArrayBuffer of its own: what crypto.subtle takes, whatever buffer the view shares. */
function bytesOf(body: string | ArrayBuffer | ArrayBufferView): Uint8Array<ArrayBuffer> {
  if (typeof body === "string") return encoder.encode(body);
  if (body instanceof ArrayBuffer) return new Uint8Array(body.slice(0));
  return new Uint8Array(body.buffer, body.byteOffset, body.byteLength).slice();
}

/**
 * Whether `header` (X-Mnemo-Signature, `sha256=<hex>`) is the HMAC-SHA256 of the raw `body` with
 * the subscription's secret. Pass the body as received (a string from `request.text()`, or its
 * bytes), before any JSON parsing: re-serialized JSON would not match.
 */
export async function verifySignature(
  body: string | ArrayBuffer | ArrayBufferView,
  header: string | null | undefined,
  secret: string,
): Promise<boolean> {
  if (!secret) throw new TypeError("verifySignature needs the subscription's secret (the `secret` subscribeWebhook answered)");
  if (!header || !header.startsWith("sha256=")) return false;
  const signature = fromHex(header.slice("sha256=".length));
  if (signature === null) return false;
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
  // subtle.verify compares the MACs in constant time: how long it takes says nothing of how much matched.
  return crypto.subtle.verify("HMAC", key, signature, bytesOf(body));
}
