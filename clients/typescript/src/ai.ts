/**
 * The ten Mnemo tools as Vercel AI SDK tools, for one person:
 *
 *     import { generateText, stepCountIs } from "ai";
 *     import { mnemoTools } from "mnemo-client/ai";
 *
 *     const { text } = await generateText({
 *       model, prompt, stopWhen: stepCountIs(5),
 *       tools: mnemoTools(mnemo, { person: "ada" }),
 *     });
 *
 * The arguments bound here (`person`, and `scope`, `context`, `turn` when given) are taken out of
 * the schemas the model sees and added to every call, so a model cannot write about someone else.
 */
import { jsonSchema, tool, type Tool } from "ai";

import type { Mnemo } from "./client.js";
import { TOOL_SCHEMAS } from "./tool-schemas.js";
import type { Context, ToolName } from "./types.js";

export interface MnemoToolsOptions {
  /** The person every call is about (the agent platform's id for them). */
  person: string;
  /** Where the conversation happens, e.g. "project:apollo". */
  scope?: string;
  /** What this turn is about: refs and ontology tags. */
  context?: Context;
  /** The turn notes are written during (from takeTurn), so the lens can show where a note came from. */
  turn?: number;
  /** Only these tools (all ten by default). */
  tools?: readonly ToolName[];
}

type JsonObject = Record<string, unknown>;

/** The tool's argument schema without the arguments bound by the caller. */
function withoutBound(parameters: JsonObject, bound: readonly string[]): JsonObject {
  const schema = structuredClone(parameters);
  const properties = { ...(schema["properties"] as JsonObject) };
  for (const name of bound) delete properties[name];
  schema["properties"] = properties;
  schema["required"] = ((schema["required"] as string[] | undefined) ?? []).filter((name) => !bound.includes(name));
  return schema;
}

/** The ten tools (or `options.tools`) as AI SDK tools whose `execute` calls Mnemo through `client`. */
export function mnemoTools(client: Mnemo, options: MnemoToolsOptions): Record<ToolName, Tool<JsonObject, unknown>> {
  const wanted = new Set<string>(options.tools ?? TOOL_SCHEMAS.map((schema) => schema.name));
  const tools: Partial<Record<ToolName, Tool<JsonObject, unknown>>> = {};
  for (const declared of TOOL_SCHEMAS) {
    if (!wanted.has(declared.name)) continue;
    const parameters = declared.parameters as unknown as JsonObject;
    const accepted = Object.keys(parameters["properties"] as JsonObject);
    const bound: JsonObject = { person: options.person };
    for (const name of ["scope", "context", "turn"] as const) {
      if (options[name] !== undefined && accepted.includes(name)) bound[name] = options[name];
    }
    tools[declared.name] = tool<JsonObject, unknown>({
      description: declared.description,
      inputSchema: jsonSchema<JsonObject>(withoutBound(parameters, Object.keys(bound)) as Parameters<typeof jsonSchema>[0]),
      execute: (input) => client.callTool(declared.name, { ...input, ...bound }),
    });
  }
  return tools as Record<ToolName, Tool<JsonObject, unknown>>;
}
