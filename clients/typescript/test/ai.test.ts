// The AI SDK tools: every tool's execute reaches the live server, and a model's tool call runs.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { generateText, stepCountIs, type Tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { mnemoTools } from "../src/ai.js";
import { TOOL_NAMES } from "../src/index.js";
import { client, freshPerson } from "./live.js";

async function run(tool: Tool<Record<string, unknown>, unknown> | undefined, input: Record<string, unknown>): Promise<any> {
  assert.ok(tool?.execute, "the tool has an execute");
  return tool.execute(input, { toolCallId: "call-1", messages: [] });
}

function schemaOf(tool: Tool<Record<string, unknown>, unknown>): { properties: Record<string, unknown>; required: string[] } {
  return (tool.inputSchema as unknown as { jsonSchema: { properties: Record<string, unknown>; required: string[] } }).jsonSchema;
}

describe("mnemoTools", () => {
  test("the ten tools, without the bound person in their schemas", () => {
    const tools = mnemoTools(client(), { person: "ada", scope: "project:apollo" });
    assert.deepEqual(Object.keys(tools), [...TOOL_NAMES]);
    for (const tool of Object.values(tools)) {
      const schema = schemaOf(tool);
      assert.ok(tool.description);
      assert.equal("person" in schema.properties, false);
      assert.equal("scope" in schema.properties, false);
      assert.equal(schema.required.includes("person"), false);
      assert.ok("context" in schema.properties, "an unbound argument stays");
    }
    assert.deepEqual(Object.keys(mnemoTools(client(), { person: "ada", tools: ["search"] })), ["search"]);
  });

  test("each tool's execute calls the live server for the bound person", async () => {
    const person = freshPerson("lu");
    const tools = mnemoTools(client(), { person });
    const written = await run(tools.remember, { key: "pet", description: "Lu's pet", content: "Lu has a cat named Miso." });
    assert.deepEqual([written.action, written.bank], ["created", `user:${person}`]);

    assert.equal((await run(tools.recall_memories, { query: "Lu's cat" })).results[0].content, "Lu has a cat named Miso.");
    assert.equal((await run(tools.search, { query: "Miso" })).results[0].id, written.id);
    assert.ok(JSON.stringify(await run(tools.recall, { query: "cat" })).includes("Miso"));
    const edited = await run(tools.edit_note, { id: written.id, mode: "find_replace", find: "Miso", content: "Tofu" });
    assert.equal(edited.action, "updated");
    assert.equal((await run(tools.remember_about_user, { observation: "Likes jazz.", category: "preferences" })).action, "created");
    const project = await run(tools.remember_about_project, { observation: "Ships Friday.", category: "timeline", project: `p-${person}` });
    assert.equal(project.action, "created");

    const mnemo = client();
    const turn = await mnemo.takeTurn({ person, message: "Tofu knocked over my plant again" });
    await mnemo.reply(turn.turn, "Cats love plants; try a high shelf.");
    assert.equal((await run(tools.recent_messages, {})).messages.length, 2);
    assert.ok((await run(tools.search_conversation, { query: "plant" })).results.length > 0);
    assert.equal((await run(tools.forget_memory, { key: "pet" })).action, "deleted");
  });

  test("a model's tool call runs through generateText", async () => {
    const person = freshPerson("max");
    const model = new MockLanguageModelV3({
      doGenerate: [
        {
          content: [
            {
              type: "tool-call",
              toolCallId: "call-1",
              toolName: "remember",
              input: JSON.stringify({ key: "city", description: "Where Max lives", content: "Max lives in Porto." }),
            },
          ],
          finishReason: { unified: "tool-calls", raw: undefined },
          usage: {
            inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
            outputTokens: { total: 1, text: 1, reasoning: 0 },
          },
          warnings: [],
        },
        {
          content: [{ type: "text", text: "Noted." }],
          finishReason: { unified: "stop", raw: undefined },
          usage: {
            inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
            outputTokens: { total: 1, text: 1, reasoning: 0 },
          },
          warnings: [],
        },
      ],
    });
    const result = await generateText({ model, prompt: "I live in Porto", tools: mnemoTools(client(), { person }), stopWhen: stepCountIs(3) });
    assert.equal(result.text, "Noted.");
    const notes = await client().listNotes({ person });
    assert.deepEqual(notes.results.map((note) => note.content), ["Max lives in Porto."]);
  });
});
