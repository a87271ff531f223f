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
