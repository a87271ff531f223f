// node --test: the extension's group rules (extension/group-plan.js, docs/extension.md "Tab
// groups"): one test per rule, then a generated property over random workspace and browser group
// states. TABSYNC_PLAN_SEED=S replays; TABSYNC_PLAN_CASES=N sets the number of cases (10,000).
import { test } from "node:test";
import assert from "node:assert/strict";
import { localGroupOps, NO_GROUP, remoteGroupActions } from "../../extension/group-plan.js";
import { GroupTable } from "../../extension/group-table.js";
import { random } from "./plan-world.mjs";
import { COLORS, groupContext, runGroupActions, serveGroups } from "./group-world.mjs";

const tab = (id, groupId = NO_GROUP, extra = {}) => ({ id, groupId, pinned: false, ...extra });
const wsTabs = (pairs) => pairs.map(([id, group]) => ({ id: `ws${id}`, group }));

/** A group table that last synced `member` ({ wsTab: group }) and `fields`, with browser map `pairs`. */
function synced(member, fields = {}, pairs = []) {
  const g = new GroupTable();
  for (const [k, v] of Object.entries(member)) g.member.set(k, v);
  for (const [k, v] of Object.entries(fields)) g.fields.set(k, v);
  for (const [b, w] of pairs) g.map(b, w);
  return g;
}

test("a group made here goes out as one group op with its title and colour", () => {
  const state = { tabs: wsTabs([[1, ""], [2, ""], [3, ""]]), groups: [] };
  const groups = synced({ ws1: "", ws2: "", ws3: "" });
  const ops = localGroupOps(groupContext([tab(1, 7), tab(2, 7), tab(3)], [{ id: 7, title: "Read", color: "blue" }], state, groups));
  assert.deepEqual(ops, [{ group: { tabIds: ["ws1", "ws2"], groupId: "gnew7-0", title: "Read", color: "blue" } }]);
  assert.equal(groups.wsOf(7), "gnew7-0");
  assert.deepEqual(localGroupOps(groupContext([tab(1, 7), tab(2, 7), tab(3)], [{ id: 7, title: "Read", color: "blue" }], serveGroups(state, ops), groups)), [], "sent once");
});

test("added to and removed from a group here: group and ungroup ops", () => {
  const state = { tabs: wsTabs([[1, "G"], [2, "G"], [3, ""]]), groups: [{ id: "G", title: "", color: "red" }] };
  const groups = synced({ ws1: "G", ws2: "G", ws3: "" }, { G: { title: "", color: "red" } }, [[5, "G"]]);
  const ops = localGroupOps(groupContext([tab(1), tab(2, 5), tab(3, 5)], [{ id: 5, title: "", color: "red" }], state, groups));
  assert.deepEqual(ops, [{ group: { tabIds: ["ws3"], groupId: "G" } }, { ungroup: { tabIds: ["ws1"] } }]);
});

test("a rename or recolour here sends the changed field only; collapsing sends nothing", () => {
  const state = { tabs: wsTabs([[1, "G"]]), groups: [{ id: "G", title: "a", color: "red" }] };
  const groups = synced({ ws1: "G" }, { G: { title: "a", color: "red" } }, [[5, "G"]]);
  assert.deepEqual(localGroupOps(groupContext([tab(1, 5)], [{ id: 5, title: "b", color: "red", collapsed: true }], state, groups)), [{ updateGroup: { groupId: "G", title: "b" } }]);
  assert.deepEqual(localGroupOps(groupContext([tab(1, 5)], [{ id: 5, title: "b", color: "cyan", collapsed: false }], state, groups)), [{ updateGroup: { groupId: "G", color: "cyan" } }]);
});

test("after a browser restart the groups' new ids are matched by their tabs: no op", () => {
  const state = { tabs: wsTabs([[1, "G"], [2, "G"], [3, "H"]]), groups: [{ id: "G", title: "", color: "red" }, { id: "H", title: "h", color: "blue" }] };
  const groups = synced({ ws1: "G", ws2: "G", ws3: "H" }, { G: { title: "", color: "red" }, H: { title: "h", color: "blue" } }, [[5, "G"], [6, "H"]]);
  const bgs = [{ id: 50, title: "", color: "red" }, { id: 60, title: "h", color: "blue" }];
  const ctx = groupContext([tab(1, 50), tab(2, 50), tab(3, 60)], bgs, state, groups);
  assert.deepEqual(localGroupOps(ctx), []);
  assert.deepEqual(remoteGroupActions(ctx), []);
  assert.equal(groups.wsOf(50), "G");
  assert.equal(groups.browserOf("G"), 50);
});

