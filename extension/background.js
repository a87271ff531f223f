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
// Chrome events only mark a window dirty; the reconcile reads the real tabs, the map and the
// workspace state afresh each time and does only the differences, so running it twice is harmless
// and a restarted worker or a reconnect converges.

import { api as chrome, firefox, keepAwake } from "./browser-api.js";
import { TabsyncClient } from "./tabsync-client.js";
import { generateKeyBetween } from "./fractional-indexing.js";
import {
  MAX_TITLE, cleanText, isLoopback, matchTabs, tabFields, tokenRole, windowMatches, workspaceTabId,
} from "./mirror.js";
import { TabTable } from "./tab-table.js";
import { TITLE_DEBOUNCE_MS, URL_WAIT_MS, mirrorable, planArrange, planChanges } from "./plan.js";
import { execute, isPlaceholder, urlFor, urlNotKnownYet, windowTabs } from "./executor.js";
import { exportClient, importClient } from "./client-state.js";

const KEEPALIVE_MS = 20_000; // a data message this often keeps the worker (and the connection) alive
const RESTORE_WAIT_MS = 8_000; // after a browser restart, how long a binding waits for its window
const RETRY_ALARM = "tabsync-retry";
const WORKSPACE_ID = /^[A-Za-z0-9._-]{1,64}$/;
const BASE = chrome.runtime.getURL("");

/** @typedef {{ id: string, server: string, workspace: string, token: string, remember: boolean, name: string,
 *   mode: "follow" | "browse", clientId: string, windowId: number, incognito: boolean, stopped: string,
 *   attach: "adopt-or-open" | "reattach" | "", closed: boolean, viewOnly: string }} Binding */

const mirrors = new Map(); // bindingId -> Mirror
let booted = null;
let offline = false; // a test switch (storage.session "offline"): every connection cut, as a lost network

function randomTag(n = 8) {
  const bytes = new Uint8Array(n);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => "abcdefghijklmnopqrstuvwxyz0123456789"[b % 36]).join("");
}

// ------------------------------------------------------------------ storage (writes serialized)

let storageChain = Promise.resolve();
/** Runs `fn` after every storage write queued before it: read-modify-writes never interleave. */
function serialized(fn) {
  const run = storageChain.then(fn, fn);
  storageChain = run.catch(() => {});
  return run;
}

async function loadBindings() {
  const local = (await chrome.storage.local.get("bindings")).bindings ?? {};
  const priv = (await chrome.storage.session.get("privateBindings")).privateBindings ?? {};
  const tokens = await chrome.storage.session.get(null);
  const all = { ...local, ...priv };
  for (const b of Object.values(all)) if (!b.token) b.token = tokens[`token:${b.id}`] ?? "";
  return all;
}

function saveBinding(binding) {
  return serialized(async () => {
    if (binding.incognito) {
      const priv = (await chrome.storage.session.get("privateBindings")).privateBindings ?? {};
      priv[binding.id] = binding;
      await chrome.storage.session.set({ privateBindings: priv });
      return;
    }
    const bindings = (await chrome.storage.local.get("bindings")).bindings ?? {};
    bindings[binding.id] = binding.remember ? binding : { ...binding, token: "" };
    await chrome.storage.local.set({ bindings });
    if (!binding.remember && binding.token) await chrome.storage.session.set({ [`token:${binding.id}`]: binding.token });
  });
}

function deleteBinding(id) {
  return serialized(async () => {
    const bindings = (await chrome.storage.local.get("bindings")).bindings ?? {};
    delete bindings[id];
    await chrome.storage.local.set({ bindings });
    const priv = (await chrome.storage.session.get("privateBindings")).privateBindings ?? {};
    delete priv[id];
    await chrome.storage.session.set({ privateBindings: priv });
    await chrome.storage.local.remove([`resume:${id}`]);
    await chrome.storage.session.remove([`resume:${id}`, `status:${id}`, `token:${id}`]);
  });
}

function resumeArea(binding) {
  return binding.incognito ? chrome.storage.session : chrome.storage.local;
}

/** This browser session's nonce (part of workspace tab ids made from Chrome tab ids). */
async function sessionNonce() {
  const { nonce } = await chrome.storage.session.get("nonce");
  if (nonce) return nonce;
  const fresh = randomTag(4);
  await chrome.storage.session.set({ nonce: fresh });
  return fresh;
}

// Attaching a window (adopt, open, re-attach) is serialized across bindings: two bindings never
// claim one window.
let attachChain = Promise.resolve();
function attachSerially(fn) {
  const run = attachChain.then(fn, fn);
  attachChain = run.catch(() => {});
  return run;
}

function claimedWindows(except) {
  return new Set([...mirrors.values()].filter((m) => m !== except && !m.b.closed && (m.ready || m.claimed)).map((m) => m.b.windowId));
}

const REASONS = {
  NOT_PERMITTED: "your token may only view this workspace",
  NOT_EDITABLE: "the workspace is read-only",
  LIMIT_EXCEEDED: "the workspace is full",
  INVALID_ARGUMENT: "the server refused it as invalid",
  LOCKED: "the tab is locked in the workspace",
  pinned: "pinned tabs stay in this window only",
};

