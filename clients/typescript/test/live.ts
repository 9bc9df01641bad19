// What every live test shares: the server the test command started, its keys, fresh names.
import { randomUUID } from "node:crypto";

import { Mnemo } from "../src/index.js";

function required(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run these tests through tests/client/test_typescript_client.py, which starts Mnemo`);
  }
  return value;
}

export const MNEMO_URL = required("MNEMO_URL");
export const MNEMO_KEY = required("MNEMO_KEY");
/** An admin-capable key of the same team (reads, mutes, banks, erasure). */
export const MNEMO_ADMIN_KEY = required("MNEMO_ADMIN_KEY");

/** A client of MNEMO_URL / MNEMO_KEY, read from the environment as a user's would be. */
export function client(): Mnemo {
  return new Mnemo();
}

export function admin(): Mnemo {
  return new Mnemo({ apiKey: MNEMO_ADMIN_KEY });
}

/** A person no other test writes about (the tests share one team). */
export function freshPerson(name: string): string {
  return `${name}-${randomUUID().slice(0, 8)}`;
}