test("a remote group, regroup, rename and ungroup become browser calls, never collapsed", () => {
  const state = { tabs: wsTabs([[1, "N"], [2, "N"], [3, "G"], [4, ""]]), groups: [{ id: "N", title: "new", color: "green" }, { id: "G", title: "g2", color: "red" }] };
  const groups = synced({ ws1: "", ws2: "", ws3: "", ws4: "G" }, { G: { title: "g", color: "red" } }, [[5, "G"]]);
  const real = [tab(1), tab(2), tab(3), tab(4, 5)];
  const actions = remoteGroupActions(groupContext(real, [{ id: 5, title: "g", color: "red", collapsed: true }], state, groups));
  assert.deepEqual(actions, [
    { ungroup: { tabIds: [4] } },
    { create: { wsGroupId: "N", tabIds: [1, 2], title: "new", color: "green" } },
    { group: { groupId: 5, tabIds: [3] } },
    { updateGroup: { groupId: 5, title: "g2", color: "red" } },
  ]);
  assert.deepEqual(Object.fromEntries(groups.member), { ws1: "N", ws2: "N", ws3: "G", ws4: "" }, "recorded as synced before the calls");
});

test("a remote move never ungroups: a tab the browser took out of its group is grouped again, nothing sent", () => {
  const state = { tabs: wsTabs([[1, "G"], [2, "G"]]), groups: [{ id: "G", title: "", color: "red" }] };
  const groups = synced({ ws1: "G", ws2: "G" }, { G: { title: "", color: "red" } }, [[5, "G"]]);
  const ctx = groupContext([tab(1, NO_GROUP), tab(2, 5)], [{ id: 5, title: "", color: "red" }], state, groups, { moved: new Set([1]) });
  assert.deepEqual(remoteGroupActions(ctx), [{ group: { groupId: 5, tabIds: [1] } }]);
  assert.deepEqual(localGroupOps({ ...ctx, real: [tab(1, 5), tab(2, 5)] }), []);
});

test("a change the user made since the local half ran is not overwritten by the remote half", () => {
  const state = { tabs: wsTabs([[1, "G"], [2, "G"], [3, ""]]), groups: [{ id: "G", title: "g", color: "red" }] };
  const groups = synced({ ws1: "G", ws2: "G", ws3: "" }, { G: { title: "g", color: "red" } }, [[5, "G"]]);
  const real = [tab(1), tab(2, 5), tab(3, 5)]; // 1 ungrouped and 3 grouped here, G renamed here
  const ctx = groupContext(real, [{ id: 5, title: "mine", color: "red" }], state, groups);
  assert.deepEqual(remoteGroupActions(ctx), []);
  assert.deepEqual(localGroupOps(ctx), [{ group: { tabIds: ["ws3"], groupId: "G" } }, { ungroup: { tabIds: ["ws1"] } }, { updateGroup: { groupId: "G", title: "mine" } }]);
});

test("read-only and group-bound mirrors send no group op; local-only tabs are never sent", () => {
  const state = { tabs: wsTabs([[1, ""]]), groups: [] };
  const real = [tab(1, 7), tab(2, 7, { local: true })];
  const bgs = [{ id: 7, title: "", color: "grey" }];
  assert.deepEqual(localGroupOps(groupContext(real, bgs, state, synced({ ws1: "" }), { readOnly: true })), []);
  assert.deepEqual(localGroupOps(groupContext(real, bgs, state, synced({ ws1: "" }), { groupBound: true })), []);
  assert.deepEqual(remoteGroupActions(groupContext(real, bgs, state, synced({ ws1: "" }), { groupBound: true })), []);
  assert.deepEqual(localGroupOps(groupContext(real, bgs, state, synced({ ws1: "" }))), [{ group: { tabIds: ["ws1"], groupId: "gnew7-0", title: "", color: "grey" } }]);
});

const SEED = Number(process.env.TABSYNC_PLAN_SEED ?? Math.floor(Math.random() * 2 ** 31));
const CASES = Number(process.env.TABSYNC_PLAN_CASES ?? 10_000);

/** Contiguous random groups over `n` tabs: an array of group names ("" none), runs of one name. */
function runs(rnd, n, names) {
  const out = [];
  while (out.length < n) {
    const g = rnd.chance(0.4) ? "" : names[rnd.int(names.length)];
    const len = 1 + rnd.int(3);
    for (let i = 0; i < len && out.length < n; i++) out.push(g);
  }
  return out;
}

