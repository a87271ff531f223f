// node --test Tests/web/: web/tabsync-client.js without a server: a Welcome rebuilds `state` before
// "connected" is announced, and pending ops' keys are translated through a rekey as core's Replica
// and the server do (DESIGN rule 7).
import { test } from "node:test";
import assert from "node:assert/strict";
import { TabsyncClient, rekeyRecord, sessionUrl } from "../../web/tabsync-client.js";

function offlineClient() {
  const client = new TabsyncClient({ url: "ws://127.0.0.1:1/", workspace: "w", clientId: "me" });
  client.sent = [];
  client.send = (message) => client.sent.push(message);
  return client;
}

const tab = (id, key) => ({ id, key, title: id });

test("state is the snapshot's when status says connected", () => {
  const client = offlineClient();
  let seen = null;
  client.addEventListener("status", (e) => {
    if (e.detail === "connected") seen = client.state.tabs.map((t) => t.id);
  });
  client.onWelcome({ epoch: "e1", snapshot: { workspace: "w", version: "2", epoch: "e1",
    tabs: [tab("a", "a0"), tab("b", "a1")], activeTabId: "a", editable: true } });
  assert.deepEqual(seen, ["a", "b"]);
});

test("a rekey record maps a key as the server's rule 7 does", () => {
  const r = rekeyRecord(5, [{ id: "a", key: "a0" }, { id: "b", key: "a0V" }, { id: "c", key: "a1" }],
    { keys: [{ tabId: "a", key: "a0" }, { tabId: "b", key: "a1" }, { tabId: "c", key: "a2" }] });
  assert.equal(r.translate("a0V"), "a1"); // equal to b's old key: b's new key
  const between = r.translate("a0x"); // between b and c: between their new keys
  assert.ok(between > "a1" && between < "a2", between);
  assert.ok(r.translate("Zz") < "a0");
  assert.ok(r.translate("a5") > "a2");
});

test("a pending move is shown through a rekey that arrives before its Applied", () => {
  const client = offlineClient();
  client.onWelcome({ epoch: "e1", snapshot: { workspace: "w", version: "3", epoch: "e1",
    tabs: [tab("a", "a0"), tab("b", "a0V"), tab("c", "a1")], activeTabId: "a", editable: true } });
  // Between b and c by the old keys; then the server rekeys b to a1 and c to a2.
  client.move("a", "a0x");
  assert.deepEqual(client.state.tabs.map((t) => t.id), ["b", "a", "c"]);
  client.onApplied({ version: "4", clientId: "", seq: "0", activeTabId: "a",
    op: { rekey: { keys: [{ tabId: "a", key: "a0" }, { tabId: "b", key: "a1" }, { tabId: "c", key: "a2" }] } } });
  // Untranslated, "a0x" would now sort before b's a1; translated, a stays between b and c.
  assert.deepEqual(client.state.tabs.map((t) => t.id), ["b", "a", "c"]);
  assert.equal(client.rekeys.length, 1);
  client.onApplied({ version: "5", clientId: "me", seq: "1", activeTabId: "a",
    op: { move: { tabId: "a", place: { key: "a1V" } } } });
  assert.deepEqual(client.state.tabs.map((t) => t.id), ["b", "a", "c"]);
  assert.equal(client.pending.length, 0);
  assert.equal(client.rekeys.length, 0);
});

test("a pending replace shows its list at once, the active tab kept when it stays", () => {
  const client = offlineClient();
  client.onWelcome({ epoch: "e1", snapshot: { workspace: "w", version: "1", epoch: "e1",
    tabs: [tab("a", "a0"), tab("b", "a1")], activeTabId: "b", editable: true } });
  client.submit({ replace: { tabs: [{ id: "c", title: "C" }, { id: "b", title: "B" }] } });
  assert.deepEqual(client.state.tabs.map((t) => t.id), ["c", "b"]);
  assert.equal(client.state.activeTabId, "b");
  client.submit({ replace: { tabs: [{ id: "d" }, { id: "e" }] } });
  assert.equal(client.state.activeTabId, "e"); // b gone: the tab at its old index
});