/** One bound window: its client, its id map and its reconcile loop. */
class Mirror {
  /** @param {Binding} binding */
  constructor(binding, nonce) {
    this.b = binding;
    this.nonce = nonce;
    this.tag = binding.clientId.slice(-6);
    this.table = new TabTable(); // the real tabs, their workspace ids and marks (tab-table.js)
    this.reopenTitles = new Map(); // workspace id -> title, of closed tabs the popup asked to reopen
    this.ready = false; // the window and the workspace are attached; the reconcile may act
    this.claimed = false; // the window is being attached (attachSerially)
    this.restored = null; // after a browser restart or an update: { map, tabs } to match the window against
    this.reconciledState = null; // the client state the last pass started from
    this.dirty = false;
    this.running = false;
    this.delayTimer = null;
    this.lastRejection = null;
    this.tokens = Infinity; // a full bucket (capped at the rate on first use)
    this.tokensAt = Date.now();
    this.attaching = false;
    this.retired = false; // Try again or Reopen replaced it: nothing runs again
    this.passing = Promise.resolve(); // the pass loop under way, if any
    this.client = new TabsyncClient({
      url: binding.server, workspace: binding.workspace, clientId: binding.clientId,
      name: binding.name, token: binding.token, backoff: { first: 300, max: 5000 },
    });
    // A change of state needs a pass; a change of presence only (peers, their focus) needs the
    // popup and the badge: a pass per presence message would queue the next op's pass behind it.
    this.client.addEventListener("change", () => {
      if (this.client.state !== this.reconciledState) this.schedule();
      else this.presenceChanged();
    });
    this.client.addEventListener("status", (e) => this.onStatus(e.detail));
    this.client.addEventListener("rejected", (e) => this.onRejected(e.detail));
    this.client.addEventListener("retrying", (e) => { this.lastRejection = this.describe(e.detail, true); this.publish(); });
    this.client.addEventListener("applied", (e) => this.onRemoved(e.detail.removed));
    this.client.addEventListener("welcome", (e) => this.onWelcome(e.detail));
    this.client.addEventListener("error", (e) => this.onError(e.detail));
  }

  /** Loads the saved record. `trusted`: the Chrome tab ids in it are this browser session's. */
  restore(r, trusted) {
    const c = this.client;
    importClient(c, r);
    const { table, prior } = TabTable.restore(r, trusted);
    this.table = table;
    if (trusted) {
      this.ready = true;
    } else {
      // The ids and pages the window had, matched against the restored window at attach time.
      const { map, seen } = prior;
      const tabs = c.state.tabs.map((t) => ({ id: t.id, url: t.url, title: t.title }));
      for (const [tid, wid] of map) {
        if (!tabs.some((t) => t.id === wid) && !table.removed.has(wid)) continue;
        if (!tabs.some((t) => t.id === wid)) tabs.push({ id: wid, url: seen.get(tid)?.url ?? "", title: seen.get(tid)?.title ?? "" });
      }
      this.restored = { map, tabs };
    }
  }

  async persist() {
    const c = this.client;
    await resumeArea(this.b).set({
      [`resume:${this.b.id}`]: { ...exportClient(c), ...this.table.serialize() },
    });
  }

  start() {
    if (this.b.stopped || this.b.closed) { this.publish(); return; }
    if (offline) { this.publish(); return; }
    this.client.connect();
  }

  stop() {
    clearTimeout(this.delayTimer);
    this.client.close();
  }

  /**
   * This mirror acts no more (Try again or Reopen hands its window to a fresh one): its client is
   * closed, no pass starts, and the returned promise resolves once the pass under way (if any)
   * has ended, so its tables have one owner at a time.
   */
  async retire() {
    this.retired = true;
    this.ready = false;
    this.stop();
    await this.passing;
  }

  /** Can this binding submit anything? (a viewer's token cannot). */
  get viewer() {
    return Boolean(this.b.viewOnly) || tokenRole(this.b.token) === "viewer";
  }

  /** A read-only mirror: a viewer, or a workspace made non-editable. Local edits stay local. */
  get readOnly() {
    return this.viewer || (this.client.state.editable === false && this.client.state.version > 0);
  }

  // ------------------------------------------------------------------ client events

  onStatus(status) {
    if (status === "connected" && !this.ready && !this.attaching && !this.b.closed) {
      this.attaching = true;
      this.attach()
        .catch((error) => this.fail(`could not attach the window: ${error?.message ?? error}`))
        .finally(() => { this.attaching = false; });
    }
    updateRetryAlarm();
    this.publish();
  }

  /**
   * Ids an applied op took out of the workspace: their real tabs are closed by the next pass. One
   * path for every op: the client lists the ids each Applied dropped, whatever its kind, so a
   * `restore` that drops tabs closes exactly those, as a `replace` does (and, as for any applied
   * op, without the snapshot brake); the tabs it brings back open through step 4.
   */
  onRemoved(ids) {
    const table = this.table;
    for (const id of ids) { table.removed.add(id); table.snapshotRemoved.delete(id); }
    if (table.removed.size > 0) {
      for (const t of this.client.confirmed.tabs) table.removed.delete(t.id); // added back since
    }
  }

