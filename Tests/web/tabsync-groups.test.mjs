// Tab groups in the JS client (DESIGN.md and proto/README.md, "Tab groups"): applyCanonical takes
// each canonical group form; applyPending applies the placement rule and the group ops as the
// server does (the worked examples); a generated property: random ops, applied pending and then as
// their canonical Applied, keep every group contiguous and never empty, and both agree.
import { test } from "node:test";
import assert from "node:assert/strict";
import { applyCanonical, applyPending, stateFromSnapshot } from "../../web/tabsync-client.js";
import { GROUP_COLORS } from "../../web/tab-groups.js";

/** A state from "a b(G) c(G)": ids in display order, keys a0, a1, ..., groups from the (G)s. */
function bar(text, groups = {}) {
  const tabs = text.split(" ").map((word, i) => {
    const [, id, group = ""] = /^(\w+)(?:\((\w+)\))?$/.exec(word);
    return { id, key: `a${i}`, ...(group && { group }) };
  });
  const ids = [...new Set(tabs.map((t) => t.group).filter(Boolean))];
  return stateFromSnapshot({ version: "1", tabs, groups: ids.map((id) => ({ id, title: groups[id] ?? "", color: "blue" })) });
}

/** The state written as `bar` reads it, plus the group list: "a b(G) c(G) | G". */
function show(state) {
  return `${state.tabs.map((t) => (t.group ? `${t.id}(${t.group})` : t.id)).join(" ")} | ${state.groups.map((g) => g.id).join(" ")}`;
}

function applied(state, op) {
  return { version: String(state.version + 1), op, activeTabId: state.tabs[0]?.id ?? "" };
}

/** Every group contiguous, named by a tab, listed once in display order; every tab's group listed. */
function assertGroupsHold(state) {
  const seen = [];
  for (const t of state.tabs) {
    if (!t.group) continue;
    if (seen.at(-1) !== t.group) {
      assert.ok(!seen.includes(t.group), `group ${t.group} not contiguous: ${show(state)}`);
      seen.push(t.group);
    }
  }
  assert.deepEqual(state.groups.map((g) => g.id), seen, `groups not in display order: ${show(state)}`);
}

test("a snapshot's groups and each tab's group are read, untitled grey when absent", () => {
  const s = stateFromSnapshot({ tabs: [{ id: "a", key: "a0", group: "G" }, { id: "b", key: "a1" }], groups: [{ id: "G" }] });
  assert.deepEqual(s.groups, [{ id: "G", title: "", color: "grey" }]);
  assert.equal(s.tabs[0].group, "G");
  assert.equal(s.tabs[1].group, "");
  assert.equal(GROUP_COLORS.length, 9);
});

test("canonical group (new and existing), ungroup, updateGroup", () => {
  const s = bar("a b c d");
  assert.ok(applyCanonical(s, applied(s, { group: { tabIds: ["a", "c"], groupId: "G", title: "Work", color: "blue", keys: ["a0", "a0V"] } })));
  assert.equal(show(s), "a(G) c(G) b d | G");
  assert.deepEqual(s.groups, [{ id: "G", title: "Work", color: "blue" }]);
  assert.ok(applyCanonical(s, applied(s, { group: { tabIds: ["d"], groupId: "G", title: "Work", color: "red", keys: ["a0x"] } })));
  assert.equal(show(s), "a(G) c(G) d(G) b | G");
  assert.equal(s.groups[0].color, "red");
  assert.ok(applyCanonical(s, applied(s, { updateGroup: { groupId: "G", title: "" } })));
  assert.deepEqual(s.groups, [{ id: "G", title: "", color: "red" }]);
  assert.ok(applyCanonical(s, applied(s, { updateGroup: { groupId: "G", color: "cyan" } })));
  assert.deepEqual(s.groups, [{ id: "G", title: "", color: "cyan" }]);
  assert.ok(applyCanonical(s, applied(s, { ungroup: { tabIds: ["c"], keys: ["a0y"] } })));
  assert.equal(show(s), "a(G) d(G) c b | G");
  assert.ok(applyCanonical(s, applied(s, { ungroup: { tabIds: ["a", "d"], keys: ["a0", "a0x"] } })));
  assert.equal(show(s), "a d c b | ", "a group whose last tab left is dropped");
  assert.equal(applyCanonical(s, applied(s, { updateGroup: { groupId: "G", color: "red" } })), false, "a gone group does not fit");
  assert.equal(applyCanonical(s, applied(s, { group: { tabIds: ["zz"], groupId: "H", keys: ["a5"] } })), false);
});