test("a session connects on its workspace's path (docs/design.md, 'The protocol in brief')", () => {
  assert.equal(sessionUrl("ws://h:7070/", "team"), "ws://h:7070/v1/workspaces/team/ws");
  assert.equal(sessionUrl("ws://h:7070", "team"), "ws://h:7070/v1/workspaces/team/ws");
  assert.equal(sessionUrl("wss://h/sync/?x=1", "a.b_c-9"), "wss://h/sync/v1/workspaces/a.b_c-9/ws?x=1");
  assert.equal(sessionUrl("ws://h/v1/workspaces/team/ws", "team"), "ws://h/v1/workspaces/team/ws");
  assert.equal(sessionUrl("ws://[::1]:9/", "a b"), "ws://[::1]:9/v1/workspaces/a%20b/ws");
});

// The outbox: a transient refusal (UNAVAILABLE, RATE_LIMITED) is retried, never rolled back.
function welcomed(client, tabs = [tab("a", "a0"), tab("b", "a1")], version = "2") {
  client.onWelcome({ epoch: "e1", snapshot: { workspace: "w", version, epoch: "e1", tabs, activeTabId: "a", editable: true } });
}

for (const code of ["UNAVAILABLE", "RATE_LIMITED"]) {
  test(`an op refused ${code} stays pending and goes again with a new seq and its base version`, () => {
    const client = offlineClient();
    client.retry = { first: 0, max: 0, rateLimited: 0 };
    welcomed(client);
    const events = [];
    client.addEventListener("retrying", (e) => events.push(e.detail));
    client.addEventListener("rejected", (e) => events.push({ rolledBack: e.detail }));
    client.remove("b");
    assert.deepEqual(client.state.tabs.map((t) => t.id), ["a"]);
    assert.equal(client.sent.at(-1).submit.seq, "1");
    client.onRejected({ seq: "1", code, message: "not now" });
    // Still shown as done, still pending, not rolled back; a "retrying" event, no "rejected".
    assert.deepEqual(client.state.tabs.map((t) => t.id), ["a"]);
    assert.equal(client.pending.length, 1);
    assert.equal(client.retrying.length, 1);
    assert.deepEqual(events.map((e) => e.code ?? "rolled back"), [code]);
    assert.equal(events[0].attempts, 1);
    client.resendDue(Date.now() + 1);
    const again = client.sent.at(-1).submit;
    assert.equal(again.seq, "2"); // a new op: the refused seq was consumed
    assert.equal(again.baseVersion, "2"); // its original base version (rule 7 still translates its key)
    assert.deepEqual(again.op, { remove: { tabId: "b" } });
    // Refused again: attempts count up; then applied: the outbox is empty.
    client.onRejected({ seq: "2", code, message: "" });
    assert.equal(client.retrying[0].retry.attempts, 2);
    client.resendDue(Date.now() + 1);
    assert.equal(client.sent.at(-1).submit.seq, "3");
    client.onApplied({ version: "3", clientId: "me", seq: "3", activeTabId: "a", op: { remove: { tabId: "b" } } });
    assert.equal(client.pending.length, 0);
    assert.deepEqual(client.state.tabs.map((t) => t.id), ["a"]);
    assert.ok(!events.some((e) => e.rolledBack));
  });
}

test("a permanent refusal rolls back, and the rejected event comes before the state drops the op", () => {
  const client = offlineClient();
  welcomed(client);
  let seenInState = null;
  client.addEventListener("rejected", () => { seenInState = client.state.tabs.some((t) => t.id === "c"); });
  client.add({ id: "c", title: "C" });
  client.onRejected({ seq: "1", code: "NOT_EDITABLE", message: "" });
  assert.equal(seenInState, true);
  assert.deepEqual(client.state.tabs.map((t) => t.id), ["a", "b"]);
  assert.equal(client.pending.length, 0);
});