  /**
   * A Welcome. Another epoch than the binding's: the server lost or replaced its history. Nothing
   * is closed for it. When the new history holds no tab this window does not know (it is empty,
   * or another window is publishing the same tabs), the window's tabs are published again (a
   * union: nothing of anyone's is lost); otherwise the mirror pauses and the popup asks. A snapshot of the same epoch names tabs that ops removed
   * while we were away: they close, unless that is many at once (the brake), which asks too.
   */
  onWelcome({ previousEpoch, epoch, recovered, removed }) {
    const table = this.table;
    const now = new Set(this.client.confirmed.tabs.map((t) => t.id));
    for (const id of now) table.present(id);
    if (previousEpoch && epoch !== previousEpoch) {
      const ours = new Set([...table.mappedIds(), ...(this.restored?.tabs ?? []).map((t) => t.id)]);
      const kept = [...ours].filter((id) => !now.has(id));
      const foreign = [...now].filter((id) => !ours.has(id));
      table.removed.clear();
      table.snapshotRemoved.clear();
      // Tabs this window does not know, and tabs of this window missing: the two disagree.
      if (foreign.length > 0 && kept.length > 0) {
        table.paused = {
          kind: "epoch", count: kept.length,
          reason: "the server's workspace is not the one this window mirrored (its history was lost or replaced): "
            + "nothing was closed. Publish this window's tabs again, or open the server's version in a new window.",
        };
      } else {
        table.paused = null;
      }
      return;
    }
    if (recovered) this.onRemoved(removed);
    else for (const id of removed) table.snapshotRemoved.add(id);
  }

  onRejected(detail) {
    const { code, op } = detail;
    const [[kind, body]] = Object.entries(op ?? { none: {} });
    // An op on a tab whose add was refused (it stays local only) says nothing new: not shown.
    const aboutLocal = code === "TAB_GONE" && this.table.localIds.has(body?.tabId);
    if (!aboutLocal) this.lastRejection = this.describe(detail, false);
    if (code === "NOT_PERMITTED" && !this.b.viewOnly) { this.b.viewOnly = code; saveBinding(this.b); }
    if ((kind === "add" || kind === "open") && code !== "TAB_EXISTS") {
      // Refusals never close: the tab stays open, out of the workspace, listed as local only.
      this.keepLocal(body.tab.id, code);
    } else if (kind === "replace") {
      for (const t of body.tabs ?? []) this.keepLocal(t.id, code);
      // Adopting was refused for good: the window stays as it is; the workspace opens in a new
      // window as a read-only mirror.
      if (code === "NOT_PERMITTED" || code === "NOT_EDITABLE") {
        this.b.viewOnly = this.b.viewOnly || code;
        this.release();
        attachSerially(() => this.openWindow(this.client.state)).then(() => saveBinding(this.b)).then(() => this.schedule());
      }
    } else if (kind === "remove" && (code === "NOT_PERMITTED" || code === "NOT_EDITABLE")) {
      this.table.dismissed.add(body.tabId); // closed here only: not reopened
    }
    this.schedule(0);
    this.publish();
  }

  /** The real tab of workspace id `wsId` leaves the mirror and stays open, marked local only. */
  keepLocal(wsId, code) {
    const table = this.table;
    table.localIds.add(wsId);
    const tid = table.tabOf(wsId);
    if (tid === undefined) return;
    table.unmap(tid);
    table.setLocalOnly(tid, { code, wsId, title: table.seen(tid)?.title ?? "" });
  }

  /** The bound window's tabs leave the mirror, untouched (adopting it was refused). */
  release() {
    this.table.release();
  }

  describe({ code, message, op }, retrying) {
    const [[kind, body]] = Object.entries(op ?? { none: {} });
    const tabId = body?.tabId ?? body?.tab?.id ?? "";
    const title = this.titleOf(tabId) || body?.tab?.title || this.reopenTitles.get(tabId) || "";
    return { code, message, kind, tabId, title, retrying, at: Date.now() };
  }

  onError(error) {
    if (error?.code === "UNAUTHORIZED" || error?.code === "INVALID_ARGUMENT") {
      this.fail(error.code === "UNAUTHORIZED"
        ? `the server refused the token (${error.message || "UNAUTHORIZED"}); bind again with a valid one`
        : `the server refused this binding (${error.message || error.code})`);
    }
  }

  /** Stops for good with `reason` shown in the popup: no retries until the user binds again. */
  fail(reason) {
    this.b.stopped = reason;
    this.client.close();
    saveBinding(this.b);
    updateRetryAlarm();
    this.publish();
  }

  titleOf(wsId) {
    const c = this.client;
    return (c.state.tabs.find((t) => t.id === wsId) ?? c.confirmed.tabs.find((t) => t.id === wsId))?.title ?? "";
  }

  // ------------------------------------------------------------------ attaching

