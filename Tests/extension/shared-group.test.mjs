// node --test: the shared group's rules (docs/extension.md, "The shared group"), one test each,
// against the pure rules (extension/shared-group.js) and the planner run over a bound group's tabs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { planArrange, planChanges } from "../../extension/plan.js";
import { GroupTable } from "../../extension/group-table.js";
import {
  COLORS, SHARED, askedGroup, boundTabs, colorOf, localSharedOps, remoteSharedUpdate, restoredGroupId, restoredScope, sharedFields,
  shiftActions,
} from "../../extension/shared-group.js";
import { attachRecords, matchTabs } from "../../extension/mirror.js";
import { context, realTab, tableOf, workspace } from "./plan-world.mjs";

const G = 7; // the bound browser group

/** Workspace tabs a..e, a b in group "ga" (Work, blue), d e in "gb" (Read, red), c in none. */
function grouped() {
  const state = workspace(["a", "b", "c", "d", "e"]);
  const member = { a: "ga", b: "ga", d: "gb", e: "gb" };
  for (const t of state.tabs) t.group = member[t.id] ?? "";
  state.groups = [{ id: "ga", title: "Work", color: "blue" }, { id: "gb", title: "Read", color: "red" }];
  return state;
}

/**
 * A window: private tabs 1 and 2 (2 in a group of its own, 9), then the bound group G showing
 * the workspace's tabs a..e as real tabs 11..15, then private tab 3.
 */
function windowOf(state) {
  const real = [realTab(1, "p1", { active: true }), realTab(2, "p2", { groupId: 9 })];
  state.tabs.forEach((w, i) => real.push(realTab(11 + i, w, { groupId: G })));
  real.push(realTab(3, "p3"));
  real.forEach((t, index) => { t.index = index; });
  const table = tableOf(state.tabs.map((w, i) => [11 + i, w.id]), state);
  table.lastActive = "a";
  return { real, table };
}

test("rule: the workspace is the group's tabs, at the group's place in the window", () => {
  const state = grouped();
  const { real } = windowOf(state);
  const scope = boundTabs(real, G);
  assert.deepEqual(scope.tabs.map((t) => t.id), [11, 12, 13, 14, 15]);
  assert.equal(scope.offset, 2);
  assert.equal(boundTabs(real.filter((t) => t.groupId !== G), G), null, "the group gone: null (the binding ends)");
  assert.equal(boundTabs(real, null), null);
  assert.deepEqual(shiftActions([{ open: { index: 1 } }, { move: { tabId: 5, index: 0 } }, { close: { tabIds: [1] } }, { filler: {} }], 2),
    [{ open: { index: 3 } }, { move: { tabId: 5, index: 2 } }, { close: { tabIds: [1] } }, { filler: { index: 2 } }]);
});

test("rule: a synced group-bound window plans nothing, and never a private tab", () => {
  const state = grouped();
  const { real, table } = windowOf(state);
  const scope = boundTabs(real, G);
  const changes = planChanges(context(scope.tabs, state, table));
  const arrange = planArrange(context(scope.tabs, state, table));
  assert.deepEqual([changes.ops, changes.actions, arrange.ops, arrange.actions], [[], [], [], []]);
});

test("rule: a tab dragged out of the group leaves the workspace (a remove) and stays open", () => {
  const state = grouped();
  const { real, table } = windowOf(state);
  real.find((t) => t.id === 13).groupId = -1; // c dragged out, to the right of the group, say
  const plan = planChanges(context(boundTabs(real, G).tabs, state, table));
  assert.deepEqual(plan.ops, [{ remove: { tabId: "c" } }]);
  assert.deepEqual(plan.actions, [], "nothing closes");
  assert.equal(table.tabOf("c"), undefined, "tab 13 is private now");
});

test("rule: a tab dragged into the group joins the workspace, asking for its left neighbour's group", () => {
  const state = grouped();
  const { real, table } = windowOf(state);
  const groupOf = new Map(state.tabs.map((t) => [t.id, t.group]));
  const dragged = { ...realTab(4, "p4"), groupId: G };
  const inGroup = boundTabs(real, G).tabs;
  const scope = [inGroup[0], dragged, ...inGroup.slice(1)]; // between a and b
  const askGroup = (id, left, work) => askedGroup(groupOf, work, id, left);
  const plan = planChanges(context(scope, state, table, { askGroup }));
  assert.equal(plan.ops.length, 1);
  assert.equal(plan.ops[0].add.tab.id, "xn-4");
  assert.equal(plan.ops[0].add.tab.group, "ga", "a's group: the placement rule keeps it");
  assert.ok(!plan.ops.some((op) => op.group || op.ungroup), "the workspace's groups untouched");
});

