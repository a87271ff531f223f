// node --test: the contract's promises as properties of the planner (extension/plan.js) over
// generated windows, workspaces, tables, budgets, refusals, lost histories and restarts.
// TABSYNC_PLAN_SEED=S replays a run; TABSYNC_PLAN_CASES=N sets the number of cases (10,000).
import { test } from "node:test";
import assert from "node:assert/strict";
import { planArrange, planChanges } from "../../extension/plan.js";
import { brakes } from "../../extension/mirror.js";
import { act, context, random, realTab, serve, tableOf, workspace } from "./plan-world.mjs";

const SEED = Number(process.env.TABSYNC_PLAN_SEED ?? Math.floor(Math.random() * 2 ** 31));
const CASES = Number(process.env.TABSYNC_PLAN_CASES ?? 10_000);
console.log(`planner properties: seed ${SEED} (TABSYNC_PLAN_SEED=${SEED} replays), ${CASES} cases each`);

/**
 * One generated case: a workspace, a window that mirrored it (some tabs opened, pinned, kept local
 * only or out of the mirror since), and what happened while the pass was not running: other
 * clients removed tabs (applied: `table.removed`), a snapshot left some out (`snapshotRemoved`),
 * or the history lost some (a new epoch or a backup: no op named them).
 */
function generate(rnd) {
  const n = rnd.int(11);
  const ids = Array.from({ length: n }, (_, i) => `w${i}`);
  const full = workspace(ids);
  let nextReal = 1;
  const real = [];
  const pairs = [];
  for (const w of full.tabs) {
    if (rnd.chance(0.1)) continue; // not opened here yet
    const id = nextReal++;
    real.push(realTab(id, w));
    pairs.push([id, w.id]);
  }
  const table = tableOf(pairs, full);
  for (let i = rnd.int(4); i > 0; i--) {
    const id = nextReal++;
    real.splice(rnd.int(real.length + 1), 0, realTab(id, `new${id}`, { pinned: rnd.chance(0.2) }));
    if (rnd.chance(0.3)) table.setLocalOnly(id, { code: "LIMIT_EXCEEDED", title: "" });
    else if (rnd.chance(0.1)) table.ignore(id);
  }
  if (real.length > 0) real[rnd.int(real.length)].active = true;
  let kept = full.tabs;
  const removedIds = [];
  const snapshotIds = [];
  for (const w of full.tabs) {
    const r = rnd();
    if (r < 0.15) { table.removed.add(w.id); removedIds.push(w.id); } else if (r < 0.3) { table.snapshotRemoved.add(w.id); snapshotIds.push(w.id); } else if (r < 0.36) { /* lost */ } else continue;
    kept = kept.filter((t) => t.id !== w.id);
  }
  for (let i = rnd.int(3); i > 0; i--) kept = [...kept, { ...workspace([`r${i}`]).tabs[0], key: `a${String(9 - i)}z` }].sort((a, b) => (a.key < b.key ? -1 : 1));
  if (rnd.chance(0.3)) { // a local close and a pinned tab since the last pass
    const i = rnd.int(real.length + 1);
    if (i < real.length) { if (rnd.chance(0.5)) real.splice(i, 1); else real[i].pinned = true; }
  }
  const state = { ...full, tabs: kept, activeTabId: kept[0]?.id ?? "" };
  const extra = {
    readOnly: rnd.chance(0.1), mode: rnd.chance(0.8) ? "follow" : "browse",
    budget: rnd.chance(0.7) ? Infinity : rnd.int(6), nextReal,
  };
  return { real, state, table, extra };
}

/** The promises one planChanges keeps, checked against the case before the plan. */
function checkChanges(c) {
  const { real, state, table, extra } = c;
  const before = { removed: new Set(table.removed), snapshot: new Set(table.snapshotRemoved) };
  const wsOf = new Map(real.map((t) => [t.id, table.wsOf(t.id)]));
  const local = new Set(real.filter((t) => t.pinned || table.localOnly(t.id) || table.ignored(t.id)).map((t) => t.id));
  return (plan) => {
    const inState = new Set(state.tabs.map((t) => t.id));
    const closed = plan.actions.filter((a) => a.close).flatMap((a) => a.close.tabIds);
    for (const tid of closed) {
      const w = wsOf.get(tid);
      assert.ok(w && (before.removed.has(w) || before.snapshot.has(w)) && !inState.has(w), `closed ${tid} (${w}): no applied remove named it`);
    }
    const snapGone = real.filter((t) => before.snapshot.has(wsOf.get(t.id)));
    // The window's mapped tabs as the brake counts them: after this pass's own adds (or closes).
    const mapped = real.filter((t) => table.wsOf(t.id) !== undefined || closed.includes(t.id)).length;
    const stillSnap = snapGone.filter((t) => table.wsOf(t.id) !== undefined || closed.includes(t.id));
    if (!table.paused && stillSnap.length > 0 && brakes(stillSnap.length, mapped)) assert.fail("more than the brake allows, and no pause");
    if (plan.pause?.kind === "brake") assert.deepEqual(closed, [], "a brake pause closes nothing");
    const opened = plan.actions.filter((a) => a.open).map((a) => a.open.tab.id);
    assert.equal(new Set(opened).size, opened.length, "a workspace tab opened twice in one plan");
    const shown = new Set([...wsOf.values()].filter((w) => w !== undefined));
    for (const id of opened) assert.ok(!shown.has(id), `opened ${id}, which a real tab shows already`);
    const published = new Set(plan.ops.filter((op) => op.add).map((op) => op.add.tab.id));
    for (const tid of local) assert.ok(![...published].some((id) => id === `xn-${tid}`), `published local-only tab ${tid}`);
    if (extra.readOnly) assert.deepEqual(plan.ops, [], "a read-only mirror sent ops");
    assert.ok(plan.used <= extra.budget, "past the pacing budget");
  };
}