  /** The first Welcome of a new binding, after a browser restart, an update or Reopen. */
  async attach() {
    await attachSerially(async () => {
      this.claimed = true;
      const state = this.client.state;
      if (this.b.attach === "reattach") {
        await this.reattach(state);
      } else if (this.readOnly) {
        // A view-only binding never adopts: the workspace opens in a window of its own.
        await this.openWindow(state);
      } else if (state.tabs.length === 0) {
        await this.adopt();
      } else {
        await this.openWindow(state);
      }
    });
    if (this.b.closed) return; // no window to attach (a closed binding stays closed)
    this.b.attach = "";
    await saveBinding(this.b);
    this.ready = true;
    this.schedule();
  }

  /** An empty workspace takes the window's tabs, in one `replace` (one op, whatever their number). */
  async adopt() {
    const table = this.table;
    const tabs = (await chrome.tabs.query({ windowId: this.b.windowId })).filter((t) => mirrorable(table, t));
    if (tabs.length === 0) return;
    const list = tabs.map((t) => {
      const id = workspaceTabId(this.tag, this.nonce, t.id);
      const f = tabFields(t);
      table.map(t.id, id);
      table.setSeen(t.id, f);
      const tab = { id, title: f.title };
      if (f.url) tab.url = f.url;
      if (f.badge) tab.badge = f.badge;
      return tab;
    });
    this.client.submit({ replace: { tabs: list } });
    table.lastOrder = list.map((t) => t.id);
    const active = tabs.find((t) => t.active);
    table.lastActive = active ? table.wsOf(active.id) : list[0].id;
    if (table.lastActive !== list[0].id) this.client.activate(table.lastActive);
  }

  /** The workspace opens in a window of its own (never merged into one with tabs). */
  async openWindow(state) {
    const first = state.tabs[0];
    const url = first ? urlFor(first, false) : urlFor({ title: "(empty workspace)" }, false);
    const win = await chrome.windows.create({ url, focused: true, incognito: this.b.incognito });
    this.b.windowId = win.id;
    this.b.closed = false;
    const table = this.table;
    if (first) {
      table.map(win.tabs[0].id, first.id);
      table.setSeen(win.tabs[0].id, { title: first.title, badge: first.badge, url: first.url || null });
      table.lastOrder = [first.id];
    } else {
      table.ignore(win.tabs[0].id);
      table.lastOrder = [];
    }
    table.lastActive = null; // the reconcile activates the workspace's active tab
  }

