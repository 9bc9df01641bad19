// The checked-in generated files match what the live server serves (the CI check for API drift).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { test } from "node:test";

test("src/schema.ts and src/tool-schemas.ts match the live /api/schema/ and /api/v1/tools", () => {
  const script = fileURLToPath(new URL("../../scripts/generate-schema.mjs", import.meta.url));
  const run = spawnSync(process.execPath, [script, "--check"], { encoding: "utf8", env: process.env });
  assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
});
