// node --test: the shared group's promises as properties of one pass (extension/plan.js over the
// bound group's tabs, with shared-group.js) over generated windows: private tabs before, after and
// beside the group (some in groups of their own), group tabs dragged out, private tabs dragged in,
// tabs other clients removed, added or moved. TABSYNC_PLAN_SEED=S replays; TABSYNC_PLAN_CASES=N.
import { test } from "node:test";
import assert from "node:assert/strict";
import { planArrange, planChanges } from "../../extension/plan.js";
import { askedGroup, boundTabs, shiftActions } from "../../extension/shared-group.js";
import { act, context, keyBetween, random, realTab, tableOf, workspace } from "./plan-world.mjs";

const SEED = Number(process.env.TABSYNC_PLAN_SEED ?? Math.floor(Math.random() * 2 ** 31));
const CASES = Number(process.env.TABSYNC_PLAN_CASES ?? 10_000);
console.log(`shared group properties: seed ${SEED} (TABSYNC_PLAN_SEED=${SEED} replays), ${CASES} cases`);
const G = 50;

function generate(rnd) {
  const ids = Array.from({ length: 1 + rnd.int(8) }, (_, i) => `w${i}`);
  const full = workspace(ids);
  const groups = ["ga", "gb", ""];
  for (const t of full.tabs) t.group = groups[rnd.int(3)];
  let next = 1;
  const privateTab = () => realTab(1000 + next++, `p${next}`, { groupId: rnd.chance(0.3) ? 60 : -1 });
  const before = Array.from({ length: rnd.int(3) }, privateTab);
  const after = Array.from({ length: rnd.int(3) }, privateTab);
  const inGroup = full.tabs.map((w, i) => realTab(i + 1, w, { groupId: G }));
  const table = tableOf(inGroup.map((t, i) => [t.id, full.tabs[i].id]), full);
  const removed = new Set();
  const lost = new Set();
  for (const t of inGroup) {
    if (rnd.chance(0.1)) t.groupId = -1; // dragged out (it stays in the window, private now)
    else if (rnd.chance(0.1)) { removed.add(table.wsOf(t.id)); table.removed.add(table.wsOf(t.id)); } else if (rnd.chance(0.05)) lost.add(table.wsOf(t.id)); // gone from the server's history, no op named it
  }
  if (rnd.chance(0.3)) inGroup.splice(rnd.int(inGroup.length + 1), 0, realTab(900 + next++, `in${next}`, { groupId: G })); // dragged in
  let tabs = full.tabs.filter((t) => !removed.has(t.id) && !lost.has(t.id));
  if (rnd.chance(0.3)) tabs = [...tabs, { ...workspace(["r1"]).tabs[0], key: "a9z", group: "" }]; // another client's add
  tabs = tabs.map((t) => ({ ...t }));
  if (rnd.chance(0.4) && tabs.length > 1) { // a remote move: a tab to the end, or to the start
    tabs[rnd.int(tabs.length)].key = rnd.chance(0.5) ? keyBetween(tabs[tabs.length - 1].key, null) : keyBetween(null, tabs[0].key);
  }
  tabs.sort((a, b) => (a.key < b.key ? -1 : 1));
  const state = { ...full, tabs, groups: [{ id: "ga", title: "A", color: "blue" }, { id: "gb", title: "B", color: "red" }] };
  const out = inGroup.filter((t) => t.groupId !== G); // a browser drops a tab dragged out beside the group
  const window = [...before, ...inGroup.filter((t) => t.groupId === G), ...out, ...after];
  window.forEach((t, index) => { t.index = index; });
  return { window, state, table, removed, privateIds: new Set([...before, ...after].map((t) => t.id)) };
}

/** One half of a pass on the whole window: the plan over the group's tabs, shifted, acted; opened tabs join the group. */
function half(window, plan, offset, table, nextId) {
  const known = new Set(window.map((t) => t.id));
  const acted = act(window, shiftActions(plan.actions, offset), table, nextId);
  for (const t of acted) if (!known.has(t.id)) t.groupId = G; // executor.js: an opened tab joins the group
  acted.forEach((t, index) => { t.index = index; });
  return acted;
}

/** The window's private tabs left of the group and right of it, in order (ids). */
function sides(window, privateIds) {
  const first = window.findIndex((t) => t.groupId === G);
  const last = window.length - 1 - [...window].reverse().findIndex((t) => t.groupId === G);
  const priv = (xs) => xs.filter((t) => privateIds.has(t.id)).map((t) => t.id);
  return first < 0 ? null : [priv(window.slice(0, first)), priv(window.slice(last + 1))];
}

test("property: a group-bound pass never closes, moves or publishes a private tab, and the group stays whole", () => {
  const rnd = random(SEED);
  for (let c = 0; c < CASES; c++) {
    const { window, state, table, removed, privateIds } = generate(rnd);
    for (const t of window) if (t.groupId !== G && !privateIds.has(t.id)) privateIds.add(t.id); // dragged out: private now
    const scope = boundTabs(window, G);
    if (!scope) continue;
    const before = sides(window, privateIds);
    const groupOf = new Map(state.tabs.map((t) => [t.id, t.group]));
    const extra = { askGroup: (id, left, work) => askedGroup(groupOf, work, id, left) };
    let nextId = 5000;
    const wsBefore = new Map(table.mapped());
    const changes = planChanges(context(scope.tabs, state, table, extra));
    const where = `seed ${SEED} case ${c}`;
    for (const op of changes.ops) {
      assert.ok(!op.group && !op.ungroup, `${where}: no group op of the workspace's groups`);
      if (op.add) assert.ok(!privateIds.has(Number(op.add.tab.id.slice(3))), `${where}: a private tab published`); // ids xn-<tab>
    }
    for (const id of changes.actions.flatMap((a) => a.close?.tabIds ?? [])) {
      assert.ok(!privateIds.has(id), `${where}: a private tab closed`);
      assert.ok(removed.has(wsBefore.get(id)), `${where}: a close no applied remove named`);
    }
    let w = half(window, changes, scope.offset, table, () => nextId++);
    const second = boundTabs(w, G);
    if (!second) continue; // the group emptied: the binding detaches (a closed window)
    const arrange = planArrange(context(second.tabs, state, table, extra));
    w = half(w, arrange, second.offset, table, () => nextId++);
    for (const id of privateIds) assert.ok(w.some((t) => t.id === id), `${where}: private tab ${id} gone`);
    assert.deepEqual(sides(w, privateIds), before, `${where}: private tabs moved across or within their side: ${JSON.stringify({ window: window.map((t) => [t.id, t.groupId]), after: w.map((t) => [t.id, t.groupId]), changes: changes.actions, arrange: arrange.actions })}`);
    const span = w.map((t) => t.groupId === G);
    const first = span.indexOf(true);
    assert.ok(span.lastIndexOf(true) - first + 1 === span.filter(Boolean).length, `${where}: the group split`);
  }
});