test("a single pass never closes, opens twice or publishes what the contract forbids", () => {
  const rnd = random(SEED);
  for (let i = 0; i < CASES; i++) {
    const c = generate(rnd);
    const ctx = context(c.real, c.state, c.table, c.extra);
    const check = checkChanges(c); // reads the case before the plan changes its table
    const plan = planChanges(ctx);
    try {
      check(plan);
    } catch (error) {
      error.message += ` (case ${i}, seed ${SEED})`;
      throw error;
    }
  }
});

test("a restart with a saved table adds nothing and opens nothing", () => {
  const rnd = random(SEED + 1);
  for (let i = 0; i < CASES; i++) {
    const ids = Array.from({ length: rnd.int(12) }, (_, k) => `w${k}`);
    const state = workspace(ids, ids[rnd.int(ids.length)]);
    const real = ids.map((id, k) => realTab(100 + k, state.tabs[k]));
    const table = tableOf(ids.map((id, k) => [100 + k, id]), state);
    const changes = planChanges(context(real, state, table, { mode: rnd.chance(0.5) ? "follow" : "browse" }));
    const arrange = planArrange(context(real, state, table));
    const adds = changes.ops.filter((op) => op.add || op.remove);
    assert.deepEqual([adds, changes.actions.filter((a) => a.open || a.close)], [[], []], `case ${i}, seed ${SEED + 1}`);
    assert.deepEqual(arrange.ops.filter((op) => !op.activate), [], `case ${i}, seed ${SEED + 1}`);
  }
});

/** The window's fixed point: every mirrored tab shows a workspace tab, each workspace tab once, in its order. */
function settled(real, state, table) {
  const mirrored = real.filter((t) => !t.pinned && !table.localOnly(t.id) && !table.ignored(t.id));
  const shown = mirrored.map((t) => table.wsOf(t.id));
  const wanted = state.tabs.map((t) => t.id).filter((id) => !table.dismissed.has(id));
  return JSON.stringify(shown) === JSON.stringify(wanted);
}

test("passes converge: its actions and the server's answers reach a fixed point in a few passes", () => {
  const rnd = random(SEED + 2);
  for (let i = 0; i < CASES; i++) {
    const c = generate(rnd);
    let { real, state } = c;
    const { table } = c;
    const extra = { ...c.extra, budget: Infinity };
    let next = c.extra.nextReal + 100;
    const refuseAdds = rnd.chance(0.2);
    const refuse = (op) => (refuseAdds && op.add && rnd.chance(0.5) ? "LIMIT_EXCEEDED" : null);
    let quiet = false;
    for (let pass = 0; pass < 6 && !quiet; pass++) {
      const now = 1_000_000 + pass * 10_000;
      const changes = planChanges(context(real, state, table, { ...extra, now }));
      if (changes.pause) { quiet = true; break; }
      let served = serve(state, changes.ops, refuse);
      for (const { op, code } of served.refused) {
        if (op.add && code !== "TAB_EXISTS") { // the client's onRejected: kept local only
          table.localIds.add(op.add.tab.id);
          const tid = table.tabOf(op.add.tab.id);
          if (tid !== undefined) { table.unmap(tid); table.setLocalOnly(tid, { code, wsId: op.add.tab.id, title: "" }); }
        }
      }
      state = served.state;
      real = act(real, changes.actions, table, () => next++);
      const arrange = planArrange(context(real, state, table, { ...extra, now }));
      served = serve(state, arrange.ops);
      state = served.state;
      real = act(real, arrange.actions, table, () => next++);
      quiet = changes.ops.length + changes.actions.length + arrange.ops.length + arrange.actions.length === 0;
    }
    assert.ok(quiet, `no fixed point after 6 passes (case ${i}, seed ${SEED + 2})`);
    if (!table.paused) assert.ok(settled(real, state, table), `settled but not mirrored (case ${i}, seed ${SEED + 2})`);
  }
});
