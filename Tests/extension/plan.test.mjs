// node --test: the contract's rules (docs/extension.md, "The contract"), one test each, against
// the pure planner (extension/plan.js). No browser: a window and a server as values (plan-world.mjs).
import { test } from "node:test";
import assert from "node:assert/strict";
import { LAZY_THRESHOLD, planArrange, planChanges } from "../../extension/plan.js";
import { BASE, context, realTab, tableOf, workspace } from "./plan-world.mjs";

const kinds = (plan) => plan.ops.map((op) => Object.keys(op)[0]);
const actionKinds = (plan) => plan.actions.map((a) => Object.keys(a)[0]);

/** A window of real tabs 1..n showing workspace tabs a, b, c, ... all mapped and synced. */
function synced(n) {
  const ids = "abcdefghijklmnop".slice(0, n).split("");
  const state = workspace(ids);
  const real = ids.map((id, i) => realTab(i + 1, state.tabs[i], { active: i === 0 }));
  const table = tableOf(ids.map((id, i) => [i + 1, id]), state);
  table.lastActive = ids[0];
  return { ids, state, real, table };
}

test("a synced window plans nothing", () => {
  const { state, real, table } = synced(4);
  const changes = planChanges(context(real, state, table));
  const arrange = planArrange(context(real, state, table));
  assert.deepEqual([changes.ops, changes.actions, arrange.ops, arrange.actions], [[], [], [], []]);
  assert.equal(arrange.focus, "a");
});

test("rule: a local close is a remove; a closed tab's id already removed sends nothing", () => {
  const { state, real, table } = synced(3);
  const plan = planChanges(context(real.filter((t) => t.id !== 2), state, table));
  assert.deepEqual(plan.ops, [{ remove: { tabId: "b" } }]);
  assert.equal(table.tabOf("b"), undefined);
  const again = synced(3);
  again.table.removed.add("b");
  assert.deepEqual(planChanges(context(again.real.filter((t) => t.id !== 2), again.state, again.table)).ops, []);
});

test("rule: a read-only mirror closes a tab here only (dismissed, not reopened)", () => {
  const { state, real, table } = synced(3);
  const plan = planChanges(context(real.filter((t) => t.id !== 2), state, table, { readOnly: true }));
  assert.deepEqual(plan.ops, []);
  assert.deepEqual(plan.actions, []);
  assert.ok(table.dismissed.has("b"));
});

test("rule: pinning a tab takes it out of the workspace and keeps it here, local only", () => {
  const { state, real, table } = synced(3);
  real[1].pinned = true;
  const plan = planChanges(context(real, state, table));
  assert.deepEqual(plan.ops, [{ remove: { tabId: "b" } }]);
  assert.equal(table.localOnly(2).code, "pinned");
  assert.deepEqual(plan.actions, []);
});

test("rule: a local move is a move after the real left neighbour that stayed", () => {
  const { state, real, table } = synced(4);
  const moved = [real[3], real[0], real[1], real[2]];
  const plan = planChanges(context(moved, state, table));
  assert.deepEqual(kinds(plan), ["move"]);
  assert.equal(plan.ops[0].move.tabId, "d");
  assert.ok(plan.ops[0].move.place.key < state.tabs[0].key);
});

test("rule: a local open is an add under an id made from the real tab, after its left neighbour", () => {
  const { state, real, table } = synced(2);
  const plan = planChanges(context([real[0], realTab(9, "new"), real[1]], state, table));
  assert.deepEqual(kinds(plan), ["add"]);
  const add = plan.ops[0].add;
  assert.equal(add.tab.id, "xn-9");
  assert.equal(add.tab.url, "https://example.test/new");
  assert.ok(add.place.key > state.tabs[0].key && add.place.key < state.tabs[1].key);
  assert.equal(table.tabOf("xn-9"), 9);
});

test("defect: an unmapped placeholder (a lazy tab pinned and unpinned) is added as the page it stands for", () => {
  // Chaos seed 3902, step 140: the tab was published with the placeholder's own URL as its title
  // and no page URL, and the other browser opened a placeholder of nothing.
  const { state, real, table } = synced(2);
  const url = `${BASE}placeholder.html?title=Page+m57&url=https%3A%2F%2Fexample.test%2Fm57&id=gone`;
  const plan = planChanges(context([...real, realTab(9, { title: url, url })], state, table));
  assert.deepEqual(kinds(plan), ["add"]);
  assert.deepEqual(plan.ops[0].add.tab, { id: "xn-9", title: "Page m57", url: "https://example.test/m57" });
  const blank = `${BASE}placeholder.html?title=&id=gone`;
  const bare = planChanges(context([...real, realTab(8, { title: blank, url: blank })], state, tableOf([[1, "a"], [2, "b"]], state)));
  assert.deepEqual(bare.ops[0].add.tab, { id: "xn-8", title: "" });
});