test("rule: an added tab asks for its left neighbour's group, the first for its right one's, none when that has none", () => {
  const state = grouped();
  const work = { tabs: state.tabs.map((t) => ({ id: t.id, key: t.key })) };
  const groupOf = new Map(state.tabs.map((t) => [t.id, t.group]));
  assert.equal(askedGroup(groupOf, work, "n1", "d"), "gb");
  assert.equal(askedGroup(groupOf, work, "n2", null), "ga");
  assert.equal(askedGroup(groupOf, work, "n3", "c"), "");
  assert.equal(askedGroup(groupOf, work, "n4", "n1"), "gb", "an add after an add of the same pass asks what that one asked");
});

test("rule: the workspace's groups are flattened into the one group: remote opens and moves stay in it", () => {
  const state = grouped();
  const { real, table } = windowOf(state);
  const scope = boundTabs(real, G);
  const withNew = { ...state, tabs: [...state.tabs.slice(0, 3), { id: "n", key: state.tabs[2].key + "V", title: "N", url: "https://example.test/n", group: "" }, ...state.tabs.slice(3)] };
  const plan = planChanges(context(scope.tabs, withNew, table));
  const [open] = shiftActions(plan.actions, scope.offset);
  assert.equal(open.open.tab.id, "n");
  assert.equal(open.open.index, 5, "right after c's real tab (window index 4): inside the group, not before a private tab");
  const swapped = { ...state, tabs: [state.tabs[4], ...state.tabs.slice(0, 4)] };
  const arrange = planArrange(context(scope.tabs, swapped, table));
  const moves = shiftActions(arrange.actions.filter((a) => a.move), scope.offset);
  assert.deepEqual(moves, [{ move: { tabId: 15, index: 2 } }], "to the group's first place, never before private tab 2");
});

test("rule: the group's title and colour are the workspace's first group's, else its id and a colour of it", () => {
  assert.deepEqual(sharedFields(grouped(), "team"), { groupId: "ga", title: "Work", color: "blue" });
  const plain = workspace(["a", "b"]);
  plain.groups = [];
  assert.deepEqual(sharedFields(plain, "team"), { groupId: "", title: "team", color: colorOf("team") });
  assert.ok(COLORS.includes(colorOf("anything")));
  assert.equal(colorOf("team"), colorOf("team"));
});

test("rule: a rename or recolour of the bound group goes to the workspace (only what changed)", () => {
  const state = grouped();
  const groups = new GroupTable();
  const ctx = (bound, extra = {}) => ({ bound, state, groups, workspace: "team", newGroupId: () => "gnew", ...extra });
  assert.deepEqual(localSharedOps(ctx({ title: "Work", color: "blue" })), [], "the first pass records, sends nothing");
  assert.deepEqual(localSharedOps(ctx({ title: "Work!", color: "blue" })), [{ updateGroup: { groupId: "ga", title: "Work!" } }]);
  assert.deepEqual(localSharedOps(ctx({ title: "Work!", color: "blue" })), [], "sent once");
  assert.deepEqual(localSharedOps(ctx({ title: "Work!", color: "green" })), [{ updateGroup: { groupId: "ga", color: "green" } }]);
  assert.deepEqual(localSharedOps(ctx({ title: "x", color: "green" }, { readOnly: true })), [], "read-only: kept local");
});

test("rule: a rename in a workspace with no group names all its tabs as one new group (nothing moves)", () => {
  const state = workspace(["a", "b", "c"]);
  state.groups = [];
  const groups = new GroupTable();
  groups.fields.set(SHARED, { title: "team", color: colorOf("team") });
  const ops = localSharedOps({ bound: { title: "Trip", color: "pink" }, state, groups, workspace: "team", newGroupId: () => "gnew" });
  assert.deepEqual(ops, [{ group: { tabIds: ["a", "b", "c"], groupId: "gnew", title: "Trip", color: "pink" } }]);
});

test("rule: the bound group follows the workspace's rename, never over the user's own, never collapsed", () => {
  const state = grouped();
  const groups = new GroupTable();
  groups.fields.set(SHARED, { title: "Work", color: "blue" });
  state.groups[0] = { id: "ga", title: "Plans", color: "cyan" };
  const bound = { title: "Work", color: "blue", collapsed: true };
  assert.deepEqual(remoteSharedUpdate({ bound, state, groups, workspace: "team" }), { title: "Plans", color: "cyan" });
  assert.deepEqual(groups.fields.get(SHARED), { title: "Plans", color: "cyan" }, "recorded before the call");
  const mine = { title: "Mine", color: "cyan" }; // renamed here since: its op goes first
  assert.equal(remoteSharedUpdate({ bound: mine, state, groups, workspace: "team" }), null);
  assert.equal(remoteSharedUpdate({ bound: { title: "Plans", color: "cyan" }, state, groups, workspace: "team" }), null, "in step");
});

