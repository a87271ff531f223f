// The extension's service worker: binds browser windows to tabsync workspaces and mirrors each
// bound window's tab strip both ways with one serialized, level-triggered reconcile per window.
//
// The contract (docs/extension.md, "The contract"): a user's real tabs are the user's data. Sync
// closes a real tab only because a remote `remove` of its workspace id (or a remote `replace` or
// `restore` that drops it) was applied after the tab was mapped. A refusal, a rollback, a lost or restored
// server, a browser or worker restart, an extension update or a reconnect never closes a tab,
// opens one twice, or publishes a tab of a window the user did not bind.
//
// Storage (what survives what):
// - chrome.storage.local "bindings": { [bindingId]: Binding } — survives browser restarts. The
//   token is there only when the user ticked "remember"; else in storage.session "token:<id>".
//   Bindings of private windows live in storage.session "privateBindings" only (never on disk).
// - "resume:<bindingId>" (storage.local; storage.session for a private window): the client's
//   confirmed state, its outbox (pending ops with their seqs) and next seq, the tab-id map, the
//   order and active tab last synced, the titles last seen, the ids removed by applied ops not yet
//   closed, local-only tabs. Outlives the worker, the browser and an extension update.
// - storage.session "alive": set at each boot. Present at the next boot = the worker restarted
//   (Chrome tab ids still valid); absent = the browser restarted or the extension was updated,
//   so the saved map is checked tab by tab (mirror.js matchTabs) before it is used.
// - storage.session "status:<bindingId>": what the popup shows (written here, read there).
//
// Modules by job: plan.js (the contract's rules, pure), executor.js (the chrome.tabs calls),
// tab-table.js (the tab table), binding-mirror.js (a bound window's mirror and its pass),
// attach.js (adopt, open, the window matcher), storage.js (bindings), popup-api.js and
// requests.js (the popup), badge.js, registry.js (the mirrors and the retry alarm); this file
// keeps the listeners and boot. web/tabsync-client.js, web/tab-groups.js and
// web/fractional-indexing.js are copied in by scripts/package-extension.
//
// Chrome events only mark a window dirty; the reconcile reads the real tabs, the map and the
// workspace state afresh each time and does only the differences, so running it twice is harmless
// and a restarted worker or a reconnect converges.

import { api as chrome, keepAwake } from "./browser-api.js";
import { TITLE_DEBOUNCE_MS } from "./plan.js";
import { Mirror } from "./binding-mirror.js";
import { RETRY_ALARM, mirrorOfWindow, mirrors, switches, updateRetryAlarm } from "./registry.js";
import { loadBindings, resumeArea, saveBinding, sessionNonce } from "./storage.js";
import { handle } from "./requests.js";

const KEEPALIVE_MS = 20_000; // a data message this often keeps the worker (and the connection) alive

/** @typedef {{ id: string, server: string, workspace: string, token: string, remember: boolean, name: string,
 *   mode: "follow" | "browse", clientId: string, windowId: number, incognito: boolean, stopped: string,
 *   attach: "adopt-or-open" | "reattach" | "", closed: boolean, viewOnly: string,
 *   group?: boolean, groupId?: number | null }} Binding: `group`, one browser group of the window is bound (group-bound.js) */

let booted = null;

/**
 * Loads every binding and resumes it (once per worker life). With storage.session's "alive"
 * marker, the worker restarted: the saved map holds. Without it, the browser restarted or the
 * extension was updated: each binding keeps its outbox and confirmed state (it resumes and sends
 * its pending ops, which the server applies at most once), and matches its window again tab by
 * tab; a closed binding looks for its window only (the browser may have restored it) and stays
 * closed otherwise.
 */
function boot() {
  booted ??= (async () => {
    const nonce = await sessionNonce();
    const session = await chrome.storage.session.get(null);
    const trusted = Boolean(session.alive);
    switches.offline = Boolean(session.offline);
    switches.pacingOff = session.pacing === false;
    await chrome.storage.session.set({ alive: true, boots: (session.boots ?? 0) + 1 });
    const bindings = await loadBindings();
    for (const b of Object.values(bindings)) {
      const key = `resume:${b.id}`;
      const resume = (await resumeArea(b).get(key))[key];
      if (!trusted && !b.remember && !b.token && tokenNeeded(b)) b.stopped = "the token was kept for the browser session only: enter it again";
      const m = new Mirror(b, nonce);
      if (resume) m.restore(resume, trusted);
      if (!trusted || !resume) b.attach = b.attach || "reattach";
      if (!m.ready && b.attach === "") b.attach = "reattach";
      mirrors.set(b.id, m);
      if (b.closed && !trusted && resume) {
        // The browser may have restored the window the binding had when it quit (closing the last
        // window quits the browser): that window, and only it, is attached again.
        m.findRestored().then(async (found) => {
          if (!found || mirrors.get(b.id) !== m) return;
          b.closed = false;
          await saveBinding(b);
          m.start();
          updateRetryAlarm();
        }).catch((error) => console.warn("tabsync: looking for a restored window failed", error));
      }
      m.start();
    }
    updateRetryAlarm();
  })().catch((error) => {
    booted = null; // the next event boots again: a failed boot is not kept for the worker's life
    throw error;
  });
  return booted;
}