test("an op waiting for its retry is sent by the next Welcome, once, with a fresh seq", () => {
  const client = offlineClient();
  client.retry = { first: 60_000, max: 60_000, rateLimited: 60_000 };
  welcomed(client);
  client.move("a", "a2");
  client.onRejected({ seq: "1", code: "UNAVAILABLE", message: "" });
  client.resendDue(); // its back-off is not over: nothing sent
  assert.equal(client.sent.filter((m) => m.submit).length, 1);
  // The connection drops and comes back: the Welcome numbers it after the last consumed seq.
  client.welcomed = false;
  welcomed(client, [tab("a", "a0"), tab("b", "a1")], "2");
  const submits = client.sent.filter((m) => m.submit);
  assert.equal(submits.length, 2);
  assert.equal(submits[1].submit.seq, "2");
  client.resendDue(Date.now() + 120_000); // nothing left waiting: not sent a third time
  assert.equal(client.sent.filter((m) => m.submit).length, 2);
  client.close();
});

test("a retried op goes after the ops submitted meanwhile, as the server will apply it", () => {
  const client = offlineClient();
  client.retry = { first: 0, max: 0, rateLimited: 0 };
  welcomed(client);
  client.move("a", "a2"); // seq 1: a after b
  client.move("b", "a3"); // seq 2: b after a
  client.onRejected({ seq: "1", code: "RATE_LIMITED", message: "" });
  assert.deepEqual(client.pending.map((p) => p.op.move.tabId), ["b", "a"]);
  client.resendDue(Date.now() + 1);
  assert.equal(client.sent.at(-1).submit.seq, "3");
});

test("applied and welcome events name the tabs that left the confirmed state", () => {
  const client = offlineClient();
  const removed = [];
  client.addEventListener("applied", (e) => removed.push(...e.detail.removed));
  let welcome = null;
  client.addEventListener("welcome", (e) => { welcome = e.detail; });
  welcomed(client);
  assert.deepEqual(welcome, { previousEpoch: "", epoch: "e1", recovered: false, newHistory: false, removed: [] });
  client.onApplied({ version: "3", clientId: "other", seq: "7", activeTabId: "a", op: { remove: { tabId: "b" } } });
  assert.deepEqual(removed, ["b"]);
  client.welcomed = false;
  client.onWelcome({ epoch: "e2", snapshot: { workspace: "w", version: "0", epoch: "e2", tabs: [], editable: true } });
  // Another epoch is another history: no op removed "a".
  assert.deepEqual(welcome, { previousEpoch: "e1", epoch: "e2", recovered: false, newHistory: true, removed: [] });
});

test("a canonical restore replaces tabs (keys as given), editable and the active tab", () => {
  const client = offlineClient();
  client.onWelcome({ epoch: "e1", snapshot: { workspace: "w", version: "4", epoch: "e1",
    tabs: [tab("a", "a0"), tab("b", "a1"), tab("c", "a2")], activeTabId: "c", editable: true } });
  client.onApplied({ version: "5", clientId: "other", seq: "1", activeTabId: "x",
    op: { restore: { version: "2", state: { tabs: [tab("x", "Zz"), tab("a", "a5")], activeTabId: "x" } } } });
  assert.equal(client.confirmed.version, 5);
  assert.deepEqual(client.state.tabs.map((t) => [t.id, t.key]), [["x", "Zz"], ["a", "a5"]]);
  assert.equal(client.state.activeTabId, "x");
  assert.equal(client.state.editable, false); // absent in JSON: false
});