test("rule: a viewer's rename stays local, not undone by sync, until the workspace's next rename", () => {
  const state = grouped();
  const groups = new GroupTable();
  groups.fields.set(SHARED, { title: "Work", color: "blue" });
  const ctx = (bound) => ({ bound, state, groups, workspace: "team", readOnly: true, newGroupId: () => "gnew" });
  const mine = { title: "My copy", color: "pink" };
  assert.deepEqual(localSharedOps(ctx(mine)), [], "never sent");
  assert.equal(remoteSharedUpdate(ctx(mine)), null, "not undone while the workspace's fields are the ones last synced");
  assert.deepEqual(groups.fields.get(SHARED), { title: "Work", color: "blue" });
  state.groups[0] = { id: "ga", title: "Holiday", color: "blue" };
  assert.deepEqual(remoteSharedUpdate(ctx(mine)), { title: "Holiday", color: "blue" }, "the workspace's newer rename shows");
  assert.deepEqual(groups.fields.get(SHARED), { title: "Holiday", color: "blue" });
  assert.equal(remoteSharedUpdate(ctx({ title: "Holiday", color: "blue" })), null, "in step");
});

test("rule: a restored group is matched by its tabs (the most mapped tabs), none grouped: null", () => {
  const state = grouped();
  const { real, table } = windowOf(state);
  const restarted = real.map((t) => ({ ...t, groupId: t.groupId === G ? 70 : t.groupId === 9 ? 90 : t.groupId }));
  assert.equal(restoredGroupId(restarted, table), 70, "not private group 90, which holds no mapped tab");
  assert.equal(restoredGroupId(restarted.map((t) => ({ ...t, groupId: -1 })), table), null);
});

test("rule: a restarted group-bound window is matched by its group's tabs, never a private tab showing the same page", () => {
  const state = grouped();
  const { real } = windowOf(state);
  // After a restart every tab has a new id; private tab 2 (in its own group 9) shows b's page, left of the group.
  const restarted = real.map((t) => ({ ...t, id: t.id + 100, groupId: t.groupId === G ? 70 : t.groupId === 9 ? 90 : t.groupId }));
  restarted[1] = { ...restarted[1], title: "T b", url: "https://example.test/b" };
  const records = attachRecords(null, state.tabs);
  const matched = (tabs) => { const m = matchTabs(records, tabs); return m.byId * 2 + m.byUrl + m.other; };
  assert.equal(matchTabs(records, restarted).map.get(102), "b", "the whole window: the private tab would take b");
  const scope = restoredScope(restarted, G, matched);
  assert.deepEqual(scope.map((t) => t.id), [111, 112, 113, 114, 115], "the group's tabs only");
  const map = matchTabs(records, scope).map;
  assert.equal(map.get(112), "b");
  assert.equal([...map.keys()].some((id) => id < 110), false, "no private tab mapped");
  // The group kept its id (Firefox does): the same group, whatever a private group matches.
  const kept = restarted.map((t) => ({ ...t, groupId: t.groupId === 70 ? G : t.groupId }));
  assert.deepEqual(restoredScope(kept, G, matched).map((t) => t.id), [111, 112, 113, 114, 115]);
  // One tab bound, a private group showing its page left of it, new ids (Chromium): a tie, broken by
  // the title and colour last synced, else the bound id; never the private group.
  const one = [realTab(201, "b", { groupId: 90 }), realTab(202, "b", { groupId: 70 })];
  const oneRecord = [{ id: "b", url: "https://example.test/b", title: "T b" }];
  const oneScore = (tabs) => matchTabs(oneRecord, tabs).byUrl;
  assert.deepEqual(restoredScope(one, G, oneScore, (g) => g === 70).map((t) => t.id), [202]);
  assert.deepEqual(restoredScope(one, 90, oneScore).map((t) => t.id), [201], "the bound id, when it is kept");
  // Restored ungrouped: the whole window, and the group is made again from the mapped tabs (findBoundGroup).
  const flat = restarted.map((t) => ({ ...t, groupId: -1 }));
  assert.equal(restoredScope(flat, G, matched), flat);
});