/** Whether the binding was made with a token (its role or the server needs one to resume). */
function tokenNeeded(b) {
  return Boolean(b.hadToken);
}

async function onWindowEvent(windowId, delay = 0) {
  await boot();
  mirrorOfWindow(windowId)?.schedule(delay);
}

// Listeners are registered at the top level, so Chrome wakes a stopped worker for them.
chrome.tabs.onCreated.addListener((tab) => onWindowEvent(tab.windowId));
chrome.tabs.onRemoved.addListener(async (_, info) => {
  await boot();
  const m = mirrorOfWindow(info.windowId);
  // A closing window takes its tabs with it: that is not the user closing the workspace's tabs.
  if (m && info.isWindowClosing) m.detached();
  else m?.schedule();
});
// A tab replaced by another (prerendering, a discarded tab brought back) keeps its workspace tab.
chrome.tabs.onReplaced.addListener(async (added, removedId) => {
  await boot();
  for (const m of mirrors.values()) m.table.replaceTab(removedId, added);
  const tab = await chrome.tabs.get(added).catch(() => null);
  if (tab) mirrorOfWindow(tab.windowId)?.schedule();
});
chrome.tabs.onMoved.addListener((_, info) => onWindowEvent(info.windowId));
chrome.tabs.onActivated.addListener((info) => onWindowEvent(info.windowId));
chrome.tabs.onAttached.addListener((_, info) => onWindowEvent(info.newWindowId));
chrome.tabs.onDetached.addListener((_, info) => onWindowEvent(info.oldWindowId));
chrome.tabs.onUpdated.addListener(async (tabId, change, tab) => {
  if (!("title" in change || "url" in change || "status" in change || "pinned" in change || "groupId" in change)) return;
  await boot();
  const m = mirrorOfWindow(tab.windowId);
  if (!m) return;
  if ("title" in change || "url" in change) m.table.record(tabId).changedAt = Date.now();
  m.schedule("title" in change ? TITLE_DEBOUNCE_MS : 0);
});
// Tab groups (docs/extension.md, "Tab groups"): made, renamed, recoloured, moved or closed.
for (const e of ["onCreated", "onUpdated", "onRemoved", "onMoved"]) chrome.tabGroups?.[e]?.addListener((g) => onWindowEvent(g.windowId));
chrome.windows.onRemoved.addListener(async (windowId) => {
  await boot();
  mirrorOfWindow(windowId)?.detached();
});
chrome.alarms.onAlarm.addListener(async (alarm) => {
  await boot();
  if (alarm.name !== RETRY_ALARM) return;
  for (const m of mirrors.values()) if (!m.b.stopped && !m.b.closed && m.client.status === "closed") m.start();
  updateRetryAlarm();
});
chrome.runtime.onStartup.addListener(() => boot());
chrome.runtime.onInstalled.addListener(() => boot());

// The keepalive: a repeated Focus is a data message the server ignores; it keeps the worker alive.
// Test switches in storage.session, read once and then followed by their change events (a storage
// call per tick would itself keep the worker alive, as any extension API call does): "keepalive"
// (off only in a test that lets the worker stop), "offline" (every connection cut, as a lost
// network), "pacing" (false: ops are not paced, so the server's rate limit answers them).
chrome.storage.session.get(["keepalive", "pacing"]).then((v) => {
  switches.keepalive = v.keepalive ?? true;
  switches.pacingOff = v.pacing === false;
  for (const m of mirrors.values()) m.client.pacing = !switches.pacingOff;
}, () => {});
chrome.storage.onChanged.addListener(async (changes, area) => {
  if (area !== "session") return;
  if ("keepalive" in changes) switches.keepalive = changes.keepalive.newValue ?? true;
  if ("pacing" in changes) {
    switches.pacingOff = changes.pacing.newValue === false;
    for (const m of mirrors.values()) m.client.pacing = !switches.pacingOff; // the client paces its outbox too
  }
  if ("offline" in changes) {
    await boot();
    switches.offline = Boolean(changes.offline.newValue);
    for (const m of mirrors.values()) {
      if (switches.offline) m.client.close();
      else if (m.client.status === "closed") m.start();
      m.publish();
    }
  }
});
setInterval(() => {
  if (!switches.keepalive) return;
  let connected = false;
  for (const m of mirrors.values()) {
    if (m.client.status === "connected") m.client.send({ focus: { tabId: m.client.focusTabId } });
    connected ||= m.client.status === "connected";
  }
  if (connected) keepAwake(); // only while there is a connection to keep: else the page may stop
}, KEEPALIVE_MS);

chrome.runtime.onMessage.addListener((request, _sender, reply) => {
  boot().then(() => handle(request)).then(reply, (error) => reply({ error: String(error?.message ?? error) }));
  return true;
});

boot().catch((error) => console.warn("tabsync: boot failed", error));