test("restore and reopen go through the outbox without changing the optimistic view", () => {
  const client = offlineClient();
  client.onWelcome({ epoch: "e1", lastSeq: "3", snapshot: { workspace: "w", version: "4", epoch: "e1",
    tabs: [tab("a", "a0")], activeTabId: "a", editable: true } });
  const before = JSON.stringify(client.state);
  client.restore(2);
  client.reopen("b");
  assert.equal(JSON.stringify(client.state), before);
  assert.deepEqual(client.sent.map((m) => m.submit), [
    { seq: "4", baseVersion: "4", op: { restore: { version: "2" } } },
    { seq: "5", baseVersion: "4", op: { reopen: { tabId: "b" } } },
  ]);
  assert.equal(client.pending.length, 2);
  // The reopen comes back as the add it became: it leaves the outbox, the tab shows.
  client.onApplied({ version: "5", clientId: "me", seq: "5", activeTabId: "b",
    op: { add: { tab: tab("b", "a1"), activate: true } } });
  assert.deepEqual(client.state.tabs.map((t) => t.id), ["a", "b"]);
  assert.deepEqual(client.pending.map((p) => p.seq), [4]);
});

test("history() answers by id, rejects when the connection closes or the deadline passes", async () => {
  const client = offlineClient();
  client.onWelcome({ epoch: "e1", snapshot: { workspace: "w", version: "1", epoch: "e1", editable: true } });
  globalThis.WebSocket ??= { OPEN: 1 }; // Node 20 has none; only the constant is read here
  client.ws = { readyState: WebSocket.OPEN, close() { this.readyState = 3; } };
  const first = client.history({ ops: { before: 9, limit: 2 } });
  const second = client.history({ closed: 5 });
  assert.deepEqual(client.sent.slice(-2), [
    { history: { id: 1, ops: { before: "9", limit: 2 } } },
    { history: { id: 2, closed: 5 } },
  ]);
  client.receive({ history: { id: 2, closed: [{ tab: tab("z", "a0"), version: "3" }] } });
  assert.equal((await second).closed[0].tab.id, "z");
  client.receive({ history: { id: 1, ops: [], next: "0" } });
  assert.deepEqual((await first).ops, []);
  const late = client.history({ version: 1 }, { timeout: 20 });
  await assert.rejects(late, /no answer in time/);
  const cut = client.history({ at: "2026-01-01T00:00:00Z" });
  client.close();
  await assert.rejects(cut, /closed/);
  await assert.rejects(client.history({ version: 1 }), /not connected/);
});

// Saved state: exportState()/importState() are the only way in and out of the client's fields.
test("exportState is a JSON deep copy that importState takes back, outbox, seqs and rekeys included", () => {
  const client = offlineClient();
  client.retry = { first: 60_000, max: 60_000, rateLimited: 60_000 };
  client.onWelcome({ epoch: "e1", lastSeq: "4", snapshot: { workspace: "w", version: "3", epoch: "e1",
    tabs: [tab("a", "a0"), tab("b", "a0V"), tab("c", "a1")], activeTabId: "a", editable: true } });
  client.move("a", "a0x"); // seq 5, between b and c by the old keys
  client.remove("c"); // seq 6
  client.onRejected({ seq: "6", code: "RATE_LIMITED", message: "" }); // held, seq 0
  client.onApplied({ version: "4", clientId: "", seq: "0", activeTabId: "a",
    op: { rekey: { keys: [{ tabId: "a", key: "a0" }, { tabId: "b", key: "a1" }, { tabId: "c", key: "a2" }] } } });
  const saved = client.exportState();
  assert.deepEqual(Object.keys(saved).sort(), ["confirmed", "nextSeq", "pending", "rekeys", "seen"]);
  assert.deepEqual(JSON.parse(JSON.stringify(saved)), saved);
  assert.deepEqual(saved.seen, { e1: 4 });
  saved.pending[0].op.move.tabId = "zzz"; // a copy: the client is untouched
  saved.confirmed.tabs.length = 0;
  assert.equal(client.pending[0].op.move.tabId, "a");
  assert.equal(client.confirmed.tabs.length, 3);

  const fresh = offlineClient();
  fresh.importState(JSON.parse(JSON.stringify(client.exportState())));
  assert.deepEqual(fresh.state, client.state);
  assert.deepEqual(fresh.exportState(), client.exportState());
  assert.deepEqual(fresh.state.tabs.map((t) => t.id), ["b", "a"]); // the move translated through the rekey
  // Resumed: the held op goes with a new seq after every seq handed out.
  fresh.onWelcome({ epoch: "e1", recovered: true, missed: [], lastSeq: "4" });
  assert.deepEqual(fresh.sent.filter((m) => m.submit).map((m) => m.submit.seq), ["5", "7"]);
  client.close();
  fresh.close();
});

