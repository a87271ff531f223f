// node --test Tests/web/: tab groups in the JS client's state (web/tab-groups.js, used by
// web/tabsync-client.js). The Applieds of proto/README.md's "Tab groups" exchange (recorded from
// the server, and checked against it by ProtocolDocumentTests) are read from that file and applied
// with the rule nowhere: the result must be the Welcome the server sent after them. The pending
// prediction gives docs/design.md's worked examples, and over random sequences keeps every group
// contiguous, never empty and listed in display order.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { applyCanonical, applyPending, stateFromSnapshot } from "../../web/tabsync-client.js";
import { generateKeyBetween } from "../../web/fractional-indexing.js";
import { GROUP_COLORS } from "../../web/tab-groups.js";

const readme = readFileSync(new URL("../../proto/README.md", import.meta.url), "utf8");
const section = readme.slice(readme.indexOf("## Tab groups"), readme.indexOf("## A Python client"));
const received = [...section.matchAll(/^(?:all|c3) ← (\{.*\})$/gm)].map((m) => JSON.parse(m[1]));

/** `a b(G) c(G)`: the worked examples' notation of a state. */
const text = (s) => s.tabs.map((t) => (t.group ? `${t.id}(${t.group})` : t.id)).join(" ");

/** A state from the notation, keys a0, a1, … and groups titled by their id, colour blue. */
function state(notation) {
  let key = null;
  const tabs = notation.split(" ").map((item) => {
    const m = item.match(/^([^(]+)(?:\((.+)\))?$/);
    key = generateKeyBetween(key, null);
    return { id: m[1], key, ...(m[2] ? { group: m[2] } : {}) };
  });
  const groups = [...new Set(tabs.map((t) => t.group).filter(Boolean))].map((id) => ({ id, title: id, color: "blue" }));
  return stateFromSnapshot({ workspace: "w", version: "1", tabs, activeTabId: tabs[0].id, editable: true, groups });
}

/** Every invariant of docs/design.md's "Tab groups" the state breaks, in words. */
function broken(s) {
  const problems = [];
  const runs = [];
  for (const t of s.tabs) if (t.group && runs[runs.length - 1] !== t.group) runs.push(t.group);
  if (new Set(runs).size !== runs.length) problems.push(`a group is split: ${text(s)}`);
  const ids = s.groups.map((g) => g.id);
  if (ids.join() !== [...new Set(runs)].join()) problems.push(`groups ${ids} are not exactly ${runs} in order`);
  for (const t of s.tabs) if (t.group && !ids.includes(t.group)) problems.push(`${t.id} names missing ${t.group}`);
  const keys = s.tabs.map((t) => t.key);
  if (keys.some((k, i) => i > 0 && !(keys[i - 1] < k))) problems.push("keys out of order");
  return problems;
}

test("proto/README.md's group exchange applies from the Applieds alone to the Welcome that follows", () => {
  assert.ok(received.length === 7, `found ${received.length} received lines in the Tab groups section`);
  const welcome = received.pop().welcome.snapshot;
  const s = state("A B C D");
  s.version = 4;
  for (const { applied } of received) assert.ok(applyCanonical(s, applied), JSON.stringify(applied));
  const expected = stateFromSnapshot(welcome);
  assert.deepEqual(s.tabs, expected.tabs);
  assert.deepEqual(s.groups, expected.groups);
  assert.equal(s.version, expected.version);
  assert.equal(text(s), "A(G) B(G) D C(H) E(H)");
});

test("an Applied naming a group the state does not have asks for a resync", () => {
  const s = state("a b");
  assert.equal(applyCanonical(s, { version: "2", op: { move: { tabId: "a", place: { key: "a2" }, group: "nope" } } }), false);
  assert.equal(applyCanonical(s, { version: "2", op: { updateGroup: { groupId: "nope", title: "x" } } }), false);
});

test("the last tab leaving a group takes the group away, in every way it can leave", () => {
  const moved = state("a(G) b c");
  assert.ok(applyCanonical(moved, { version: "2", op: { move: { tabId: "a", place: { key: "a3" } } } }));
  assert.deepEqual(moved.groups, []);
  const removed = state("a(G) b");
  assert.ok(applyCanonical(removed, { version: "2", op: { remove: { tabId: "a" } }, activeTabId: "b" }));
  assert.deepEqual(removed.groups, []);
  const ungrouped = state("a(G) b(H)");
  assert.ok(applyCanonical(ungrouped, { version: "2", op: { ungroup: { tabIds: ["a"], keys: ["a0"] } } }));
  assert.deepEqual(ungrouped.groups.map((g) => g.id), ["H"]);
});

const examples = [
  ["a b(G) c(G)", { move: { tabId: "a", place: { index: 1 } } }, "b(G) a(G) c(G)"],
  ["a(G) b(G) c", { move: { tabId: "b", place: { index: 2 } } }, "a(G) c b"],
  ["a(G) b c", { move: { tabId: "a", place: { index: 2 } } }, "b c a(G)"],
  ["a b(G) c", { add: { tab: { id: "n", group: "G" }, place: { index: 2 } } }, "a b(G) n(G) c"],
  ["a b(G) c", { add: { tab: { id: "n", group: "G" }, place: { index: 0 } } }, "n a b(G) c"],
  ["a b(G) c(G) d", { group: { tabIds: ["c", "a"], groupId: "H" } }, "b(G) c(H) a(H) d"],
  ["a b(G) c(G) d", { group: { tabIds: ["a", "d"], groupId: "G" } }, "b(G) c(G) a(G) d(G)"],
  ["a(G) b(G) c(G)", { ungroup: { tabIds: ["b"] } }, "a(G) c(G) b"],
  ["a(G) b(G) c(G) d", { group: { tabIds: ["b", "d"], groupId: "H" } }, "a(G) c(G) b(H) d(H)"],
];

for (const [start, op, expected] of examples) {
  test(`pending: ${start} then ${JSON.stringify(op)} shows ${expected}`, () => {
    const s = state(start);
    assert.ok(applyPending(s, op));
    assert.equal(text(s), expected);
    assert.deepEqual(broken(s), []);
  });
}

test("a pending group op sets the new group's fields, grey without a colour", () => {
  const s = state("a b");
  applyPending(s, { group: { tabIds: ["a"], groupId: "N", title: "New" } });
  assert.deepEqual(s.groups, [{ id: "N", title: "New", color: "grey" }]);
  applyPending(s, { updateGroup: { groupId: "N", color: "pink" } });
  assert.deepEqual(s.groups, [{ id: "N", title: "New", color: "pink" }]);
});

test("random pending sequences keep every group contiguous, never empty and in display order", () => {
  let seed = Number(process.env.TABSYNC_GROUPS_SEED ?? Date.now() % 1e9);
  console.log(`# tab groups property: seed ${seed} (TABSYNC_GROUPS_SEED=${seed} replays)`);
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const pick = (xs) => xs[Math.floor(rnd() * xs.length)];
  let grouped = 0;
  for (let run = 0; run < 2000; run++) {
    const s = state("a b c d e");
    let next = 0;
    for (let step = 0; step < 30; step++) {
      const ids = s.tabs.map((t) => t.id);
      const some = () => [...new Set(Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => pick(ids.length ? ids : ["x"])))];
      const group = () => (s.groups.length && rnd() < 0.6 ? pick(s.groups).id : pick(["G", "H", "I", "J"]));
      const op = pick([
        () => ({ add: { tab: { id: `n${next++}`, group: rnd() < 0.5 ? group() : "" }, place: { index: Math.floor(rnd() * (ids.length + 1)) } } }),
        () => ({ move: { tabId: pick(ids.length ? ids : ["x"]), place: { index: Math.floor(rnd() * ids.length) } } }),
        () => ({ remove: { tabId: pick(ids.length ? ids : ["x"]) } }),
        () => ({ group: { tabIds: some(), groupId: group(), color: pick(GROUP_COLORS) } }),
        () => ({ ungroup: { tabIds: some() } }),
        () => ({ updateGroup: { groupId: group(), title: "t" } }),
      ])();
      applyPending(s, op);
      const problems = broken(s);
      assert.deepEqual(problems, [], `run ${run} step ${step} ${JSON.stringify(op)}: ${text(s)}`);
      if (s.groups.length) grouped++;
    }
  }
  assert.ok(grouped > 10000, `only ${grouped} steps had a group`);
});
