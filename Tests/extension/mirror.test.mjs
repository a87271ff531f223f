// node --test Tests/extension/: the pure parts of the extension's reconcile (extension/mirror.js):
// what a real tab gives its workspace tab, which tabs a user moved, and the fewest moves that put
// a window's tabs in the workspace's order.
import { test } from "node:test";
import assert from "node:assert/strict";
import { cleanText, movedTabs, movesToOrder, tabFields, workspaceTabId } from "../../extension/mirror.js";

/** Applies chrome.tabs.move calls to an array as Chrome does (index: the position after the move). */
function apply(order, moves) {
  const out = order.slice();
  for (const { id, index } of moves) {
    out.splice(out.indexOf(id), 1);
    out.splice(index, 0, id);
  }
  return out;
}

test("a page's title, badge and url as the workspace gets them", () => {
  assert.deepEqual(tabFields({ title: "(12) Inbox", url: "https://mail.example/" }),
    { title: "Inbox", badge: "12", url: "https://mail.example/" });
  assert.deepEqual(tabFields({ title: "New Tab", url: "chrome://newtab/" }), { title: "New Tab", badge: "", url: null });
  assert.equal(tabFields({ title: "x", url: "", pendingUrl: "http://a.example/" }).url, "http://a.example/");
  assert.equal(tabFields({ title: "a\u0007b\u001b[31mc\u0085d" }).title, "a b [31mc d");
  assert.equal(Array.from(tabFields({ title: "é".repeat(300) }).title).length, 256);
  assert.equal(tabFields({ title: "t", url: "https://a.example/" + "x".repeat(5000) }).url, null);
  assert.equal(cleanText(" a \n b ", 10), "a b");
});

test("workspace ids made from Chrome tab ids are valid ids", () => {
  const id = workspaceTabId("abc123", "n0n3", 1817107931);
  assert.match(id, /^[A-Za-z0-9._:-]{1,64}$/);
  assert.equal(id, workspaceTabId("abc123", "n0n3", 1817107931));
});

test("the tabs a user moved are those outside a longest common subsequence", () => {
  assert.deepEqual(movedTabs(["a", "b", "c", "d"], ["d", "a", "b", "c"]), ["d"]);
  assert.deepEqual(movedTabs(["a", "b", "c", "d"], ["b", "c", "d", "a"]), ["a"]);
  assert.deepEqual(movedTabs(["a", "b", "c"], ["a", "b", "c"]), []);
  // Tabs only one side knows (opened, closed) are not moves.
  assert.deepEqual(movedTabs(["a", "b", "c"], ["a", "x", "c"]), []);
});

test("the fewest moves put the window in the workspace's order, pinned tabs untouched", () => {
  const seeded = (seed) => () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const random = seeded(7);
  for (let round = 0; round < 200; round++) {
    const n = 1 + Math.floor(random() * 9);
    const ids = Array.from({ length: n }, (_, i) => `t${i}`);
    const desired = ids.slice().sort(() => random() - 0.5);
    const current = ["pin", ...ids.slice().sort(() => random() - 0.5)];
    const moves = movesToOrder(current, desired, new Set(["pin"]));
    const after = apply(current, moves);
    assert.deepEqual(after, ["pin", ...desired], JSON.stringify({ current, desired, moves }));
    assert.ok(moves.every((m) => m.id !== "pin"));
  }
  assert.deepEqual(movesToOrder(["a", "b", "c", "d"], ["d", "a", "b", "c"]), [{ id: "d", index: 0 }]);
  assert.deepEqual(movesToOrder(["a", "b"], ["a", "b"]), []);
});

test("restored tabs are matched by id, then URL, then title and position; a blank tab by its place", async () => {
  const { matchTabs, windowMatches } = await import("../../extension/mirror.js");
  const records = [
    { id: "w1", url: "http://h/p/One", title: "One" },
    { id: "w2", url: "http://h/p/Two", title: "Two" },
    { id: "w3", url: "", title: "New Tab" },
  ];
  // After a browser restart: new Chrome ids, a blank tab.
  const tabs = [
    { id: 101, url: "http://h/p/One", title: "One" },
    { id: 102, url: "http://h/p/Two", title: "Two" },
    { id: 103, url: "chrome://newtab/", title: "New Tab" },
  ];
  const m = matchTabs(records, tabs, new Map([[7, "w1"]]));
  assert.deepEqual([...m.map], [[101, "w1"], [102, "w2"], [103, "w3"]]);
  assert.ok(windowMatches(records, m));
  // A placeholder carries its workspace id; a saved Chrome id showing the same page is kept.
  const base = "chrome-extension://abc/";
  const p = matchTabs(records, [{ id: 5, url: `${base}placeholder.html?title=Two&id=w2` }, { id: 9, url: "http://h/p/One" }],
    new Map([[9, "w1"]]), base);
  assert.deepEqual([...p.map].sort(), [[5, "w2"], [9, "w1"]]);
  assert.equal(p.byId, 2);
  // A window holding one of the two URLs and other pages is not the workspace's window.
  const stranger = matchTabs(records, [{ id: 1, url: "http://h/p/One", title: "One" }, { id: 2, url: "http://x/", title: "X" }]);
  assert.equal(windowMatches(records, stranger), false);
  // A window of one shared tab after a restart (a new tab id, one URL) is the window it had, when it
  // shows that page and nothing else; beside another page it is not.
  const one = [{ id: "w1", url: "http://h/p/One", title: "One" }];
  const alone = matchTabs(one, [{ id: 201, url: "http://h/p/One", title: "One" }], new Map());
  assert.ok(windowMatches(one, alone, 1));
  assert.equal(windowMatches(one, alone), false, "without the window's tab count, the 2-tab floor holds");
  const beside = matchTabs(one, [{ id: 201, url: "http://h/p/One", title: "One" }, { id: 202, url: "http://x/", title: "X" }], new Map());
  assert.equal(windowMatches(one, beside, 2), false);
});

test("the mass-close brake, token roles and loopback hosts", async () => {
  const { brakes, tokenRole, isLoopback } = await import("../../extension/mirror.js");
  assert.equal(brakes(5, 6), false);
  assert.equal(brakes(6, 12), false);
  assert.equal(brakes(6, 11), true);
  const jwt = (claims) => `e30.${btoa(JSON.stringify(claims)).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_")}.sig`;
  assert.equal(tokenRole(jwt({ role: "viewer", sub: "b" })), "viewer");
  assert.equal(tokenRole("not-a-jwt"), "");
  assert.ok(isLoopback("ws://127.0.0.1:7070/") && isLoopback("ws://localhost/") && isLoopback("ws://[::1]:9/"));
  assert.ok(!isLoopback("ws://example.com/") && !isLoopback("ws://127.0.0.1.evil.com/"));
});