test("importState takes the extension's older { confirmed, pending, nextSeq } and rejects a wrong shape whole", () => {
  const client = offlineClient();
  client.importState({
    confirmed: { workspace: "w", version: 7, epoch: "e9", tabs: [tab("a", "a0")], activeTabId: "a", editable: true },
    pending: [{ seq: 3, baseVersion: 7, op: { add: { tab: { id: "n", title: "N" } } } }],
    nextSeq: 4,
  });
  assert.deepEqual(client.state.tabs.map((t) => t.id), ["a", "n"]);
  assert.deepEqual(client.exportState().seen, { e9: 7 });
  // An outbox saved with an unnumbered op before numbered ones: the numbered go first, in seq
  // order, so no op takes a seq above one still to be resent.
  const mixed = offlineClient();
  mixed.importState({ confirmed: { epoch: "e9", version: 7, tabs: [tab("a", "a0")] }, nextSeq: 6, pending: [
    { seq: 0, baseVersion: 7, op: { update: { tabId: "a", title: "held" } }, retry: { code: "UNAVAILABLE", attempts: 1 } },
    { seq: 5, baseVersion: 7, op: { update: { tabId: "a", title: "five" } } },
    { seq: 4, baseVersion: 7, op: { update: { tabId: "a", title: "four" } } },
  ] });
  mixed.onWelcome({ epoch: "e9", recovered: true, missed: [], lastSeq: "3" });
  assert.deepEqual(submits(mixed).map((m) => [m.seq, m.op.update.title]), [["4", "four"], ["5", "five"], ["6", "held"]]);
  mixed.close();
  assert.equal(client.exportState().nextSeq, 4);
  const before = JSON.stringify(client.exportState());
  for (const bad of [null, {}, { confirmed: { tabs: "x" } },
    { confirmed: { tabs: [] }, pending: [{ seq: 1, op: {} }] },
    { confirmed: { tabs: [] }, pending: [{ seq: -1, op: { remove: { tabId: "a" } } }] },
    { confirmed: { tabs: [] }, nextSeq: "x" }]) {
    assert.throws(() => client.importState(bad), TypeError);
  }
  assert.equal(JSON.stringify(client.exportState()), before);
});

// Issue 39: an op is settled only by its own answer (docs/design.md, "Submit, seqs and dedup").
function submits(client) {
  return client.sent.filter((m) => m.submit).map((m) => m.submit);
}

test("an op at or below Welcome.lastSeq with no answer is sent again with its seq; a repeated RATE_LIMITED holds it, never settles it", () => {
  const client = offlineClient();
  client.retry = { first: 0, max: 0, rateLimited: 0 };
  welcomed(client);
  const events = [];
  for (const type of ["rejected", "retrying", "answergone"]) client.addEventListener(type, (e) => events.push(type));
  client.remove("b"); // seq 1: consumed by the server, refused RATE_LIMITED, its Rejected lost to a close
  client.welcomed = false;
  client.sentHere.clear();
  client.onWelcome({ epoch: "e1", recovered: true, missed: [], lastSeq: "1" });
  assert.deepEqual(client.pending.map((p) => p.seq), [1]); // not settled by lastSeq
  assert.deepEqual(submits(client).map((s) => s.seq), ["1", "1"]); // sent again with its seq
  assert.deepEqual(client.state.tabs.map((t) => t.id), ["a"]); // still shown as the user left it
  client.onRejected({ seq: "1", code: "RATE_LIMITED", message: "the stored answer" });
  assert.deepEqual(events, ["retrying"]);
  client.resendDue(Date.now() + 1);
  assert.deepEqual(submits(client).at(-1), { seq: "2", baseVersion: "2", op: { remove: { tabId: "b" } } });
  client.onApplied({ version: "3", clientId: "me", seq: "2", activeTabId: "a", op: { remove: { tabId: "b" } } });
  assert.equal(client.pending.length, 0);
  client.close();
});