test("rule: a local-only tab, a pinned tab and a tab of a read-only mirror are never published", () => {
  const { state, real, table } = synced(2);
  table.setLocalOnly(9, { code: "LIMIT_EXCEEDED", title: "x" });
  const pinned = realTab(8, "pinned", { pinned: true });
  assert.deepEqual(planChanges(context([pinned, ...real, realTab(9, "refused")], state, table)).ops, []);
  const ro = synced(2);
  const plan = planChanges(context([...ro.real, realTab(7, "mine")], ro.state, ro.table, { readOnly: true, viewer: true }));
  assert.deepEqual(plan.ops, []);
  assert.equal(ro.table.localOnly(7).code, "NOT_PERMITTED");
});

test("rule: a tab whose made-up id is in the workspace already is ours (a restart): mapped, not added", () => {
  const { state, real, table } = synced(2);
  const ours = workspace(["a", "b", "xn-9"]);
  const plan = planChanges(context([...real, realTab(9, ours.tabs[2])], ours, table));
  assert.deepEqual(plan.ops, []);
  assert.equal(table.tabOf("xn-9"), 9);
  void state;
});

test("rule: a mapped tab the workspace lost (no op removed it) is added again under its id", () => {
  const { real, table } = synced(3);
  const lost = workspace(["a", "c"]);
  const plan = planChanges(context(real, lost, table));
  assert.deepEqual(plan.ops.map((op) => op.add?.tab.id), ["b"]);
  assert.deepEqual(plan.actions, []);
});

test("rule: Firefox's about:blank tab waits for its URL before it is published", () => {
  const { state, real, table } = synced(1);
  const plan = planChanges(context([...real, realTab(5, { title: "", url: "about:blank" })], state, table, { urlPending: (t) => t.id === 5 }));
  assert.deepEqual(plan.ops, []);
  assert.ok(plan.later > 0);
});

test("rule: a remote open opens once, at its place; a dismissed tab is not reopened", () => {
  const { real, table } = synced(2);
  const grown = workspace(["a", "z", "b", "y"]);
  const plan = planChanges(context(real, grown, table));
  assert.deepEqual(plan.actions.map((a) => [a.open.tab.id, a.open.index]), [["z", 1], ["y", 3]]);
  table.dismissed.add("z");
  const again = planChanges(context(real, grown, table));
  assert.deepEqual(again.actions.map((a) => a.open.tab.id), ["y"]);
});

test("rule: past the threshold the rest open lazily", () => {
  const ids = Array.from({ length: LAZY_THRESHOLD + 3 }, (_, i) => `w${i}`);
  const plan = planChanges(context([], workspace(ids), tableOf([], workspace([]))));
  assert.deepEqual(plan.actions.map((a) => a.open.lazy), ids.map((_, i) => i >= LAZY_THRESHOLD));
});

test("rule: only an applied remove closes a tab", () => {
  const { real, table } = synced(3);
  const shrunk = workspace(["a", "c"]);
  // No op removed b: it is published again, not closed.
  assert.deepEqual(actionKinds(planChanges(context(real, shrunk, table))), []);
  const applied = synced(3);
  applied.table.removed.add("b");
  const plan = planChanges(context(applied.real, shrunk, applied.table));
  assert.deepEqual(plan.actions, [{ close: { tabIds: [2] } }]);
  assert.deepEqual(plan.ops, []);
  assert.equal(applied.table.removed.size, 0);
});

test("rule: a removed id back in the workspace is not closed", () => {
  const { state, real, table } = synced(3);
  table.removed.add("b");
  assert.deepEqual(planChanges(context(real, state, table)).actions, []);
  assert.ok(!table.removed.has("b"));
});

test("rule: the brake: a snapshot that lacks more than 5 and more than half of the tabs pauses", () => {
  const { real, table } = synced(8);
  for (const id of "abcdef") table.snapshotRemoved.add(id);
  const plan = planChanges(context(real, workspace(["g", "h"]), table));
  assert.equal(plan.pause.kind, "brake");
  assert.equal(plan.pause.count, 6);
  assert.deepEqual(actionKinds(plan), []);
  assert.equal(table.paused.kind, "brake");
  // A paused mirror plans nothing, then.
  assert.deepEqual(planChanges(context(real, workspace(["g", "h"]), table)).ops, []);
  // A few at once close.
  const few = synced(8);
  for (const id of "ab") few.table.snapshotRemoved.add(id);
  const closes = planChanges(context(few.real, workspace("cdefgh".split("")), few.table)).actions.filter((a) => a.close);
  assert.deepEqual(closes, [{ close: { tabIds: [1, 2] } }]);
});

