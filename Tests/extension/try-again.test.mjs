// node --test: Try again with a pass in flight and ops pending (issue 39's defect: two mirrors on
// one set of tables, two clients numbering seqs from their own nextSeq), through the modules that
// own it: binding-mirror.js (a mirror's retire() and its pass), requests.js (reopen, the hand-over)
// and registry.js, as scripts/package-extension assembles them, over an in-memory browser
// (browser-world.mjs). Test_situations.py plays the same in Chromium.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { BrowserWorld } from "./browser-world.mjs";
import { workspace } from "./plan-world.mjs";

const ROOT = new URL("../../", import.meta.url).pathname;

/** The packaged extension's modules, loaded with `world` as the browser. */
async function extensionIn(world) {
  const dir = mkdtempSync(join(tmpdir(), "tabsync-ext-"));
  execFileSync("python3", [join(ROOT, "scripts/package-extension"), "--dir", join(dir, "x"), "--zip", join(dir, "x.zip")]);
  globalThis.chrome = world.api;
  const load = (name) => import(pathToFileURL(join(dir, "x", name)));
  const [{ Mirror }, requests, registry, clientState] = await Promise.all(
    ["binding-mirror.js", "requests.js", "registry.js", "client-state.js"].map(load));
  return { Mirror, requests, registry, clientState, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Waits (with a deadline) until `predicate()` holds, yielding to the event loop meanwhile. */
async function until(predicate, what, ms = 20_000) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Lets mirror `m`'s passes run until none is under way or due. */
async function settled(m) {
  await until(() => !m.running && !m.dirty, "the mirror's passes to end");
  await m.passing;
}

test("defect: Try again with a pass in flight and ops pending: each tab open once, every op handed over once, no seq reused", async () => {
  const world = new BrowserWorld();
  const ext = await extensionIn(world);
  try {
    ext.registry.switches.offline = true; // no connection: the outbox stays as it is, to be read
    const page = (name) => `https://example.test/${name}`;
    // The workspace: the window's four tabs, and 40 more someone else added (the pass opens them).
    const ws = workspace(["a", "b", "c", "d", ...Array.from({ length: 40 }, (_, i) => `many-${i}`)]);
    for (const t of ws.tabs) { t.url = page(t.id); t.title = t.id; }
    const windowId = world.window(["a", "b", "c", "d"].map(page));
    const b = { id: "b-1", server: "ws://127.0.0.1:1/", workspace: "w", token: "", remember: true, name: "alice", mode: "follow",
      clientId: "ext-aaaabbbbcccc", windowId, incognito: false, stopped: "", attach: "", closed: false, viewOnly: "" };
    const old = new ext.Mirror(b, "n0n3");
    // An edit sent before (numbered 7, unanswered) and the client's count past it.
    ext.clientState.importClient(old.client, { confirmed: { ...ws, epoch: "E", version: 5 }, nextSeq: 8,
      pending: [{ seq: 7, baseVersion: 5, op: { update: { tabId: "b", title: "B edited" } } }] });
    world.strip(windowId).forEach((t, i) => {
      old.table.map(t.id, ws.tabs[i].id);
      old.table.setSeen(t.id, { title: ws.tabs[i].title, badge: "", url: ws.tabs[i].url });
    });
    old.table.lastOrder = ws.tabs.map((t) => t.id);
    old.phase = "ready";
    ext.registry.mirrors.set(b.id, old);
    // The user closed "a" and opened a page of their own; every tab open takes 10 ms.
    world.close([world.strip(windowId)[0].id]);
    world.open(windowId, page("mine-1"));
    world.slowCreate(10);
    old.schedule();
    await until(() => world.created >= 5, "the pass opening the workspace's tabs");
    const createdAtPress = world.created;
    world.open(windowId, page("mine-2")); // one more edit while the pass runs
    old.fail("the server refused the token (UNAUTHORIZED)"); // stopped mid-pass: the popup offers Try again
    const reply = await ext.requests.reopen({ bindingId: b.id });
    assert.deepEqual(reply, { ok: true });
    assert.ok(createdAtPress < 40, `the pass was over before Try again (${createdAtPress} opened): the test proves nothing`);
    const fresh = ext.registry.mirrors.get(b.id);
    assert.notEqual(fresh, old);
    assert.equal(old.phase, "retired");
    const oldStillRunning = old.running;
    const openedByOld = world.created;
    fresh.schedule();
    await settled(fresh);
    // The old mirror never acts again.
    old.schedule();
    assert.equal(old.running, false);
    // Each workspace tab is open once in the window, and every page once.
    const strip = world.strip(windowId);
    const urls = strip.map((t) => t.url);
    assert.deepEqual(urls.filter((u, i) => urls.indexOf(u) !== i), [], `pages open twice (the old pass opened ${openedByOld})`);
    const mapped = strip.map((t) => fresh.table.wsOf(t.id)).filter(Boolean);
    assert.equal(new Set(mapped).size, mapped.length, "a workspace id mapped twice");
    for (const t of fresh.client.state.tabs) assert.ok(fresh.table.tabOf(t.id) !== undefined, `${t.id} is not open`);
    // Every edit is in the fresh client's outbox once: the numbered one with its seq, the close of
    // "a" and the two pages opened; no seq is used twice, and the next one is past them.
    const ops = fresh.client.pending.map((p) => JSON.stringify(p.op));
    assert.deepEqual(ops.filter((o, i) => ops.indexOf(o) !== i), [], "an op twice in the outbox");
    const kinds = fresh.client.pending.map((p) => Object.keys(p.op)[0] + ":" + (p.op.remove?.tabId ?? p.op.update?.tabId ?? p.op.add?.tab?.url ?? ""));
    for (const want of ["update:b", "remove:a", `add:${page("mine-1")}`, `add:${page("mine-2")}`]) {
      assert.equal(kinds.filter((k) => k === want).length, 1, `${want} in the outbox ${kinds.filter((k) => k === want).length} times: ${kinds}`);
    }
    assert.deepEqual(fresh.client.pending.filter((p) => p.seq > 0).map((p) => p.seq), [7]);
    assert.ok(fresh.client.nextSeq > 7);
    assert.equal(oldStillRunning, false, "the old mirror's pass still ran after Try again answered");
    fresh.stop();
  } finally {
    // Whatever failed, no mirror acts or reconnects after the test (else node never exits: a
    // failure here hung the run instead of reporting it).
    for (const m of new Set([...ext.registry.mirrors.values()])) { m.phase = "retired"; m.stop(); }
    ext.registry.switches.offline = false;
    ext.cleanup();
  }
});