test("a repeated Applied at a version already held settles its op; a missed Applied of ours settles it without a resend", () => {
  const client = offlineClient();
  welcomed(client);
  client.remove("b"); // seq 1
  client.add({ id: "c", title: "C" }); // seq 2
  client.welcomed = false;
  client.sentHere.clear();
  // Resumed at v2 while seq 1 was applied at v3 (in missed) and seq 2 at v4 (the snapshot said 4).
  client.onWelcome({ epoch: "e1", recovered: true, lastSeq: "2", missed: [
    { version: "3", clientId: "me", seq: "1", activeTabId: "a", op: { remove: { tabId: "b" } } },
    { version: "4", clientId: "me", seq: "2", activeTabId: "a", op: { add: { tab: tab("c", "a2") } } },
  ] });
  assert.equal(client.pending.length, 0);
  assert.deepEqual(submits(client).map((s) => s.seq), ["1", "2"]); // the first sendings only
  // A snapshot resume: the ops were applied before it, so only the repeated answers can say so.
  client.update("a", { title: "A2" }); // seq 3
  client.welcomed = false;
  client.sentHere.clear();
  // Seq 3 was applied at v5, and another client's op at v6.
  client.onWelcome({ epoch: "e1", lastSeq: "3", snapshot: { workspace: "w", version: "6", epoch: "e1",
    tabs: [tab("a", "a0"), tab("c", "a2")], activeTabId: "a", editable: true } });
  assert.deepEqual(submits(client).map((s) => s.seq), ["1", "2", "3", "3"]);
  const applied = [];
  client.addEventListener("applied", (e) => applied.push(e.detail));
  client.onApplied({ version: "5", clientId: "me", seq: "3", activeTabId: "a", op: { update: { tabId: "a", title: "A2" } } });
  assert.equal(client.pending.length, 0);
  assert.equal(client.confirmed.version, 6);
  assert.deepEqual(applied, []); // nothing new in the confirmed state
});

test("ANSWER_GONE drops the op without a refusal; a permanent repeated Rejected rolls it back", () => {
  const client = offlineClient();
  welcomed(client);
  const events = [];
  for (const type of ["rejected", "retrying", "answergone"]) client.addEventListener(type, (e) => events.push([type, e.detail.seq]));
  client.remove("b"); // seq 1
  client.move("a", "a2"); // seq 2
  client.welcomed = false;
  client.sentHere.clear();
  client.onWelcome({ epoch: "e1", recovered: true, missed: [], lastSeq: "2" });
  client.onRejected({ seq: "1", code: "ANSWER_GONE", message: "" });
  client.onRejected({ seq: "2", code: "LOCKED", message: "" });
  assert.deepEqual(events, [["answergone", 1], ["rejected", 2]]);
  assert.equal(client.pending.length, 0);
});

