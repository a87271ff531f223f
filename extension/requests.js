// The popup's requests (chrome.runtime messages): bind, unbind, mode, Reopen and Try again,
// Share, Recently closed, Reopen a tab, a pause's answer.

import { api as chrome } from "./browser-api.js";
import { cleanText, isLoopback } from "./mirror.js";
import { Mirror } from "./binding-mirror.js";
import { exportClient, importClient } from "./client-state.js";
import { mirrorOfWindow, mirrors, updateRetryAlarm } from "./registry.js";
import { bindingOffers } from "./welcome.js";
import { deleteBinding, randomTag, saveBinding, sessionNonce } from "./storage.js";

const WORKSPACE_ID = /^[A-Za-z0-9._-]{1,64}$/;

export async function bind(request) {
  const server = String(request.server ?? "").trim();
  const workspace = String(request.workspace ?? "").trim();
  const token = String(request.token ?? "").trim();
  if (!/^wss?:\/\/[^\s/?#]+(\/[^\s]*)?$/i.test(server)) return { error: "the server is a ws:// or wss:// address" };
  if (!WORKSPACE_ID.test(workspace)) return { error: "a workspace id is 1–64 of A–Z a–z 0–9 . _ -" };
  if (token && /^ws:/i.test(server) && !isLoopback(server)) {
    return { error: "a token is never sent in clear to another machine: use a wss:// address for this server" };
  }
  const win = await chrome.windows.get(request.windowId).catch(() => null);
  if (!win) return { error: "that window is gone" };
  // Two bind requests at once (two clicks, two popups) never both claim one window.
  if (mirrorOfWindow(win.id) || bindingWindows.has(win.id)) return { error: "this window is already bound: unbind it first" };
  bindingWindows.add(win.id);
  try {
    return await bindWindow(request, win, server, workspace, token);
  } finally {
    bindingWindows.delete(win.id);
  }
}

const bindingWindows = new Set(); // window ids a bind request is binding now

async function bindWindow(request, win, server, workspace, token) {
  if (win.incognito) {
    if (!(await chrome.extension.isAllowedIncognitoAccess())) return { error: "this extension is not allowed in private windows" };
    if (!request.incognito) return { error: "a private window is bound only when you choose it (tick the box)" };
  }
  const group = await boundGroup(request.group, win);
  if (group.error) return group;
  /** @type {Binding} */
  const binding = {
    id: `b-${randomTag(8)}`, server, workspace, token, remember: Boolean(request.remember) && !win.incognito,
    hadToken: Boolean(token), name: cleanText(request.name ?? "", 64), mode: request.mode === "browse" ? "browse" : "follow",
    clientId: `ext-${randomTag(12)}`, windowId: win.id, incognito: win.incognito, stopped: "", attach: "adopt-or-open",
    closed: false, viewOnly: "", group: group.group, groupId: group.groupId,
  };
  await saveBinding(binding);
  const m = new Mirror(binding, await sessionNonce());
  m.phase = "claimed";
  mirrors.set(binding.id, m);
  m.start();
  m.publish();
  return { bindingId: binding.id };
}

/**
 * What a bind binds (docs/extension.md, "The shared group"): "" the whole window; "new" a new
 * group (of the active tab, or of the workspace's tabs when it has some); a browser group id of
 * the window: that group. Browsers without tab groups bind whole windows only.
 */
async function boundGroup(choice, win) {
  if (choice === undefined || choice === null || choice === "") return { group: false, groupId: null };
  if (!chrome.tabGroups?.get || !chrome.tabs.group) return { error: "this browser has no tab groups: bind the whole window" };
  if (choice === "new") return { group: true, groupId: null };
  const g = await chrome.tabGroups.get(Number(choice)).catch(() => null);
  if (!g || g.windowId !== win.id) return { error: "that group is not in this window any more" };
  return { group: true, groupId: g.id };
}

export async function unbind(bindingId) {
  const m = mirrors.get(bindingId);
  if (m) { m.stop(); mirrors.delete(bindingId); }
  await deleteBinding(bindingId); // the tabs stay as they are
  updateRetryAlarm();
  return { ok: true };
}

export async function setMode(bindingId, mode) {
  const m = mirrors.get(bindingId);
  if (!m) return { error: "not bound" };
  m.b.mode = mode === "browse" ? "browse" : "follow";
  m.table.lastActive = null;
  await saveBinding(m.b);
  m.schedule();
  return { ok: true };
}

/**
 * Reopen (a closed binding) or Try again (a stopped one). A stopped binding whose window is still
 * open and was attached keeps that window: its tab map is this browser session's, so it goes on as
 * it is (as after a worker restart), whatever the workspace holds (one tab, none). Otherwise (a
 * closed window, or one never attached) the window that matches, else a new one.
 */
export async function reopen(request) {
  const m = mirrors.get(request.bindingId);
  if (!m) return { error: "not bound" };
  // A deleted workspace is not made again: a deleted binding is only unbound or bound anew.
  const offers = bindingOffers(m.b);
  if (!offers.retry && !offers.reopen && m.b.deleted) {
    return { error: `the workspace "${m.b.workspace}" was deleted on the server: unbind this window, or bind it to another workspace` };
  }
  const keep = m.ready && !m.b.closed && Boolean(await chrome.windows.get(m.b.windowId).catch(() => null));
  // One owner of the tables at a time: the old mirror is retired and its pass (if one is under
  // way) ends before anything moves on; the outbox goes on as a copy, so no op of the old client
  // can later share a seq with one of the fresh client.
  await m.retire();
  if (request.token) { m.b.token = String(request.token); m.b.viewOnly = ""; } // a new token: its own role counts
  m.b.stopped = "";
  m.b.closed = false;
  m.b.attach = keep ? "" : "reattach";
  await saveBinding(m.b);
  const fresh = new Mirror(m.b, await sessionNonce());
  importClient(fresh.client, exportClient(m.client));
  fresh.seenVersion = m.seenVersion;
  // Tabs kept local only stay so (the user shares each with Share): a new token does not publish them.
  if (keep) {
    // The window's own mirror goes on: its map (Chrome tab id -> workspace id), the pages last
    // synced, the ids applied ops removed whose tabs are still to close, the order and a pause.
    // Matching the window again as after a browser restart (at least 2 tabs by id or URL) would
    // find none for a workspace of one tab: the workspace would open in a new window (its tabs
    // twice) and this window, with its local-only tabs, would be left unbound.
    fresh.table = m.table;
    fresh.phase = "ready";
  } else {
    for (const [tid, v] of m.table.localOnlyEntries()) fresh.table.setLocalOnly(tid, v);
    fresh.table.localIds = m.table.localIds;
    fresh.restored = m.restored; // after a browser restart: the saved map to match the window against
  }
  fresh.reopening = true;
  mirrors.set(m.b.id, fresh);
  fresh.start();
  updateRetryAlarm();
  return { ok: true };
}

/** The answer to the popup's `request` (a bound window's mirror does the work). */
export async function handle(request) {
  const m = mirrors.get(request?.bindingId);
  switch (request?.type) {
    case "bind": return bind(request);
    case "unbind": return unbind(request.bindingId);
    case "mode": return setMode(request.bindingId, request.mode);
    case "reopen": return reopen(request);
    case "share": return m ? m.share(Number(request.tabId)) : { error: "not bound" };
    case "history": return m ? m.recentlyClosed(Math.min(Math.max(Number(request.limit) || 10, 1), 50)) : { error: "not bound" };
    case "reopenTab": return m ? m.reopenTab(String(request.tabId ?? ""), String(request.title ?? "")) : { error: "not bound" };
    case "resolve":
      if (!m) return { error: "not bound" };
      await m.resolve(request.choice === "server" ? "server" : "publish");
      return { ok: true };
    default: return { error: "unknown request" };
  }
}
