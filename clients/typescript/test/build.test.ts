// What the published build may depend on: nothing of Node's, and no package but the optional `ai`.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";

import { Mnemo } from "../src/index.js";

test("dist imports only its own modules (and ai, from mnemo-client/ai): it runs in browsers", () => {
  const dist = new URL("../../dist/", import.meta.url);
  const files = readdirSync(dist).filter((name) => name.endsWith(".js"));
  assert.ok(files.includes("index.js") && files.includes("ai.js"));
  for (const name of files) {
    const source = readFileSync(new URL(name, dist), "utf8")
      .replace(/\/\*[\s\S]*?\*\//g, "") // the doc comments show imports of their own
      .replace(/^\s*\/\/.*$/gm, "");
    const imports = [
      ...source.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["'];$/gm), // static
      ...source.matchAll(/^import\s*["']([^"']+)["'];$/gm), // for its side effects
      ...source.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g), // dynamic
    ].map((match) => match[1]);
    const foreign = imports.filter((spec) => !spec!.startsWith("./") && !(name === "ai.js" && spec === "ai"));
    assert.deepEqual(foreign, [], `${name} imports ${foreign.join(", ")}`);
    assert.doesNotMatch(source, /\brequire\(|\bBuffer\b|\bprocess\.env\b/, `${name} uses a Node global`);
  }
});

test("without apiKey or MNEMO_KEY the constructor says what to set", () => {
  const saved = process.env["MNEMO_KEY"];
  delete process.env["MNEMO_KEY"];
  try {
    assert.throws(() => new Mnemo({ baseUrl: "http://127.0.0.1:1" }), /Pass apiKey or set MNEMO_KEY/);
  } finally {
    process.env["MNEMO_KEY"] = saved;
  }
  assert.equal(new Mnemo({ baseUrl: "http://mnemo.test:8000//", apiKey: "k" }).baseUrl, "http://mnemo.test:8000");
});
