// The conformance transcripts (Tests/conformance/README.md) replayed to web/tabsync-client.js in
// node: Tests/conformance/playback.py plays the server's frames over a real WebSocket (node's
// WebSocket, `--experimental-websocket` in node 20), the client runs unmodified, and this runner
// takes the transcript's `do` steps and checks its `state` steps, telling the playback each one it
// saw (lock-step).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { createInterface } from "node:readline";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { HttpWriteError, TabsyncClient, httpWrite } from "../../web/tabsync-client.js";

const here = dirname(fileURLToPath(import.meta.url));
const STATE_TIMEOUT = 20000;

/** The playback as a process: resolves `port` (its WebSocket side) once `httpPort` is known too;
 * `verdict` resolves "OK" or "FAIL why". */
function playback(path) {
  const child = spawn("python3", [join(here, "playback.py"), path], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout });
  let portSeen;
  const port = new Promise((resolve) => { portSeen = resolve; });
  let last = "";
  const ports = { http: 0 };
  const verdict = new Promise((resolve) => {
    lines.on("line", (line) => {
      if (line.startsWith("PORT ")) portSeen(Number(line.slice(5)));
      else if (line.startsWith("HTTP ")) ports.http = Number(line.slice(5));
      else last = line;
    });
    child.on("exit", () => resolve(last));
  });
  return { child, port, ports, verdict, confirm: (index) => child.stdin.write(`STATE ${index}\n`) };
}

/** The client's HTTP write as a `result` step names it: its results, or the status of its refusal. */
async function written(base, workspace, write) {
  try {
    return { results: await httpWrite(base, workspace, write.ops, { key: write.key, deadline: 30000 }) };
  } catch (error) {
    if (error instanceof HttpWriteError) return { status: error.status };
    throw error;
  }
}

/** The confirmed state as the transcripts' `state` steps name it. */
function shown(client) {
  const c = client.confirmed;
  return { version: c.version, epoch: c.epoch, tabs: c.tabs.map((t) => t.id), active: c.activeTabId,
    pending: client.pending.length };
}

function differences(want, got) {
  return Object.fromEntries(Object.entries(want).filter(([k, v]) => JSON.stringify(got[k]) !== JSON.stringify(v))
    .map(([k, v]) => [k, { want: v, got: got[k] }]));
}

function waitForState(client, want) {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (Object.keys(differences(want, shown(client))).length === 0) {
        client.removeEventListener("change", check);
        clearTimeout(timer);
        resolve();
      }
    };
    const timer = setTimeout(() => {
      client.removeEventListener("change", check);
      reject(new Error(`the state differs: ${JSON.stringify(differences(want, shown(client)))}`));
    }, STATE_TIMEOUT);
    client.addEventListener("change", check);
    check();
  });
}

const files = readdirSync(join(here, "transcripts")).filter((f) => f.endsWith(".json")).sort();
for (const file of files) {
  test(`transcript ${file}`, async () => {
    const path = join(here, "transcripts", file);
    const transcript = JSON.parse(readFileSync(path, "utf8"));
    const server = playback(path);
    const port = await server.port;
    const client = new TabsyncClient({
      url: `ws://127.0.0.1:${port}`, workspace: transcript.client.workspace, clientId: transcript.client.clientId,
      backoff: { first: 50, max: 200 }, retry: { first: 100, max: 500, rateLimited: 1000 },
    });
    if (transcript.steps.some((step) => step.accept)) client.connect();
    const writes = [];
    try {
      for (const [index, step] of transcript.steps.entries()) {
        if (step.do?.write) {
          writes.push(written(`http://127.0.0.1:${server.ports.http}`, transcript.client.workspace, step.do.write));
        } else if (step.result) {
          assert.deepEqual(await writes.shift(), step.result, `step ${index}`);
        } else if (step.do) {
          client.submit(step.do.submit);
        } else if (step.state) {
          try {
            await waitForState(client, { active: "", ...step.state });
          } catch (error) {
            server.child.kill();
            assert.fail(`step ${index}: ${error.message}; the playback: ${await server.verdict}`);
          }
          server.confirm(index);
        }
      }
      assert.equal(await server.verdict, "OK");
    } finally {
      client.close();
      server.child.kill();
    }
  });
}
