// node --test: the extension's one dependency outside extension/ is visible and checked: every
// module scripts/package-extension assembles resolves its imports inside the package, and the
// shared modules (web/tabsync-client.js, web/tab-groups.js, web/fractional-indexing.js) are copied unchanged.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const ROOT = new URL("../../", import.meta.url).pathname;
const SHARED = ["tabsync-client.js", "tab-groups.js", "fractional-indexing.js"];

test("the package resolves every import, and the shared modules are web/'s, unchanged", () => {
  const dir = mkdtempSync(join(tmpdir(), "tabsync-ext-"));
  try {
    execFileSync("python3", [join(ROOT, "scripts/package-extension"), "--dir", join(dir, "x"), "--zip", join(dir, "x.zip")]);
    const files = new Set(readdirSync(join(dir, "x")));
    for (const name of SHARED) {
      assert.ok(!readdirSync(join(ROOT, "extension")).includes(name), `extension/${name} would shadow web/${name}`);
      assert.equal(readFileSync(join(dir, "x", name), "utf8"), readFileSync(join(ROOT, "web", name), "utf8"));
    }
    for (const name of [...files].filter((n) => n.endsWith(".js"))) {
      const text = readFileSync(join(dir, "x", name), "utf8");
      for (const [, path] of text.matchAll(/^import[^;]*?from\s+"\.\/([^"]+)";/gms)) {
        assert.ok(files.has(path), `${name} imports ./${path}, which the package lacks`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the client's state round-trips through the resume record beside the tab table (no key of one hides the other's)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tabsync-ext-"));
  try {
    execFileSync("python3", [join(ROOT, "scripts/package-extension"), "--dir", join(dir, "x"), "--zip", join(dir, "x.zip")]);
    const { ExtensionClient, exportClient, importClient } = await import(pathToFileURL(join(dir, "x", "client-state.js")));
    const { TabTable } = await import(pathToFileURL(join(dir, "x", "tab-table.js")));
    const options = { url: "ws://127.0.0.1:1/", workspace: "w", clientId: "c" };
    const a = new ExtensionClient(options);
    a.add({ id: "t1", title: "One" });
    const table = new TabTable();
    table.map(7, "t1");
    table.setSeen(7, { title: "One", badge: "", url: null });
    const record = JSON.parse(JSON.stringify({ ...exportClient(a), ...table.serialize() }));
    const b = new ExtensionClient(options);
    importClient(b, record);
    assert.deepEqual(b.pending.map((p) => p.op), a.pending.map((p) => p.op));
    assert.deepEqual(b.state.tabs.map((t) => t.id), ["t1"]);
    assert.deepEqual(TabTable.restore(record, true).table.serialize(), table.serialize());
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