  /**
   * After a browser restart, an extension update or Reopen: the window whose tabs match the
   * workspace's by ids, or by at least 80% of its URLs (and at least 2), is re-attached, tab by
   * tab (mirror.js matchTabs); else, after a restart, the binding waits a little for the browser
   * to restore its window, then opens the workspace in a new window. A window that no binding
   * claimed is never published. A binding the user closed opens only through Reopen.
   */
  async reattach(state) {
    const records = this.restored?.tabs ?? state.tabs.map((t) => ({ id: t.id, url: t.url, title: t.title }));
    for (const t of state.tabs) if (!records.some((r) => r.id === t.id)) records.push({ id: t.id, url: t.url, title: t.title });
    const prior = this.restored?.map ?? new Map();
    const deadline = Date.now() + (this.restored ? RESTORE_WAIT_MS : 0);
    for (;;) {
      const taken = claimedWindows(this);
      const windows = await chrome.windows.getAll({ populate: true, windowTypes: ["normal"] });
      let best = null;
      for (const w of windows) {
        if (taken.has(w.id) || w.incognito !== this.b.incognito) continue;
        const tabs = w.tabs.slice().sort((a, b) => a.index - b.index);
        const match = matchTabs(records, tabs, prior, BASE);
        if (!windowMatches(records, match)) continue;
        const score = match.byId * 2 + match.byUrl + match.other;
        if (!best || score > best.score) best = { w, match, score, tabs };
      }
      if (best) {
        this.b.windowId = best.w.id;
        this.b.closed = false;
        const table = this.table;
        for (const [tid, wid] of best.match.map) table.map(tid, wid);
        for (const t of best.tabs) if (table.wsOf(t.id) !== undefined) table.setSeen(t.id, tabFields(t));
        // Navigations of its own while the browser was closed are the page's: keep the URL the
        // workspace knew as the one last synced, so step 8 publishes the new one.
        for (const [tid, wid] of table.mapped()) {
          const r = records.find((x) => x.id === wid);
          if (r) table.setSeen(tid, { ...table.seen(tid), title: r.title, url: r.url || null });
        }
        table.lastOrder = table.lastOrder ?? state.tabs.map((t) => t.id);
        table.lastActive = null;
        this.restored = null;
        return;
      }
      if (Date.now() >= deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    this.restored = null;
    if (this.b.closed && !this.reopening) {
      this.client.close();
      return;
    }
    if (state.tabs.length === 0) { this.fail("the bound window is gone and the workspace is empty: bind a window again"); return; }
    this.release();
    await this.openWindow(state);
  }

  // ------------------------------------------------------------------ the reconcile loop

  /** Marks the window dirty; the reconcile runs once now (or after `delay` ms), never twice at once. */
  schedule(delay = 0) {
    if (delay > 0) {
      clearTimeout(this.delayTimer);
      this.delayTimer = setTimeout(() => this.schedule(0), delay);
      return;
    }
    if (this.retired) return;
    this.dirty = true;
    if (this.running) return;
    this.running = true;
    this.passing = (async () => {
      while (this.dirty) {
        this.dirty = false;
        try {
          await this.reconcile();
        } catch (error) {
          console.warn("tabsync: reconcile failed", error);
          this.schedule(500);
        }
      }
      this.running = false;
    })();
  }

  /** How many ops the pacing bucket holds now (80% of the server's per-connection rate). */
  budget() {
    if (pacingOff) return Infinity;
    const rate = Math.max(1, Math.floor(0.8 * Number(this.client.limits?.maxOpsPerSecond ?? 50)));
    const now = Date.now();
    this.tokens = Math.min(rate, this.tokens + ((now - this.tokensAt) / 1000) * rate);
    this.tokensAt = now;
    return Math.floor(this.tokens);
  }

  /** What the planner reads for the window's real tabs `real` (plan.js planChanges). */
  context(real) {
    return {
      real, state: this.client.state, table: this.table, mode: this.b.mode, readOnly: this.readOnly,
      viewer: this.viewer, budget: this.budget(), now: Date.now(), keyBetween: generateKeyBetween,
      newId: (tid) => workspaceTabId(this.tag, this.nonce, tid), urlPending: (t) => urlNotKnownYet(t, URL_WAIT_MS),
      isPlaceholder,
    };
  }

  /** Submits a plan's ops and takes them from the pacing bucket. */
  submitAll(plan) {
    if (!pacingOff) this.tokens -= plan.used;
    for (const op of plan.ops) this.client.submit(op);
  }

  /**
   * One pass (docs/extension.md, "How it works"): read the window, plan (plan.js), submit the
   * ops and execute the actions (executor.js); then read again for the order, the active tab,
   * navigation and titles. A paused mirror does nothing until the popup's answer.
   */
  async reconcile() {
    if (!this.ready || this.b.stopped || this.b.closed) return;
    this.reconciledState = this.client.state; // a later state (an Applied, our own submit) schedules another pass
    let real = await windowTabs(this.b.windowId);
    const win = await chrome.windows.get(this.b.windowId).catch(() => null);
    if (!real || !win) { this.detached(); return; }
    const changes = planChanges(this.context(real));
    this.submitAll(changes);
    await execute(changes.actions, this.b.windowId, this.table); // a pause plans no closes
    if (!changes.pause) {
      real = (await windowTabs(this.b.windowId)) ?? [];
      const arrange = planArrange({ ...this.context(real), deferred: changes.deferred });
      this.submitAll(arrange);
      await execute(arrange.actions, this.b.windowId, this.table);
      this.client.focus(arrange.focus);
      const wait = [changes.later, arrange.later].filter((x) => x !== null);
      if (wait.length > 0) this.schedule(Math.min(...wait));
    }
    await this.persist();
    this.publish();
    updateBadge(this, real);
  }

  presenceChanged() {
    this.publish();
    chrome.tabs.query({ windowId: this.b.windowId, active: true })
      .then((tabs) => updateBadge(this, tabs), () => {});
  }

  /**
   * The bound window is gone (closed by the user, or the browser is shutting down): the binding
   * detaches and its connection closes. Only Reopen, or the browser restoring the window at its
   * next start, brings it back; a reconnect or a server restart does not.
   */
  detached() {
    if (this.b.closed) return;
    this.ready = false;
    this.b.closed = true;
    this.b.attach = "reattach";
    clearTimeout(this.delayTimer);
    this.client.close();
    this.persist().catch(() => {});
    saveBinding(this.b);
    updateRetryAlarm();
    this.publish();
  }

  /** The popup's answer to a pause: "publish" this window's tabs again, or take the "server"'s version. */
  async resolve(choice) {
    const table = this.table;
    const paused = table.paused;
    if (!paused) return;
    table.paused = null;
    const gone = [...table.snapshotRemoved];
    table.snapshotRemoved.clear();
    if (choice === "server" && paused.kind === "brake") {
      for (const id of gone) table.removed.add(id); // the user said so: they close
    } else if (choice === "server") {
      // The window keeps its tabs, unbound; the server's version opens in a new window.
      this.ready = false;
      this.release();
      await attachSerially(() => this.openWindow(this.client.state));
      await saveBinding(this.b);
      this.ready = true;
    }
    this.schedule();
  }

  /**
   * The popup's Share on a local-only tab: its add is submitted again (under the id it had), once
   * the cause may be gone (the workspace has room again, the token or the workspace changed). A
   * refusal again keeps it local only, with the new reason.
   */
  share(tabId) {
    const v = this.table.localOnly(tabId);
    if (!v) return { error: "that tab is not kept local only" };
    if (v.code === "pinned") return { error: "pinned tabs stay in this window: unpin it to share it" };
    if (this.readOnly) return { error: `still ${this.viewer ? REASONS.NOT_PERMITTED : REASONS.NOT_EDITABLE}: it stays local only` };
    this.table.setLocalOnly(tabId, null);
    if (v.wsId) this.table.localIds.delete(v.wsId);
    if (this.lastRejection?.tabId === v.wsId) this.lastRejection = null;
    this.schedule();
    return { ok: true };
  }

  /**
   * The popup's Recently closed: the workspace's tabs closed lately and not back (a HistoryQuery
   * `closed` over this binding's session), newest first, those open again since left out (an answer
   * shows only what is durable, so it may lag the Applied just received).
   */
  async recentlyClosed(limit = 10) {
    const c = this.client;
    if (!this.ready || c.status !== "connected") return { closed: [], note: "shown once the window is connected" };
    let answer;
    try {
      answer = await c.history({ closed: limit });
    } catch (error) {
      return { error: `could not list the closed tabs: ${error?.message ?? error}` };
    }
    if (answer.error) {
      return { error: `the server could not list the closed tabs (${answer.error.code ?? "ERROR"}${answer.error.message ? `: ${answer.error.message}` : ""})` };
    }
    const open = new Set(c.state.tabs.map((t) => t.id));
    const closed = (answer.closed ?? []).filter((x) => x.tab?.id && !open.has(x.tab.id)).map((x) => ({
      tabId: x.tab.id, title: cleanText(x.tab.title ?? "", MAX_TITLE), url: String(x.tab.url ?? ""),
      author: cleanText(x.author ?? "", 64), at: String(x.at ?? ""), version: String(x.version ?? ""),
    }));
    return { closed, canReopen: !this.readOnly };
  }

  /**
   * The popup's Reopen on a recently closed tab: a `reopen` op. The server turns it into an `add`
   * of the tab's old id, which every window (this one too) opens through step 4 of the reconcile,
   * mapped to that id at once: nothing is opened here before the server says so, so the tab is
   * never opened twice nor published again as a new tab. Resolves once the server answered (or
   * after 10 s, the op still in the outbox): a refusal's message goes back to the popup.
   */
  reopenTab(tabId, title = "") {
    const c = this.client;
    if (this.readOnly) return { error: `a view-only window cannot reopen tabs: ${this.viewer ? REASONS.NOT_PERMITTED : REASONS.NOT_EDITABLE}` };
    if (!this.ready || c.status !== "connected") return { error: "not connected: try again once the window is connected" };
    if (typeof tabId !== "string" || tabId === "") return { error: "no tab to reopen" };
    if (c.state.tabs.some((t) => t.id === tabId)) return { error: "that tab is open in the workspace already" };
    this.reopenTitles.set(tabId, cleanText(title, MAX_TITLE));
    if (this.reopenTitles.size > 50) this.reopenTitles.delete(this.reopenTitles.keys().next().value);
    const entry = c.reopen(tabId);
    return new Promise((resolve) => {
      let timer = null;
      const done = (value) => {
        clearTimeout(timer);
        c.removeEventListener("rejected", onRejected);
        c.removeEventListener("change", onChange);
        resolve(value);
      };
      // "rejected" comes before the op leaves the outbox; "change" after it was applied.
      const onRejected = (e) => {
        if (e.detail.op !== entry.op) return;
        const { code, message } = e.detail;
        // Shown by the popup with the other refusals (lastRejection), so not as an error again.
        done({ refused: `the server refused to reopen it: ${message || REASONS[code] || code} (${code})` });
      };
      const onChange = () => { if (!c.pending.includes(entry)) done({ ok: true, tabId }); };
      c.addEventListener("rejected", onRejected);
      c.addEventListener("change", onChange);
      timer = setTimeout(() => done({ ok: true, tabId, waiting: true }), 10_000);
    });
  }

  // ------------------------------------------------------------------ what the popup shows

  publish() {
    clearTimeout(this.publishTimer);
    this.publishTimer = setTimeout(() => this.publishNow(), 50);
  }

  publishNow() {
    if (mirrors.get(this.b.id) !== this) return; // retired (Try again made a fresh one, or unbound): not shown
    const c = this.client;
    const titles = new Map(c.state.tabs.map((t) => [t.id, t.title]));
    const status = {
      bindingId: this.b.id, windowId: this.b.windowId, workspace: this.b.workspace, server: this.b.server,
      mode: this.b.mode, name: this.b.name,
      status: this.b.stopped ? "stopped" : this.b.closed ? "closed" : this.table.paused ? "paused"
        : this.ready ? c.status : (c.status === "connected" ? "attaching" : c.status),
      stopped: this.b.stopped, version: c.confirmed.version, pending: c.pending.length,
      retrying: c.retrying.length, paused: this.table.paused, viewOnly: this.readOnly ? (this.viewer ? "viewer" : "read-only") : "",
      tabs: c.state.tabs.map((t) => ({ id: t.id, title: t.title, badge: t.badge, locked: t.locked })),
      localOnly: this.table.localOnlyEntries().map(([tid, v]) => ({ tabId: tid, code: v.code, title: v.title, reason: REASONS[v.code] ?? v.code })),
      activeTabId: c.state.activeTabId, editable: c.state.editable,
      sessionId: c.sessionId,
      peers: c.peers.filter((p) => p.sessionId !== c.sessionId).map((p) => ({
        name: p.name || p.clientId || "?", tabId: p.focusTabId ?? "", title: titles.get(p.focusTabId) ?? "",
      })),
      rejection: this.lastRejection && !this.lastRejection.title
        ? { ...this.lastRejection, title: this.table.localOnlyEntries().map(([, v]) => v).find((v) => v.wsId && v.wsId === this.lastRejection.tabId)?.title ?? "" }
        : this.lastRejection,
      map: this.table.mapped(),
    };
    chrome.storage.session.set({ [`status:${this.b.id}`]: status });
  }
}

/**
 * The action badge: how many others are here, and "!" when the window is not fully shared (tabs
 * kept local only, a paused or read-only mirror); the tooltip says why and who views what. Set on
 * the bound window's active tab, the one whose button shows (each pass runs after an activation
 * too), so a presence change costs two calls, not two per tab.
 */
function updateBadge(mirror, real) {
  const c = mirror.client;
  const others = c.peers.filter((p) => p.sessionId !== c.sessionId);
  const titles = new Map(c.state.tabs.map((t) => [t.id, t.title]));
  const table = mirror.table;
  const localOnly = table.localOnlyEntries().length;
  const partial = localOnly > 0 || table.paused || mirror.readOnly;
  const text = (others.length > 0 ? String(Math.min(others.length, 99)) : "") + (partial ? "!" : "");
  const notes = [];
  if (table.paused) notes.push("paused: " + table.paused.reason);
  if (mirror.readOnly) notes.push("read-only mirror: tabs opened here stay in this window");
  if (localOnly > 0) notes.push(`${localOnly} tab(s) of this window are local only (not shared)`);
  const tooltip = [`tabsync: ${mirror.b.workspace}`, ...notes, ...others.map((p) =>
    `${cleanText(p.name || p.clientId, 64)} views ${cleanText(titles.get(p.focusTabId) ?? "nothing", MAX_TITLE)}`)].join("\n");
  const active = real.find((t) => t.active);
  if (!active) return;
  // Chrome clears a tab's own badge when it navigates: a load (status, url) sets it again.
  const signature = `${text}|${tooltip}|${active.id}|${active.status}|${active.url}`;
  if (signature === mirror.badgeSignature) return;
  mirror.badgeSignature = signature;
  chrome.action.setBadgeText({ tabId: active.id, text }).catch(() => {});
  if (partial) chrome.action.setBadgeBackgroundColor({ tabId: active.id, color: "#b25b00" }).catch(() => {});
  chrome.action.setTitle({ tabId: active.id, title: tooltip }).catch(() => {});
}

/**
 * An alarm every minute while any binding is live: it wakes a worker the browser stopped (the
 * keepalive failed, or the browser chose to), which resumes, reconnects and catches up; while the
 * worker lives, the client retries a lost connection itself (backoff up to 5 s). A period longer
 * than the 30 s idle limit lets an idle worker stop between alarms instead of being held up by
 * them. A binding stopped for a reason (a refused token) or closed has none.
 */
async function updateRetryAlarm() {
  const live = [...mirrors.values()].some((m) => !m.b.stopped && !m.b.closed);
  const existing = await chrome.alarms.get(RETRY_ALARM);
  if (live && !existing) chrome.alarms.create(RETRY_ALARM, { periodInMinutes: 1 });
  if (!live && existing) chrome.alarms.clear(RETRY_ALARM);
}

// ------------------------------------------------------------------ boot

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
    offline = Boolean(session.offline);
    pacingOff = session.pacing === false;
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
        });
      }
      m.start();
    }
    updateRetryAlarm();
  })();
  return booted;
}