test("canonical move takes the server's group (absent: none); remove and move drop an emptied group", () => {
  const s = bar("a b(G) c(G) d(H)");
  applyCanonical(s, applied(s, { move: { tabId: "a", place: { key: "a1V" }, group: "G" } }));
  assert.equal(show(s), "b(G) a(G) c(G) d(H) | G H");
  applyCanonical(s, applied(s, { move: { tabId: "d", place: { key: "Zz" } } }));
  assert.equal(show(s), "d b(G) a(G) c(G) | G");
  applyCanonical(s, applied(s, { remove: { tabId: "b" } }));
  applyCanonical(s, applied(s, { remove: { tabId: "a" } }));
  applyCanonical(s, applied(s, { add: { tab: { id: "n", key: "a9", group: "G" } } }));
  assert.equal(show(s), "d c(G) n(G) | G");
  applyCanonical(s, applied(s, { remove: { tabId: "c" } }));
  applyCanonical(s, applied(s, { remove: { tabId: "n" } }));
  assert.equal(show(s), "d | ");
});

test("canonical replace and restore carry groups", () => {
  const s = bar("a b(G)");
  applyCanonical(s, applied(s, { replace: { tabs: [{ id: "x", key: "a0", group: "H" }, { id: "y", key: "a1" }], groups: [{ id: "H", title: "Kept", color: "pink" }] } }));
  assert.equal(show(s), "x(H) y | H");
  assert.deepEqual(s.groups, [{ id: "H", title: "Kept", color: "pink" }]);
  applyCanonical(s, applied(s, { restore: { version: "1", state: { tabs: [{ id: "a", key: "a0", group: "G" }], groups: [{ id: "G", title: "Old", color: "green" }], editable: true } } }));
  assert.equal(show(s), "a(G) | G");
  assert.deepEqual(s.groups, [{ id: "G", title: "Old", color: "green" }]);
});

// proto/README.md, "Tab groups": the example exchange's Applied lines, applied in turn, give the
// snapshot the third client is welcomed with.
test("the proto/README example exchange, applied from its Applied lines, ends in its snapshot", () => {
  const s = stateFromSnapshot({ version: "4", tabs: ["A", "B", "C", "D"].map((id, i) => ({ id, key: `a${i}` })), activeTabId: "A" });
  const lines = [
    { version: "5", op: { group: { tabIds: ["A", "B"], groupId: "G", title: "Work", color: "blue", keys: ["a0", "a1"] } }, activeTabId: "A" },
    { version: "6", op: { move: { tabId: "D", place: { key: "a0V" }, group: "G" } }, activeTabId: "A" },
    { version: "7", op: { add: { tab: { id: "E", key: "a3" } } }, activeTabId: "A" },
    { version: "8", op: { updateGroup: { groupId: "G", color: "red" } }, activeTabId: "A" },
    { version: "9", op: { ungroup: { tabIds: ["D"], keys: ["a1V"] } }, activeTabId: "A" },
    { version: "10", op: { group: { tabIds: ["C", "E"], groupId: "H", title: "", color: "grey", keys: ["a2", "a3"] } }, activeTabId: "A" },
  ];
  for (const line of lines) assert.ok(applyCanonical(s, line));
  const want = stateFromSnapshot({ workspace: "", version: "10", tabs: [{ id: "A", key: "a0", group: "G" }, { id: "B", key: "a1", group: "G" }, { id: "D", key: "a1V" }, { id: "C", key: "a2", group: "H" }, { id: "E", key: "a3", group: "H" }], activeTabId: "A", groups: [{ id: "G", title: "Work", color: "red" }, { id: "H", color: "grey" }] });
  assert.deepEqual(s, want);
});

// DESIGN.md's worked examples, through applyPending (the client's own reading of the rule) and
// then through the canonical Applied the server would send for the same result.
const EXAMPLES = [
  ["a b(G) c(G)", { move: { tabId: "a", place: { index: 1 } } }, "b(G) a(G) c(G) | G"],
  ["a(G) b(G) c", { move: { tabId: "b", place: { index: 2 } } }, "a(G) c b | G"],
  ["a(G) b c", { move: { tabId: "a", place: { index: 2 } } }, "b c a(G) | G"],
  ["a b(G) c", { add: { tab: { id: "n", group: "G" }, place: { index: 2 } } }, "a b(G) n(G) c | G"],
  ["a b(G) c", { add: { tab: { id: "n", group: "G" }, place: { index: 0 } } }, "n a b(G) c | G"],
  ["a b(G) c(G) d", { group: { tabIds: ["c", "a"], groupId: "H" } }, "b(G) c(H) a(H) d | G H"],
  ["a b(G) c(G) d", { group: { tabIds: ["a", "d"], groupId: "G" } }, "b(G) c(G) a(G) d(G) | G"],
  ["a(G) b(G) c(G)", { ungroup: { tabIds: ["b"] } }, "a(G) c(G) b | G"],
  ["a(G) b(G) x", { move: { tabId: "x", place: { index: 1 } } }, "a(G) x(G) b(G) | G"],
];