/**
 * One case: a workspace with groups, the window (same tabs, same order) as last synced, then local
 * changes (regroups, renames, collapses; local-only tabs) and remote ones (the workspace moved on),
 * and a browser restart that renumbers every group now and then.
 */
function generate(rnd) {
  const n = 1 + rnd.int(9);
  const ids = Array.from({ length: n }, (_, i) => i + 1);
  const syncedG = runs(rnd, n, ["A", "B", "C"]);
  const groups = new GroupTable();
  const fields = (g) => ({ title: `t${g}`, color: COLORS[g.charCodeAt(0) % 9] });
  const browserId = (g) => 10 + g.charCodeAt(0);
  for (const g of new Set(syncedG)) if (g) { groups.map(browserId(g), g); groups.fields.set(g, fields(g)); }
  ids.forEach((id, i) => groups.member.set(`ws${id}`, syncedG[i]));
  const local = runs(rnd, n, ["A", "B", "C", "Z"]).map((g, i) => (rnd.chance(0.5) ? syncedG[i] : g));
  const remote = runs(rnd, n, ["A", "B", "D"]).map((g, i) => (rnd.chance(0.5) ? syncedG[i] : g));
  const real = ids.map((id, i) => tab(id, local[i] ? browserId(local[i]) : NO_GROUP, { local: rnd.chance(0.1) }));
  const bgs = [...new Set(local)].filter(Boolean).map((g) => ({ id: browserId(g), ...fields(g), collapsed: rnd.chance(0.5) }));
  for (const b of bgs) if (rnd.chance(0.2)) b.title = `renamed${b.id}`;
  const state = { tabs: ids.map((id, i) => ({ id: `ws${id}`, group: remote[i] })), groups: [] };
  state.groups = [...new Set(remote)].filter(Boolean).map((g) => ({ id: g, ...fields(g), color: rnd.chance(0.2) ? "orange" : fields(g).color }));
  if (rnd.chance(0.2)) for (const b of bgs) { const old = b.id; b.id += 500; for (const t of real) if (t.groupId === old) t.groupId = b.id; }
  return { real, bgs, state, groups };
}

/** The browser's mirrored tabs' groups, named by the workspace groups the table maps them to. */
function named(real, bgs, groups) {
  return real.filter((t) => !t.local).map((t) => {
    if (t.groupId === NO_GROUP) return "";
    const b = bgs.find((x) => x.id === t.groupId);
    return `${groups.wsOf(t.groupId)}|${b.title}|${b.color}`;
  });
}

test(`property: after a pass the window's groups equal the workspace's, the local changes kept (seed ${SEED})`, () => {
  const rnd = random(SEED);
  for (let c = 0; c < CASES; c++) {
    const { real, bgs, state, groups } = generate(rnd);
    const changed = real.filter((t) => !t.local).map((t) => [t, t.groupId]);
    const collapsed = new Map(bgs.map((b) => [b.id, b.collapsed]));
    const syncedBefore = new Map(groups.member);
    const ops = localGroupOps(groupContext(real, bgs, state, groups));
    const after = serveGroups(state, ops);
    for (const t of real.filter((x) => !x.local)) { // a change made here is the user's: it is what the workspace gets
      const here = t.groupId === NO_GROUP ? "" : groups.wsOf(t.groupId);
      if (here !== syncedBefore.get(`ws${t.id}`)) assert.equal(after.tabs.find((w) => w.id === `ws${t.id}`).group, here, `case ${c}: a local regroup of ${t.id} lost`);
    }
    const actions = remoteGroupActions(groupContext(real, bgs, after, groups));
    const [real2, bgs2] = runGroupActions(real, bgs, actions, groups);
    const why = `case ${c} (seed ${SEED}): ${JSON.stringify({ real, bgs, state, ops, actions })}`;
    const ws = after.tabs.filter((w) => real.some((t) => !t.local && `ws${t.id}` === w.id)).map((w) => {
      const g = after.groups.find((x) => x.id === w.group);
      return g ? `${g.id}|${g.title}|${g.color}` : "";
    });
    assert.deepEqual(named(real2, bgs2, groups), ws, `window's groups differ from the workspace's: ${why}`);
    for (const b of bgs2) if (collapsed.has(b.id)) assert.equal(b.collapsed, collapsed.get(b.id), `collapsed changed: ${why}`);
    for (const [t, was] of changed) if (t.groupId !== was) assert.fail(`the plan changed its input: ${why}`);
    assert.equal(real2.length, real.length, `a tab closed: ${why}`);
    assert.deepEqual(localGroupOps(groupContext(real2, bgs2, after, groups)), [], `a second pass sends again: ${why}`);
  }
});