// Issue 39: the backup rule (docs/design.md, "Resume and epoch").
test("a snapshot under our epoch below a version seen under it is a new history: no splice, nothing reported removed", () => {
  const client = offlineClient();
  let welcome = null;
  client.addEventListener("welcome", (e) => { welcome = e.detail; });
  welcomed(client, [tab("a", "a0")], "1");
  for (const [v, id, key] of [[2, "b", "a1"], [3, "c", "a2"], [4, "d", "a3"]]) {
    client.onApplied({ version: String(v), clientId: "other", seq: String(v), activeTabId: "a", op: { add: { tab: tab(id, key) } } });
  }
  client.add({ id: "mine", title: "M" }); // pending: kept across the new history
  // Saved and restored (a worker restart) before the server, brought back from a copy, answers.
  const saved = client.exportState();
  const fresh = offlineClient();
  fresh.addEventListener("welcome", (e) => { welcome = e.detail; });
  fresh.importState({ confirmed: saved.confirmed, pending: saved.pending, nextSeq: saved.nextSeq }); // the older shape
  fresh.onWelcome({ epoch: "e1", lastSeq: "0", snapshot: { workspace: "w", version: "1", epoch: "e1",
    tabs: [tab("a", "a0")], activeTabId: "a", editable: true } });
  assert.deepEqual(welcome, { previousEpoch: "e1", epoch: "e1", recovered: false, newHistory: true, removed: [] });
  assert.deepEqual(fresh.confirmed.tabs.map((t) => t.id), ["a"]);
  assert.equal(fresh.confirmed.version, 1);
  assert.deepEqual(fresh.state.tabs.map((t) => t.id), ["a", "mine"]);
  assert.deepEqual(fresh.exportState().seen, { e1: 1 }); // the new history's versions from here
  // The same history resumed by a snapshot at or above what was seen: removals are real.
  fresh.welcomed = false;
  fresh.onWelcome({ epoch: "e1", lastSeq: "1", snapshot: { workspace: "w", version: "2", epoch: "e1", tabs: [], editable: true } });
  assert.deepEqual(welcome, { previousEpoch: "e1", epoch: "e1", recovered: false, newHistory: false, removed: ["a"] });
  client.close();
  fresh.close();
});

// Issue 39: pacing under Welcome.limits, and back-off with jitter on RATE_LIMITED.
test("ops are paced under min(maxOpsPerSecond, maxOpsPerSecondPerUser), in outbox order", () => {
  const client = offlineClient();
  client.onWelcome({ epoch: "e1", limits: { maxOpsPerSecond: 100, maxOpsPerSecondPerUser: 2 },
    snapshot: { workspace: "w", version: "1", epoch: "e1", tabs: [tab("a", "a0")], activeTabId: "a", editable: true } });
  assert.equal(client.pace, 2);
  for (let i = 0; i < 5; i++) client.update("a", { title: `t${i}` });
  // A burst of half the rate (1 of 2), so the server's bucket keeps the other in reserve.
  assert.deepEqual(submits(client).map((s) => s.op.update.title), ["t0"]);
  assert.ok(client.pumpTimer, "a timer waits for the next token");
  assert.equal(client.state.tabs[0].title, "t4"); // every op shows at once all the same
  const start = client.bucket.at;
  client.pump(start + 500); // 0.5 s at 90% of 2/s: 0.9 of a token, none yet
  assert.deepEqual(submits(client).map((s) => s.op.update.title), ["t0"]);
  client.pump(start + 600); // 1.08 tokens: one goes
  assert.deepEqual(submits(client).map((s) => s.op.update.title), ["t0", "t1"]);
  client.pump(start + 3000); // 2.4 s later: the bucket holds its burst of 1, never more
  assert.deepEqual(submits(client).map((s) => s.op.update.title), ["t0", "t1", "t2"]);
  client.pump(start + 3600);
  client.pump(start + 4200);
  assert.deepEqual(submits(client).map((s) => [s.seq, s.op.update.title]),
    [["1", "t0"], ["2", "t1"], ["3", "t2"], ["4", "t3"], ["5", "t4"]]);
  client.close();
  // No per-user rate (0): the connection's own.
  const free = offlineClient();
  free.onWelcome({ epoch: "e1", limits: { maxOpsPerSecond: 100, maxOpsPerSecondPerUser: 0 },
    snapshot: { workspace: "w", version: "1", epoch: "e1", tabs: [tab("a", "a0")], activeTabId: "a", editable: true } });
  assert.equal(free.pace, 100);
  for (let i = 0; i < 5; i++) free.update("a", { title: `t${i}` });
  assert.equal(submits(free).length, 5);
  free.close();
  // Pacing off (the extension's tests of the RATE_LIMITED path): the limits are not obeyed.
  const unpaced = offlineClient();
  unpaced.pacing = false;
  unpaced.onWelcome({ epoch: "e1", limits: { maxOpsPerSecond: 2 },
    snapshot: { workspace: "w", version: "1", epoch: "e1", tabs: [tab("a", "a0")], activeTabId: "a", editable: true } });
  for (let i = 0; i < 5; i++) unpaced.update("a", { title: `t${i}` });
  assert.equal(submits(unpaced).length, 5);
  unpaced.close();
});