test("rule: an epoch pause ends by itself once the workspace holds every tab of the window", () => {
  const { state, real, table } = synced(2);
  table.paused = { kind: "epoch", reason: "r", count: 1 };
  assert.equal(planChanges(context(real, workspace(["a"]), table)).pause.kind, "epoch");
  assert.equal(planChanges(context(real, state, table)).pause, null);
  assert.equal(table.paused, null);
});

test("rule: closing the active tab shows the workspace's active tab first; an emptied window keeps a placeholder", () => {
  const { real, table } = synced(2);
  table.removed.add("a");
  const plan = planChanges(context(real, workspace(["b"], "b"), table));
  assert.deepEqual(plan.actions, [{ activate: { wsId: "b" } }, { close: { tabIds: [1] } }]);
  const all = synced(1);
  all.table.removed.add("a");
  assert.deepEqual(actionKinds(planChanges(context(all.real, workspace([]), all.table))), ["filler", "close"]);
});

test("rule: remote moves take the workspace's order with the fewest moves", () => {
  const { real, table } = synced(4);
  const order = workspace(["b", "c", "d", "a"]);
  const plan = planArrange(context(real, order, table));
  assert.deepEqual(plan.actions.filter((a) => a.move), [{ move: { tabId: 1, index: 3 } }]);
  assert.deepEqual(table.lastOrder, ["b", "c", "d", "a"]);
});

test("rule: follow shares the active tab both ways; browse keeps it local", () => {
  const { state, real, table } = synced(3);
  real[0].active = false;
  real[2].active = true;
  assert.deepEqual(planArrange(context(real, state, table)).ops, [{ activate: { tabId: "c" } }]);
  const other = synced(3);
  const plan = planArrange(context(other.real, { ...other.state, activeTabId: "b" }, other.table));
  assert.deepEqual(plan.actions, [{ activate: { tabId: 2 } }]);
  const browse = synced(3);
  const b = planArrange(context(browse.real, { ...browse.state, activeTabId: "b" }, browse.table, { mode: "browse" }));
  assert.deepEqual([b.ops, b.actions], [[], []]);
});

test("rule: navigation follows a remote URL, never over a page the user navigated", () => {
  const { state, real, table } = synced(2);
  const moved = { ...state, tabs: state.tabs.map((t) => (t.id === "a" ? { ...t, url: "https://example.test/next" } : t)) };
  const plan = planArrange(context(real, moved, table));
  assert.deepEqual(plan.actions.map((a) => a.navigate?.tabId), [1]);
  assert.equal(table.record(1).navigating.url, "https://example.test/next");
  const user = synced(2);
  user.real[0].url = "https://example.test/elsewhere";
  assert.deepEqual(planArrange(context(user.real, moved, user.table)).actions, []);
});

test("rule: a page's title goes out once it rested, one update per tab per 5 s", () => {
  const { state, real, table } = synced(2);
  real[0].title = "(3) Renamed";
  table.record(1).changedAt = 1_000_000 - 100;
  const early = planArrange(context(real, state, table));
  assert.deepEqual(early.ops, []);
  assert.ok(early.later > 0);
  table.record(1).changedAt = 0;
  assert.deepEqual(planArrange(context(real, state, table)).ops, [{ update: { tabId: "a", title: "Renamed", badge: "3" } }]);
  real[0].title = "Again";
  const paced = planArrange(context(real, state, table));
  assert.deepEqual(paced.ops, []);
  assert.ok(paced.later > 4000);
});

test("rule: a tab being navigated says nothing of the page it leaves", () => {
  const { state, real, table } = synced(1);
  table.record(1).navigating = { url: "https://example.test/next", until: 1_000_000 + 5_000 };
  real[0].title = "Leaving";
  assert.deepEqual(planArrange(context(real, state, table)).ops, []);
});

test("defect: a placeholder's title (its own URL) is never published", () => {
  const { state, real, table } = synced(2);
  const url = `${BASE}placeholder.html?title=&url=https%3A%2F%2Fexample.test%2Fb&id=b`;
  real[1] = { ...real[1], url, title: url };
  assert.deepEqual(planArrange(context(real, state, table)).ops, []);
});

test("the pacing budget: past it the pass is deferred and retried", () => {
  const { state, real, table } = synced(1);
  const plan = planChanges(context([...real, realTab(5, "p"), realTab(6, "q"), realTab(7, "r")], state, table, { budget: 2 }));
  assert.equal(plan.ops.length, 2);
  assert.ok(plan.deferred);
  assert.equal(plan.used, 2);
  assert.equal(planArrange(context(real, state, table, { deferred: true })).later, 1000);
});