/** Whether the binding was made with a token (its role or the server needs one to resume). */
function tokenNeeded(b) {
  return Boolean(b.hadToken);
}

/** After a browser restart: waits a little for a restored window that matches the closed binding. */
Mirror.prototype.findRestored = async function findRestored() {
  const records = this.restored?.tabs ?? [];
  const deadline = Date.now() + RESTORE_WAIT_MS;
  while (Date.now() < deadline) {
    const windows = await chrome.windows.getAll({ populate: true, windowTypes: ["normal"] });
    const taken = claimedWindows(this);
    for (const w of windows) {
      if (taken.has(w.id) || w.incognito !== this.b.incognito) continue;
      const tabs = w.tabs.slice().sort((a, b) => a.index - b.index);
      if (windowMatches(records, matchTabs(records, tabs, this.restored?.map ?? new Map(), BASE))) return true;
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  return false;
};

function mirrorOfWindow(windowId) {
  for (const m of mirrors.values()) if (m.b.windowId === windowId && !m.b.closed) return m;
  return null;
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
  if (!("title" in change || "url" in change || "status" in change || "pinned" in change)) return;
  await boot();
  const m = mirrorOfWindow(tab.windowId);
  if (!m) return;
  if ("title" in change || "url" in change) m.table.record(tabId).changedAt = Date.now();
  m.schedule("title" in change ? TITLE_DEBOUNCE_MS : 0);
});
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
let keepalive = true;
let pacingOff = false;
chrome.storage.session.get(["keepalive", "pacing"]).then((v) => { keepalive = v.keepalive ?? true; pacingOff = v.pacing === false; });
chrome.storage.onChanged.addListener(async (changes, area) => {
  if (area !== "session") return;
  if ("keepalive" in changes) keepalive = changes.keepalive.newValue ?? true;
  if ("pacing" in changes) pacingOff = changes.pacing.newValue === false;
  if ("offline" in changes) {
    await boot();
    offline = Boolean(changes.offline.newValue);
    for (const m of mirrors.values()) {
      if (offline) m.client.close();
      else if (m.client.status === "closed") m.start();
      m.publish();
    }
  }
});
setInterval(() => {
  if (!keepalive) return;
  let connected = false;
  for (const m of mirrors.values()) {
    if (m.client.status === "connected") m.client.send({ focus: { tabId: m.client.focusTabId } });
    connected ||= m.client.status === "connected";
  }
  if (connected) keepAwake(); // only while there is a connection to keep: else the page may stop
}, KEEPALIVE_MS);

// ------------------------------------------------------------------ the popup's requests

async function bind(request) {
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
  /** @type {Binding} */
  const binding = {
    id: `b-${randomTag(8)}`, server, workspace, token, remember: Boolean(request.remember) && !win.incognito,
    hadToken: Boolean(token), name: cleanText(request.name ?? "", 64), mode: request.mode === "browse" ? "browse" : "follow",
    clientId: `ext-${randomTag(12)}`, windowId: win.id, incognito: win.incognito, stopped: "", attach: "adopt-or-open",
    closed: false, viewOnly: "",
  };
  await saveBinding(binding);
  const m = new Mirror(binding, await sessionNonce());
  m.claimed = true;
  mirrors.set(binding.id, m);
  m.start();
  m.publish();
  return { bindingId: binding.id };
}

async function unbind(bindingId) {
  const m = mirrors.get(bindingId);
  if (m) { m.stop(); mirrors.delete(bindingId); }
  await deleteBinding(bindingId); // the tabs stay as they are
  updateRetryAlarm();
  return { ok: true };
}

async function setMode(bindingId, mode) {
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
async function reopen(request) {
  const m = mirrors.get(request.bindingId);
  if (!m) return { error: "not bound" };
  const keep = m.ready && !m.b.closed && Boolean(await chrome.windows.get(m.b.windowId).catch(() => null));
  if (request.token) { m.b.token = String(request.token); m.b.viewOnly = ""; } // a new token: its own role counts
  m.b.stopped = "";
  m.b.closed = false;
  m.b.attach = keep ? "" : "reattach";
  await saveBinding(m.b);
  // One owner of the tables at a time: the old mirror is retired and its pass (if one is under
  // way) ends before anything moves on; the outbox goes on as a copy, so no op of the old client
  // can later share a seq with one of the fresh client.
  await m.retire();
  const fresh = new Mirror(m.b, await sessionNonce());
  importClient(fresh.client, exportClient(m.client));
  // Tabs kept local only stay so (the user shares each with Share): a new token does not publish them.
  if (keep) {
    // The window's own mirror goes on: its map (Chrome tab id -> workspace id), the pages last
    // synced, the ids applied ops removed whose tabs are still to close, the order and a pause.
    // Matching the window again as after a browser restart (at least 2 tabs by id or URL) would
    // find none for a workspace of one tab: the workspace would open in a new window (its tabs
    // twice) and this window, with its local-only tabs, would be left unbound.
    fresh.table = m.table;
    fresh.ready = true;
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

chrome.runtime.onMessage.addListener((request, _sender, reply) => {
  (async () => {
    await boot();
    switch (request?.type) {
      case "bind": return bind(request);
      case "unbind": return unbind(request.bindingId);
      case "mode": return setMode(request.bindingId, request.mode);
      case "reopen": return reopen(request);
      case "share": {
        const m = mirrors.get(request.bindingId);
        if (!m) return { error: "not bound" };
        return m.share(Number(request.tabId));
      }
      case "history": {
        const m = mirrors.get(request.bindingId);
        if (!m) return { error: "not bound" };
        return m.recentlyClosed(Math.min(Math.max(Number(request.limit) || 10, 1), 50));
      }
      case "reopenTab": {
        const m = mirrors.get(request.bindingId);
        if (!m) return { error: "not bound" };
        return m.reopenTab(String(request.tabId ?? ""), String(request.title ?? ""));
      }
      case "resolve": {
        const m = mirrors.get(request.bindingId);
        if (!m) return { error: "not bound" };
        await m.resolve(request.choice === "server" ? "server" : "publish");
        return { ok: true };
      }
      default: return { error: "unknown request" };
    }
  })().then(reply, (error) => reply({ error: String(error?.message ?? error) }));
  return true;
});

boot();
