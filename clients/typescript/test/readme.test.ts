// The README's quickstart runs as pasted: its first ```js block, against the live server.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { test } from "node:test";

test("the README quickstart runs as pasted", () => {
  const root = new URL("../../", import.meta.url);
  const readme = readFileSync(new URL("README.md", root), "utf8");
  const code = /## Quickstart[\s\S]*?```js\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.ok(code, "README.md has a ```js block under ## Quickstart");
  // Inside the package, so `import ... from "mnemo-client"` resolves to this package's build.
  const file = new URL(".test-build/quickstart.mjs", root);
  writeFileSync(file, code);
  const run = spawnSync(process.execPath, [fileURLToPath(file)], { encoding: "utf8", env: process.env, timeout: 60_000 });
  assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
});
