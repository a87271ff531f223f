// node --test: the local-move step with groups (extension/group-moves.js): a user's drags, a
// whole group's included, sent as ops that the server's placement rule turns into the same order
// and the same groups. TABSYNC_PLAN_SEED=S replays; TABSYNC_PLAN_CASES=N sets the cases (10,000).
import { test } from "node:test";
import assert from "node:assert/strict";
import { planMoves } from "../../extension/group-moves.js";
import { movedTabs } from "../../extension/mirror.js";
import { keyBetween, random } from "./plan-world.mjs";
import { placeByRule } from "./group-world.mjs";

/** The workspace `ids` with groups `groupOf`, after the ops of plan `p` sent one at a time. */
function send(ids, groupOf, p) {
  let key = null;
  const tabs = ids.map((id) => ({ id, key: (key = keyBetween(key, null)), group: groupOf(id) }));
  const keyAfter = (left) => {
    const i = left === null ? -1 : tabs.findIndex((t) => t.id === left);
    return keyBetween(i < 0 ? null : tabs[i].key, tabs[i + 1]?.key ?? null);
  };
  const keyBefore = (right) => {
    const i = tabs.findIndex((t) => t.id === right);
    return keyBetween(tabs[i - 1]?.key ?? null, tabs[i].key);
  };
  for (const m of p.moves) placeByRule(tabs, keyBetween, { move: { tabId: m.id, place: { key: m.before ? keyBefore(m.before) : keyAfter(m.left) } } });
  for (const r of p.regroup) placeByRule(tabs, keyBetween, { group: r });
  return tabs;
}

test("a whole group dragged past other tabs arrives whole, in its order", () => {
  const g = { g1: "G", g2: "G", g3: "G" };
  const groupOf = (x) => g[x] ?? "";
  const now = ["a", "b", "g1", "g2", "g3", "c"];
  const p = planMoves(["g1", "g2", "g3", "a", "b", "c"], now, groupOf);
  const tabs = send(["g1", "g2", "g3", "a", "b", "c"], groupOf, p);
  assert.deepEqual(tabs.map((t) => `${t.id}${t.group}`), ["a", "b", "g1G", "g2G", "g3G", "c"]);
});

test("a group counts as its size plus one: the fewest ops move the tabs around it", () => {
  const groupOf = (x) => (x.startsWith("g") ? "G" : "");
  const p = planMoves(["g1", "g2", "g3", "a", "b", "c"], ["a", "b", "c", "g1", "g2", "g3"], groupOf);
  assert.deepEqual(p.moves.map((m) => m.id), ["a", "b", "c"]);
  assert.deepEqual(p.regroup, []);
});

test("two groups swapped: one moves whole and keeps its group", () => {
  const g = { g1: "G", g2: "G", h1: "H", h2: "H", h3: "H" };
  const groupOf = (x) => g[x] ?? "";
  const now = ["h1", "h2", "h3", "g1", "g2"];
  const p = planMoves(["g1", "g2", "h1", "h2", "h3"], now, groupOf);
  assert.deepEqual(p.regroup, [{ groupId: "G", tabIds: ["g2"] }], "the smaller group moves");
  assert.deepEqual(send(["g1", "g2", "h1", "h2", "h3"], groupOf, p).map((t) => `${t.id}${t.group}`), ["h1H", "h2H", "h3H", "g1G", "g2G"]);
});

test("with no groups it moves the tabs a longest common subsequence leaves out", () => {
  const rnd = random(7);
  for (let c = 0; c < 500; c++) {
    const ids = Array.from({ length: rnd.int(9) }, (_, i) => `t${i}`);
    const now = [...ids].sort(() => rnd() - 0.5);
    assert.deepEqual(planMoves(ids, now).moves.map((m) => m.id).sort(), movedTabs(ids, now).sort());
  }
});

const SEED = Number(process.env.TABSYNC_PLAN_SEED ?? Math.floor(Math.random() * 2 ** 31));
const CASES = Number(process.env.TABSYNC_PLAN_CASES ?? 10_000);

/** Random tabs in contiguous groups: [{ id, group }]. */
function window(rnd) {
  const out = [];
  let n = 0;
  for (let u = rnd.int(7); u >= 0; u--) {
    const g = rnd.chance(0.5) ? `G${u}` : "";
    for (let k = g ? 1 + rnd.int(3) : 1; k > 0; k--) out.push({ id: `t${n++}`, group: g });
  }
  return out;
}

/** The units of `tabs` (a group's block, or an ungrouped tab) as arrays of tabs, in order. */
function units(tabs) {
  const out = [];
  for (const t of tabs) {
    const last = out[out.length - 1];
    if (last && t.group && last[0].group === t.group) last.push(t); else out.push([t]);
  }
  return out;
}

/** A user's drags as a browser allows them: a unit to a unit boundary, or a tab inside its group. */
function drag(rnd, tabs) {
  let now = tabs;
  for (let k = 1 + rnd.int(3); k > 0; k--) {
    const us = units(now);
    if (rnd.chance(0.3)) {
      const u = us[rnd.int(us.length)];
      if (u.length > 1) { const [t] = u.splice(rnd.int(u.length), 1); u.splice(rnd.int(u.length + 1), 0, t); }
    } else {
      const [u] = us.splice(rnd.int(us.length), 1);
      us.splice(rnd.int(us.length + 1), 0, u);
    }
    now = us.flat();
  }
  return now;
}

test(`property: any drags arrive as the same order and the same groups (seed ${SEED})`, () => {
  const rnd = random(SEED);
  for (let c = 0; c < CASES; c++) {
    const before = window(rnd);
    const now = drag(rnd, before);
    const groupOf = (id) => before.find((t) => t.id === id).group;
    const p = planMoves(before.map((t) => t.id), now.map((t) => t.id), groupOf);
    const got = send(before.map((t) => t.id), groupOf, p).map((t) => `${t.id}${t.group}`);
    assert.deepEqual(got, now.map((t) => `${t.id}${t.group}`), `case ${c} (seed ${SEED}): ${JSON.stringify({ before, now, p })}`);
  }
});

test("planChanges sends a whole group's drag as its moves, then the group of the others", async () => {
  const { planChanges } = await import("../../extension/plan.js");
  const { context, realTab, tableOf, workspace } = await import("./plan-world.mjs");
  const state = workspace(["g1", "g2", "h1", "h2", "h3"]);
  const pairs = [[1, "g1"], [2, "g2"], [3, "h1"], [4, "h2"], [5, "h3"]];
  const table = tableOf(pairs, state);
  for (const [id, g] of [["g1", "G"], ["g2", "G"], ["h1", "H"], ["h2", "H"], ["h3", "H"]]) table.groups.member.set(id, g);
  const w = new Map(state.tabs.map((t) => [t.id, t]));
  const real = [3, 4, 5, 1, 2].map((id) => realTab(id, w.get(pairs[id - 1][1])));
  const plan = planChanges(context(real, state, table));
  assert.deepEqual(plan.ops.map((op) => op.move?.tabId ?? op.group), ["g2", "g1", { groupId: "G", tabIds: ["g2"] }]);
  assert.ok(plan.ops[1].move.place.key < plan.ops[0].move.place.key, "g1 lands before g2");
  assert.ok(plan.ops[0].move.place.key > state.tabs[4].key, "after h3");
});