/** The canonical Applied of a pending op whose result is `after` (final keys and groups). */
function canonicalOf(before, op, after) {
  const [[kind, body]] = Object.entries(op);
  const tab = (id) => after.tabs.find((t) => t.id === id);
  switch (kind) {
    case "move": return { move: { tabId: body.tabId, place: { key: tab(body.tabId).key }, ...(tab(body.tabId).group && { group: tab(body.tabId).group }) } };
    case "add": { const { id, key, group } = tab(body.tab.id); return { add: { tab: { id, key, ...(group && { group }) } } }; }
    case "remove": return op;
    case "updateGroup": return op;
    case "group": {
      const ids = body.tabIds.filter((id) => tab(id));
      const g = after.groups.find((x) => x.id === body.groupId);
      return { group: { tabIds: ids, groupId: body.groupId, title: g.title, color: g.color, keys: ids.map((id) => tab(id).key) } };
    }
    case "ungroup": { const ids = body.tabIds.filter((id) => tab(id)); return { ungroup: { tabIds: ids, keys: ids.map((id) => tab(id).key) } }; }
  }
  throw new Error(kind);
}

for (const [start, op, want] of EXAMPLES) {
  test(`worked example: [${start}] ${JSON.stringify(op)} → [${want}]`, () => {
    const pending = bar(start);
    assert.ok(applyPending(pending, op));
    assert.equal(show(pending), want);
    const confirmed = bar(start);
    assert.ok(applyCanonical(confirmed, applied(confirmed, canonicalOf(confirmed, op, pending))));
    assert.equal(show(confirmed), want);
  });
}

test("the concurrent worked example in both orders: [a(G) x(G) b] and [a(G) x b]", () => {
  const moveFirst = bar("a(G) b(G) x");
  applyPending(moveFirst, { move: { tabId: "x", place: { index: 1 } } });
  applyPending(moveFirst, { ungroup: { tabIds: ["b"] } });
  assert.equal(show(moveFirst), "a(G) x(G) b | G");
  const ungroupFirst = bar("a(G) b(G) x");
  applyPending(ungroupFirst, { ungroup: { tabIds: ["b"] } });
  applyPending(ungroupFirst, { move: { tabId: "x", place: { index: 1 } } });
  assert.equal(show(ungroupFirst), "a(G) x b | G");
});

test("a pending group op made new is untitled grey unless given; an update shows at once", () => {
  const s = bar("a b");
  applyPending(s, { group: { tabIds: ["a"], groupId: "G" } });
  assert.deepEqual(s.groups, [{ id: "G", title: "", color: "grey" }]);
  applyPending(s, { updateGroup: { groupId: "G", title: "Mail", color: "orange" } });
  assert.deepEqual(s.groups, [{ id: "G", title: "Mail", color: "orange" }]);
  assert.equal(applyPending(s, { updateGroup: { groupId: "nope", title: "x" } }), false);
  assert.equal(applyPending(s, { group: { tabIds: ["gone"], groupId: "H" } }), false);
});

/** A small seeded generator (mulberry32), so a failing seed can be run again. */
function random(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomOp(state, rnd, n) {
  const pick = (list) => list[Math.floor(rnd() * list.length)];
  const ids = state.tabs.map((t) => t.id);
  const groupIds = ["G", "H", "K", "L"];
  const r = rnd();
  if (ids.length < 3 || r < 0.2) return { add: { tab: { id: `t${n}`, ...(rnd() < 0.6 && { group: pick(groupIds) }) }, place: { index: Math.floor(rnd() * (ids.length + 1)) } } };
  if (r < 0.45) return { move: { tabId: pick(ids), place: { index: Math.floor(rnd() * ids.length) } } };
  if (r < 0.55) return { remove: { tabId: pick(ids) } };
  if (r < 0.75) return { group: { tabIds: Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => pick(ids)).filter((id, i, a) => a.indexOf(id) === i), groupId: pick(groupIds), ...(rnd() < 0.5 && { color: pick(["red", "blue"]) }) } };
  if (r < 0.9) return { ungroup: { tabIds: [pick(ids), pick(ids)].filter((id, i, a) => a.indexOf(id) === i) } };
  return { updateGroup: { groupId: pick(state.groups.map((g) => g.id).concat("G")), title: `T${n}` } };
}

test("property: random ops, pending and canonical, keep groups contiguous and never empty (300 seeds × 60 ops)", () => {
  for (let seed = 1; seed <= 300; seed++) {
    const rnd = random(seed);
    const pending = stateFromSnapshot({});
    const confirmed = stateFromSnapshot({});
    for (let n = 0; n < 60; n++) {
      const op = randomOp(pending, rnd, n);
      const before = structuredClone(pending);
      if (!applyPending(pending, op)) { assert.deepEqual(pending.tabs, before.tabs, `seed ${seed}: a skipped op changed tabs`); continue; }
      assertGroupsHold(pending);
      assert.ok(applyCanonical(confirmed, applied(confirmed, canonicalOf(before, op, pending))), `seed ${seed} op ${n}`);
      assertGroupsHold(confirmed);
      assert.deepEqual(show(confirmed), show(pending), `seed ${seed} op ${n}: ${JSON.stringify(op)}`);
      assert.deepEqual(confirmed.groups, pending.groups);
    }
  }
});