test("RATE_LIMITED backs off with jitter, doubling, and the ops behind a held op wait for it", () => {
  const client = offlineClient();
  client.retry = { first: 200, max: 5000, rateLimited: 1000 };
  welcomed(client);
  // The back-off an answer gave, bounded by the clock read before and after it (no timing).
  const backoff = (seq) => {
    const before = Date.now();
    client.onRejected({ seq, code: "RATE_LIMITED", message: "" });
    const after = Date.now();
    const { retryAt } = client.pending.find((p) => p.retry && p.retryAt);
    return [retryAt - before, retryAt - after];
  };
  client.update("a", { title: "x" }); // seq 1
  const first = backoff("1");
  client.update("b", { title: "y" }); // behind the held op: waits
  assert.deepEqual(submits(client).map((s) => s.seq), ["1"]);
  assert.deepEqual(client.pending.map((p) => p.op.update.tabId), ["a", "b"]);
  client.resendDue(client.pending[0].retryAt);
  assert.deepEqual(submits(client).map((s) => [s.seq, s.op.update.tabId]), [["1", "a"], ["2", "a"], ["3", "b"]]);
  const second = backoff("2");
  assert.ok(first[0] >= 499 && first[1] <= 1001, `first back-off ${first}`); // 1 s, jittered to [0.5, 1]
  assert.ok(second[0] >= 999 && second[1] <= 2001, `second back-off ${second}`); // doubled
  // Jittered: many clients refused together do not come back together.
  const spread = new Set();
  for (let i = 0; i < 20; i++) {
    const c = offlineClient();
    welcomed(c);
    c.update("a", { title: "x" });
    c.onRejected({ seq: "1", code: "RATE_LIMITED", message: "" });
    spread.add(c.pending[0].retryAt);
    c.close();
  }
  assert.ok(spread.size > 1);
  client.close();
});

test("reconnects back off with full jitter: 1,000 delays cover the whole window", () => {
  // A server that went away and came back: its clients' next tries must spread over
  // [0, min(max, first·2^attempts)], not bunch in its upper half (docs/design.md, "Reconnecting").
  const client = offlineClient();
  client.backoff = { first: 250, max: 5000 };
  const window = 2000; // 250 · 2^3
  const quarters = [0, 0, 0, 0];
  for (let i = 0; i < 1000; i++) {
    client.attempts = 3;
    const before = Date.now();
    client.scheduleReconnect();
    clearTimeout(client.timer);
    const delay = client.retryAt - before;
    assert.ok(delay >= 0 && delay <= window + 5, `delay ${delay}`);
    quarters[Math.min(3, Math.floor((delay / window) * 4))]++;
  }
  assert.equal(client.attempts, 4);
  // Uniform: about 250 in each quarter; 150 is far outside chance. Half jitter puts none in the
  // first two.
  assert.ok(quarters.every((n) => n > 150), `delays per quarter of the window: ${quarters}`);
  client.close();
});
