// node --test: the JS client as a user gets it (issue 42, "packages you can hand to a user"):
// `npm pack` of web/ (web/package.json), installed with `npm install <tarball> --offline` into a
// clean temporary directory, imported there by its package name from a node program (its own
// process, WebSocket from node: --experimental-websocket on node 20) that connects to a real
// tabsync-server (.build/debug, or TABSYNC_SERVER_BIN), adds a tab and sees it confirmed, then
// writes another over HTTP twice under one key (`httpWrite`: applied once, answered the same); the
// server's HTTP read shows both. And the TypeScript declarations (web/tabsync-client.d.ts)
// name every export of the module and only members TabsyncClient has (`tsc --noEmit` checks them
// as well where TypeScript is installed; it is not here, and nothing is fetched for it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as client from "../../web/tabsync-client.js";

const ROOT = new URL("../../", import.meta.url).pathname;
const BIN = process.env.TABSYNC_SERVER_BIN || join(ROOT, ".build/debug/tabsync-server");
const DTS = readFileSync(join(ROOT, "web/tabsync-client.d.ts"), "utf8");

/** Starts a tabsync-server on a free port; resolves with { url, stop } once it listens. */
function startServer() {
  const proc = spawn(BIN, ["--host", "127.0.0.1", "--port", "0", "--memory", "--log-level", "error"],
    { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => { proc.kill("SIGKILL"); reject(new Error(`no "listening on" in 60 s: ${out}`)); }, 60000);
    proc.on("exit", (code) => reject(new Error(`tabsync-server exited (${code}) before listening: ${out}`)));
    proc.stdout.on("data", (chunk) => {
      out += chunk;
      const m = /listening on (ws:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ url: m[1], stop: () => new Promise((done) => { proc.on("exit", done); proc.kill("SIGTERM"); }) });
      }
    });
  });
}

const USE = `
import { TabsyncClient, TRANSIENT, httpWrite } from "tabsync-client";
const client = new TabsyncClient({ url: process.argv[2], workspace: "packed", clientId: "npm" });
const deadline = setTimeout(() => { console.error("not confirmed in 60 s", JSON.stringify(client.state)); process.exit(2); }, 60000);
client.addEventListener("change", async () => {
  if (client.confirmed.tabs.some((t) => t.id === "n1") && !client.written) {
    client.written = true;
    clearTimeout(deadline);
    const version = client.confirmed.version, tabs = client.confirmed.tabs.map((t) => t.id);
    const write = () => httpWrite(process.argv[2], "packed", [{ add: { tab: { id: "n2", title: "Over HTTP" } } }], { key: "npm-1" });
    const written = [await write(), await write()];
    console.log(JSON.stringify({ resolved: import.meta.resolve("tabsync-client"), version, tabs,
      transient: [...TRANSIENT].sort(), written }));
    client.close();
  }
});
client.connect();
client.add({ id: "n1", title: "From the npm package", url: "https://example.test/npm" });
`;

test("npm pack, installed offline into a clean directory, talks to a real server from node", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tabsync-npm-"));
  const server = await startServer();
  try {
    const packed = JSON.parse(execFileSync("npm", ["pack", "--json", "--pack-destination", dir], { cwd: join(ROOT, "web") }));
    const files = packed[0].files.map((f) => f.path).sort();
    assert.deepEqual(files, ["fractional-indexing.js", "package.json", "tab-groups.js", "tabsync-client.d.ts", "tabsync-client.js"]);
    const tarball = join(dir, packed[0].filename);
    const app = join(dir, "app");
    mkdirSync(app);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    execFileSync("npm", ["install", tarball, "--offline", "--no-audit", "--no-fund"], { cwd: app, stdio: "ignore" });
    assert.deepEqual(readdirSync(join(app, "node_modules", "tabsync-client")).sort(), files);
    writeFileSync(join(app, "use.mjs"), USE);
    const run = spawnSync(process.execPath, ["--experimental-websocket", "--no-warnings", "use.mjs", server.url + "/"],
      { cwd: app, encoding: "utf8", timeout: 90000 });
    assert.equal(run.status, 0, run.stderr);
    const got = JSON.parse(run.stdout);
    assert.ok(got.resolved.startsWith(`file://${join(app, "node_modules", "tabsync-client")}/`), got.resolved);
    assert.equal(got.version, 1);
    assert.deepEqual(got.tabs, ["n1"]);
    assert.deepEqual(got.transient, ["RATE_LIMITED", "UNAVAILABLE"]);
    // httpWrite, twice under one key: applied once (version 2), answered the same.
    assert.equal(got.written[0][0].version, "2", JSON.stringify(got.written));
    assert.deepEqual(got.written[1], got.written[0]);
    const snapshot = await (await fetch(server.url.replace(/^ws/, "http") + "/v1/workspaces/packed")).json();
    assert.deepEqual(snapshot.tabs.map((t) => t.id), ["n1", "n2"]);
    assert.equal(snapshot.version, "2");
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the declarations name every export and only members TabsyncClient has", () => {
  const declared = new Set([...DTS.matchAll(/^export (?:const|function|class|interface|type) (\w+)/gm)].map((m) => m[1]));
  for (const name of Object.keys(client)) assert.ok(declared.has(name), `export ${name} is not declared in tabsync-client.d.ts`);
  const body = DTS.slice(DTS.indexOf("export class TabsyncClient"));
  const members = [...body.matchAll(/^  (?:readonly )?(\w+)[(:?]/gm)].map((m) => m[1]).filter((m) => m !== "constructor");
  assert.ok(members.length >= 20, `only ${members.length} members parsed`);
  const instance = new client.TabsyncClient({ url: "ws://127.0.0.1:1/", workspace: "w" });
  for (const m of members) assert.ok(m in instance, `TabsyncClient.${m} is declared but does not exist`);
  for (const m of ["connect", "close", "submit", "add", "move", "remove", "history", "exportState", "importState"]) {
    assert.ok(members.includes(m), `TabsyncClient.${m} is not declared`);
  }
  const tsc = spawnSync("tsc", ["--version"], { encoding: "utf8" });
  if (tsc.status === 0) {
    const out = spawnSync("tsc", ["--noEmit", "--strict", "--lib", "es2022,dom", join(ROOT, "web/tabsync-client.d.ts")], { encoding: "utf8" });
    assert.equal(out.status, 0, out.stdout + out.stderr);
  }
});
