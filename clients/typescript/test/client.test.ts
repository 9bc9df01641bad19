// Mnemo's TypeScript client against the live server: every endpoint family, errors as their types.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  AuthenticationError,
  Conflict,
  Invalid,
  Mnemo,
  MnemoError,
  NotFound,
  PermissionDenied,
  TOOL_NAMES,
  TooLong,
  Unprocessable,
  type MuteTarget,
  type Note,
  type NoteAsOf,
} from "../src/index.js";
import { admin, client, freshPerson, MNEMO_URL } from "./live.js";

describe("the client against a live Mnemo", () => {
  test("me names the team and agent of the key from MNEMO_KEY", async () => {
    const me = await client().me();
    assert.equal(me.can_admin, false);
    assert.equal((await admin().me()).team, me.team);
  });

  test("remember, then recall what was remembered", async () => {
    const mnemo = client();
    const person = freshPerson("ada");
    const written = await mnemo.remember({ person, key: "Home City", description: "Where Ada lives", content: "Ada lives in Oslo." });
    assert.deepEqual([written.key, written.action, written.bank], ["home-city", "created", `user:${person}`]);

    const recalled = await mnemo.recallMemories({ person, query: "where does Ada live" });
    assert.deepEqual(recalled.results.map((hit) => [hit.key, hit.content]), [["home-city", "Ada lives in Oslo."]]);
    const found = await mnemo.search({ person, query: "Oslo" });
    assert.equal(found.results[0]?.id, written.id);

    const again = await mnemo.remember({ person, key: "home_city", description: "Where Ada lives", content: "Ada lives in Bergen." });
    assert.deepEqual([again.id, again.action], [written.id, "updated"]);
    assert.equal((await mnemo.getNote(written.id!)).content, "Ada lives in Bergen.");

    const forgotten = await mnemo.forgetMemory({ person, key: "home-city" });
    assert.equal(forgotten.action, "deleted");
    assert.deepEqual((await mnemo.recallMemories({ person, query: "Bergen" })).results, []);
  });

  test("a turn, its reply, and the reply refused the second time", async () => {
    const mnemo = client();
    const person = freshPerson("bo");
    await mnemo.registerPerson(person, { displayName: "Bo" });
    assert.equal((await mnemo.getPerson(person)).display_name, "Bo");
    await mnemo.remember({ person, key: "dog", description: "Bo's dog", content: "Bo has a greyhound called Rex." });

    const turn = await mnemo.takeTurn({ person, message: "Any ideas for walking Rex when it rains?" });
    assert.ok(turn.blocks.some((block) => String(block["text"]).includes("dog")), JSON.stringify(turn.blocks));
    assert.deepEqual(turn.messages.at(-1), { role: "user", content: "Any ideas for walking Rex when it rains?" });

    const reply = await mnemo.reply(turn.turn, "A raincoat for Rex, and shorter loops.");
    assert.deepEqual([reply.role, reply.conversation], ["assistant", turn.conversation]);
    await assert.rejects(mnemo.reply(turn.turn, "again"), (error: unknown) => {
      assert.ok(error instanceof Conflict);
      assert.deepEqual([error.status, error.code], [409, "conflict"]);
      return true;
    });

    const messages = await mnemo.listMessages(turn.conversation);
    assert.deepEqual(messages.results.map((message) => message.role), ["user", "assistant"]);
    const recent = await mnemo.recentMessages({ person });
    assert.deepEqual(recent.messages.map((message) => message.content), [
      "Any ideas for walking Rex when it rains?",
      "A raincoat for Rex, and shorter loops.",
    ]);
  });

  test("conversations and messages: start, add, list, end, delete", async () => {
    const mnemo = client();
    const person = freshPerson("cy");
    const conversation = await mnemo.startConversation(person);
    const said = await mnemo.addMessage(conversation.id, { role: "user", content: "I moved to Lisbon.", externalId: "m-1" });
    await mnemo.addMessage(conversation.id, { role: "assistant", content: "Welcome to Lisbon!" });
    assert.deepEqual((await mnemo.iterMessages(conversation.id).toArray()).map((m) => m.id).slice(0, 1), [said.id]);
    const hits = await mnemo.searchConversation({ person, query: "Lisbon" });
    assert.ok(hits.results.length > 0);

    const listed = await mnemo.listConversations({ person });
    assert.deepEqual(listed.results.map((c) => c.id), [conversation.id]);
    assert.ok((await mnemo.endConversation(conversation.id)).ended_at);
    await mnemo.deleteMessage(conversation.id, said.id);
    const [erased] = (await mnemo.listMessages(conversation.id)).results;
    assert.deepEqual([erased?.id, erased?.content, Boolean(erased?.erased_at)], [said.id, "", true]);
    await mnemo.deleteConversation(conversation.id);
    await assert.rejects(mnemo.getConversation(conversation.id), NotFound);
  });

  test("history import: recorded at once, idempotent, refused whole with the line's field", async () => {
    const mnemo = client();
    const person = freshPerson("di");
    const lines = [
      {
        person,
        external_id: "c-1041",
        started_at: "2023-05-08T13:50:00Z",
        messages: [
          { role: "user" as const, content: "I adopted a greyhound", created_at: "2023-05-08T13:56:00+00:00", external_id: "m-1" },
          { role: "assistant" as const, content: "Congratulations!", created_at: "2023-05-08T13:57:10+00:00", external_id: "m-2" },
        ],
      },
    ];
    const job = await mnemo.importConversations(lines);
    assert.deepEqual([job.lines, job.conversations_created, job.messages_created], [1, 1, 2]);
    assert.equal((await mnemo.getConversationImport(job.id)).id, job.id);
    const again = await mnemo.importConversations(lines);
    assert.deepEqual([again.conversations_matched, again.messages_created, again.messages_present], [1, 0, 2]);

    const bad = structuredClone(lines);
    (bad[0]!.messages[1] as { role: string }).role = "robot";
    await assert.rejects(mnemo.importConversations(bad), (error: unknown) => {
      assert.ok(error instanceof Invalid);
      assert.equal(error.field, "[0].messages[1].role");
      return true;
    });
  });

  test("memory packages: export one person, import into another", async () => {
    const mnemo = client();
    const person = freshPerson("eve");
    await mnemo.remember({ person, key: "tea", description: "What Eve drinks", content: "Eve drinks green tea." });
    const exported = await mnemo.exportMemories(person);
    assert.ok(JSON.stringify(exported).includes("Eve drinks green tea."));

    const other = freshPerson("fay");
    const memoryPackage = JSON.parse(JSON.stringify(exported).replaceAll(person, other));
    const report = await mnemo.importMemories(memoryPackage);
    assert.deepEqual([report.created, report.refused], [1, 0]);
    assert.equal((await mnemo.importMemories(memoryPackage)).unchanged, 1);
    const notes = await mnemo.listNotes({ person: other });
    assert.deepEqual(notes.results.map((note) => note.content), ["Eve drinks green tea."]);
  });

  test("notes, banks and revisions; changing a bank needs an admin key", async () => {
    const mnemo = client();
    const person = freshPerson("gus");
    const written = await mnemo.remember({ person, key: "job", description: "Gus's work", content: "Gus is a baker." });
    await mnemo.editNote({ person, id: written.id!, mode: "find_replace", find: "baker", content: "pastry chef" });
    assert.equal((await mnemo.getNote(written.id!)).content, "Gus is a pastry chef.");
    await mnemo.rememberAboutUser({ person, observation: "Prefers mornings.", category: "preferences" });
    await mnemo.rememberAboutProject({ person, observation: "Launch is in May.", category: "timeline", project: `p-${person}` });
    const recalled = await mnemo.recall({ person, query: "Gus work" });
    assert.ok(JSON.stringify(recalled).includes("pastry chef"));

    const bank = `user:${person}`;
    assert.equal((await mnemo.getBank(bank)).id, bank);
    assert.ok((await mnemo.iterBanks({ person }).toArray()).some((b) => b.id === bank));
    await assert.rejects(mnemo.updateBank(bank, { softLimit: 40 }), PermissionDenied);
    assert.equal((await admin().updateBank(bank, { softLimit: 40, hardLimit: 60 })).soft_limit, 40);

    const revisions = await mnemo.iterRevisions({ note: written.id! }).toArray();
    assert.deepEqual(revisions.map((revision) => revision.action).sort(), ["create", "update"]);
    assert.equal((await mnemo.deleteNote(written.id!)).action, "deleted");
  });

  test("reads, mutes and erasure with an admin-capable key", async () => {
    const mnemo = client();
    const boss = admin();
    const me = await mnemo.me();
    const person = freshPerson("hal");
    await mnemo.remember({ person, key: "city", description: "Where Hal lives", content: "Hal lives in Rome.", category: "places" });
    await mnemo.search({ person, query: "Rome" });

    await assert.rejects(mnemo.listReads({ person }), PermissionDenied);
    // Reads are written just after the response: wait for this one to arrive.
    let reads = await boss.listReads({ person, tool: "search" });
    for (let tries = 0; reads.count === 0 && tries < 100; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      reads = await boss.listReads({ person, tool: "search", since: new Date(Date.now() - 3_600_000) });
    }
    assert.deepEqual(reads.results.map((read) => [read.tool, read.query, read.agent]), [["search", "Rome", me.agent]]);

    const created = await boss.mute({ person, category: "places", agent: me.agent });
    assert.equal(created.mutes.length, 1);
    assert.deepEqual((await boss.iterMutes({ person }).toArray()).map((mute) => mute.category), ["places"]);
    assert.deepEqual((await mnemo.search({ person, query: "Rome" })).results, []);
    await boss.unmute(created.mutes[0]!.id);
    assert.equal((await mnemo.search({ person, query: "Rome" })).results.length, 1);

    const erased = await boss.erasePerson(person);
    assert.equal(erased.erased["notes"], 1);
  });

  test("a mute of one note hides it from the agent until unmuted", async () => {
    const mnemo = client();
    const boss = admin();
    const me = await mnemo.me();
    const person = freshPerson("ines");
    const written = await mnemo.remember({ person, key: "allergy", description: "What Ines is allergic to", content: "Ines is allergic to walnuts." });
    const hits = async (): Promise<string[]> => (await mnemo.recallMemories({ person, query: "walnuts allergy" })).results.map((hit) => hit.key);
    assert.deepEqual(await hits(), ["allergy"]);

    const created = await boss.mute({ person, note: written.id!, agent: me.agent });
    assert.deepEqual(created.mutes.map((mute) => [mute.note, mute.category, mute.agent]), [[written.id, null, me.agent]]);
    assert.deepEqual(await hits(), []);
    await boss.unmute(created.mutes[0]!.id);
    assert.deepEqual(await hits(), ["allergy"]);

    await assert.rejects(boss.mute({ person, note: 2_000_000_000 }), NotFound);
    const both = { person, category: "health", note: written.id! } as unknown as MuteTarget;
    await assert.rejects(boss.mute(both), Invalid);
  });

  test("review: writes wait as proposals until kept or not", async () => {
    const mnemo = client();
    const boss = admin();
    const person = freshPerson("jo");
    await mnemo.registerPerson(person);
    assert.equal((await boss.setReviewWrites(person, true)).review_writes, true);

    const proposed = await mnemo.remember({ person, key: "city", description: "Where Jo lives", content: "Jo lives in Lisbon." });
    assert.ok("status" in proposed, JSON.stringify(proposed));
    assert.equal(proposed.status, "proposed");
    assert.equal(proposed.id, null);
    const pending = await boss.listProposals({ person, status: "pending" });
    assert.deepEqual(pending.results.map((proposal) => [proposal.id, proposal.status, proposal.content]), [[proposed.proposal, "pending", "Jo lives in Lisbon."]]);
    assert.deepEqual(await mnemo.recallMemories({ person, query: "Lisbon" }).then((found) => found.results), []);

    const kept = await boss.approveProposal(proposed.proposal);
    assert.deepEqual([kept.proposal.status, kept.action, kept.key], ["kept", "created", "city"]);
    assert.deepEqual((await mnemo.recallMemories({ person, query: "where does Jo live" })).results.map((hit) => hit.content), ["Jo lives in Lisbon."]);

    const second = await mnemo.remember({ person, key: "pet", description: "Jo's pet", content: "Jo has a parrot." });
    assert.ok("proposal" in second, JSON.stringify(second));
    const rejected = await boss.rejectProposal(second.proposal);
    assert.deepEqual([rejected.id, rejected.status, rejected.content], [second.proposal, "rejected", ""]);
    assert.deepEqual((await boss.iterProposals({ person }).toArray()).map((proposal) => proposal.status), ["kept", "rejected"]);

    await assert.rejects(mnemo.listProposals({ person }), PermissionDenied);
    await boss.erasePerson(person);
  });

  test("the tool list and callTool", async () => {
    const mnemo = client();
    const tools = await mnemo.tools();
    assert.deepEqual(tools.map((tool) => tool["name"]), [...TOOL_NAMES]);
    assert.equal((await mnemo.tools("anthropic")).every((tool) => "input_schema" in tool), true);
    const person = freshPerson("ivy");
    const result = await mnemo.callTool("remember", { person, key: "k", description: "d", content: "c" });
    assert.equal(result.action, "created");
  });

  test("pagination walks every page, and pages() yields them whole", async () => {
    const mnemo = client();
    const person = freshPerson("jo");
    for (let index = 0; index < 5; index++) {
      await mnemo.remember({ person, key: `fact-${index}`, description: `Fact ${index}`, content: `Jo's fact number ${index}.` });
    }
    const pages = [];
    for await (const page of mnemo.iterNotes({ person, pageSize: 2 }).pages()) pages.push(page.results.length);
    assert.deepEqual(pages, [2, 2, 1]);
    const keys: string[] = [];
    for await (const note of mnemo.iterNotes({ person, pageSize: 2 }) as AsyncIterable<Note>) keys.push(note.key);
    assert.deepEqual(keys.sort(), ["fact-0", "fact-1", "fact-2", "fact-3", "fact-4"]);
    assert.equal((await mnemo.listNotes({ person, limit: 2, offset: 4 })).results.length, 1);
  });

  test("notes as of a moment: the content a note had then, and none before it existed", async () => {
    const mnemo = client();
    const person = freshPerson("kit");
    const before = new Date();
    await new Promise((resolve) => setTimeout(resolve, 20));
    await mnemo.remember({ person, key: "city", description: "Where Kit lives", content: "Kit lives in Oslo." });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const between = new Date();
    await new Promise((resolve) => setTimeout(resolve, 20));
    await mnemo.remember({ person, key: "city", description: "Where Kit lives", content: "Kit lives in Bergen." });
    assert.deepEqual((await mnemo.listNotes({ person, asOf: before })).results, []);
    const then = await mnemo.listNotes({ person, asOf: between });
    assert.deepEqual(then.results.map((note: NoteAsOf) => note.content), ["Kit lives in Oslo."]);
    assert.deepEqual((await mnemo.listNotes({ person })).results.map((note: Note) => note.content), ["Kit lives in Bergen."]);
    await assert.rejects(mnemo.listNotes({ person, asOf: "yesterday-ish" }), (error: unknown) => error instanceof Invalid);
  });

  test("errors are typed: 401, 404, 400 with its field, 422 too_long", async () => {
    const person = freshPerson("kim");
    await assert.rejects(new Mnemo({ baseUrl: MNEMO_URL, apiKey: "mnemo_wrong_key" }).me(), (error: unknown) => {
      assert.ok(error instanceof AuthenticationError && error instanceof MnemoError);
      assert.deepEqual([error.status, error.code], [401, "not_authenticated"]);
      assert.ok(error.message);
      return true;
    });
    const mnemo = client();
    await mnemo.registerPerson(person);
    await assert.rejects(mnemo.getNote(999_999_999), (error: unknown) => {
      assert.ok(error instanceof NotFound);
      assert.deepEqual([error.status, error.code, error.field], [404, "not_found", null]);
      return true;
    });
    await assert.rejects(mnemo.listNotes({ person, limit: 100_000 }), (error: unknown) => {
      assert.ok(error instanceof Invalid);
      assert.deepEqual([error.status, error.code, error.field], [400, "invalid", "limit"]);
      return true;
    });
    await assert.rejects(
      mnemo.remember({ person, key: "bio", description: "Kim's life", content: "x".repeat(2001) }),
      (error: unknown) => {
        assert.ok(error instanceof TooLong && error instanceof Unprocessable);
        assert.deepEqual([error.status, error.code, error.field], [422, "too_long", "content"]);
        assert.match(error.message, /2000/);
        return true;
      },
    );
  });
});
