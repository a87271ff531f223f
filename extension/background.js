// The extension's service worker: binds browser windows to tabsync workspaces and mirrors each
// bound window's tab strip both ways with one serialized, level-triggered reconcile per window.
//
// Storage (what survives what):
// - chrome.storage.local  "bindings": { [bindingId]: Binding } — survives browser restarts.
// - chrome.storage.session "resume:<bindingId>": the client's confirmed state, pending ops and next
//   seq, the tab-id map, the order and active tab last synced, the titles last seen — survives a
//   stopped worker, not a browser restart (Chrome's tab ids do not survive one either).
// - chrome.storage.session "status:<bindingId>": what the popup shows (written here, read there).
//
// Chrome events only mark a window dirty; the reconcile reads the real tabs, the map and the
// workspace state afresh each time and does only the differences, so running it twice is harmless
// and a restarted worker or a reconnect converges.

import { TabsyncClient } from "./tabsync-client.js";
import { generateKeyBetween } from "./fractional-indexing.js";
import { MAX_TITLE, cleanText, movedTabs, movesToOrder, tabFields, workspaceTabId } from "./mirror.js";

const KEEPALIVE_MS = 20_000; // a data message this often keeps the worker (and the connection) alive
const TITLE_DEBOUNCE_MS = 400; // a page's title changes are sent once they rest this long
const LAZY_THRESHOLD = 8; // past this many tabs to open at once, the rest open as placeholders
const RETRY_ALARM = "tabsync-retry";
const WORKSPACE_ID = /^[A-Za-z0-9._-]{1,64}$/;

/** @typedef {{ id: string, server: string, workspace: string, token: string, name: string,
 *   mode: "follow" | "browse", clientId: string, windowId: number, incognito: boolean, stopped: string, attach: "adopt-or-open" | "reattach" | "" }} Binding */

const mirrors = new Map(); // bindingId -> Mirror
let booted = null;

function randomTag(n = 8) {
  const bytes = new Uint8Array(n);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => "abcdefghijklmnopqrstuvwxyz0123456789"[b % 36]).join("");
}

async function loadBindings() {
  return (await chrome.storage.local.get("bindings")).bindings ?? {};
}

async function saveBinding(binding) {
  const bindings = await loadBindings();
  bindings[binding.id] = binding;
  await chrome.storage.local.set({ bindings });
}

async function deleteBinding(id) {
  const bindings = await loadBindings();
  delete bindings[id];
  await chrome.storage.local.set({ bindings });
  await chrome.storage.session.remove([`resume:${id}`, `status:${id}`]);
}

/** This browser session's nonce (part of workspace tab ids made from Chrome tab ids). */
async function sessionNonce() {
  const { nonce } = await chrome.storage.session.get("nonce");
  if (nonce) return nonce;
  const fresh = randomTag(4);
  await chrome.storage.session.set({ nonce: fresh });
  return fresh;
}

function isWebUrl(url) {
  return /^https?:\/\//i.test(url ?? "");
}

/** The URL a real tab for workspace tab `w` opens: the page, or a placeholder (lazy or url-less). */
function urlFor(w, lazy) {
  if (isWebUrl(w.url) && !lazy) return w.url;
  const q = new URLSearchParams({ title: w.title ?? "" });
  if (isWebUrl(w.url)) q.set("url", w.url);
  return chrome.runtime.getURL(`placeholder.html?${q}`);
}

/** One bound window: its client, its id map and its reconcile loop. */
class Mirror {
  /** @param {Binding} binding */
  constructor(binding, resume, nonce) {
    this.b = binding;
    this.nonce = nonce;
    this.tag = binding.clientId.slice(-6);
    this.map = new Map(); // Chrome tab id -> workspace tab id
    this.seen = new Map(); // Chrome tab id -> { title, badge, url } last read from the page
    this.changedAt = new Map(); // Chrome tab id -> when its title or url last changed (ms)
    this.ignored = new Set(); // Chrome tab ids kept out of the mirror (a filler for an empty workspace)
    this.lastOrder = null; // workspace ids in the order last synced (null: none yet)
    this.lastActive = null; // the active workspace tab last synced
    this.ready = false; // the window and the workspace are attached; the reconcile may act
    this.reconciledState = null; // the client state the last pass started from
    this.dirty = false;
    this.running = false;
    this.delayTimer = null;
    this.lastRejection = null;
    this.tokens = Infinity; // a full bucket (capped at the rate on first use)
    this.tokensAt = Date.now();
    this.attaching = false;
    this.client = new TabsyncClient({
      url: binding.server, workspace: binding.workspace, clientId: binding.clientId,
      name: binding.name, token: binding.token, backoff: { first: 300, max: 5000 },
    });
    if (resume) this.restore(resume);
    // A change of state needs a pass; a change of presence only (peers, their focus) needs the
    // popup and the badge: a pass per presence message would queue the next op's pass behind it.
    this.client.addEventListener("change", () => {
      if (this.client.state !== this.reconciledState) this.schedule();
      else this.presenceChanged();
    });
    this.client.addEventListener("status", (e) => this.onStatus(e.detail));
    this.client.addEventListener("rejected", (e) => this.onRejected(e.detail));
    this.client.addEventListener("error", (e) => this.onError(e.detail));
  }

  restore(r) {
    const c = this.client;
    c.confirmed = r.confirmed;
    c.pending = r.pending ?? [];
    c.nextSeq = r.nextSeq ?? 1;
    this.map = new Map((r.map ?? []).map(([k, v]) => [Number(k), v]));
    this.seen = new Map((r.seen ?? []).map(([k, v]) => [Number(k), v]));
    this.ignored = new Set(r.ignored ?? []);
    this.lastOrder = r.lastOrder ?? null;
    this.lastActive = r.lastActive ?? null;
    this.ready = true;
    c.rebuild();
  }

  async persist() {
    const c = this.client;
    await chrome.storage.session.set({
      [`resume:${this.b.id}`]: {
        confirmed: c.confirmed, pending: c.pending, nextSeq: c.nextSeq,
        map: [...this.map], seen: [...this.seen], ignored: [...this.ignored],
        lastOrder: this.lastOrder, lastActive: this.lastActive,
      },
    });
  }

  start() {
    if (this.b.stopped) { this.publish(); return; }
    this.client.connect();
  }

  stop() {
    clearTimeout(this.delayTimer);
    this.client.close();
  }

  // ------------------------------------------------------------------ client events

  onStatus(status) {
    if (status === "connected" && !this.ready && !this.attaching) {
      this.attaching = true;
      this.attach()
        .catch((error) => this.fail(`could not attach the window: ${error?.message ?? error}`))
        .finally(() => { this.attaching = false; });
    }
    updateRetryAlarm();
    this.publish();
  }

  onRejected({ code, message, op }) {
    const [[kind, body]] = Object.entries(op ?? { none: {} });
    const tabId = body?.tabId ?? body?.tab?.id ?? "";
    this.lastRejection = { code, message, kind, tabId, title: this.titleOf(tabId), at: Date.now() };
    // A refused add that may pass later: forget the mapping, so the next pass submits it again.
    if (kind === "add" && (code === "RATE_LIMITED" || code === "UNAVAILABLE")) {
      for (const [tid, wid] of this.map) if (wid === tabId) this.map.delete(tid);
    }
    this.schedule(code === "RATE_LIMITED" ? 1000 : 0);
    this.publish();
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
    return this.client.state.tabs.find((t) => t.id === wsId)?.title ?? "";
  }

  // ------------------------------------------------------------------ attaching

  /** The first Welcome of a new binding or after a browser restart: adopt, open or reattach. */
  async attach() {
    const state = this.client.state;
    if (this.b.attach === "reattach") {
      await this.reattach(state);
    } else if (state.tabs.length === 0) {
      await this.adopt();
    } else {
      await this.openWindow(state);
    }
    this.b.attach = "";
    await saveBinding(this.b);
    this.ready = true;
    this.schedule();
  }

  /** An empty workspace takes the window's tabs, in one `replace` (one op, whatever their number). */
  async adopt() {
    const tabs = (await chrome.tabs.query({ windowId: this.b.windowId })).filter((t) => this.mirrorable(t));
    if (tabs.length === 0) return;
    const list = tabs.map((t) => {
      const id = workspaceTabId(this.tag, this.nonce, t.id);
      const f = tabFields(t);
      this.map.set(t.id, id);
      this.seen.set(t.id, f);
      const tab = { id, title: f.title };
      if (f.url) tab.url = f.url;
      if (f.badge) tab.badge = f.badge;
      return tab;
    });
    this.client.submit({ replace: { tabs: list } });
    this.lastOrder = list.map((t) => t.id);
    const active = tabs.find((t) => t.active);
    this.lastActive = active ? this.map.get(active.id) : list[0].id;
    if (this.lastActive !== list[0].id) this.client.activate(this.lastActive);
  }

  /** A workspace with tabs opens in a window of its own (never merged into one with tabs). */
  async openWindow(state) {
    const first = state.tabs[0];
    const win = await chrome.windows.create({ url: urlFor(first, false), focused: true, incognito: this.b.incognito });
    this.b.windowId = win.id;
    this.map.set(win.tabs[0].id, first.id);
    this.seen.set(win.tabs[0].id, { title: first.title, badge: first.badge, url: first.url || null });
    this.lastOrder = [first.id];
    this.lastActive = null; // the reconcile activates the workspace's active tab
  }

  /** After a browser restart: the window Chrome restored with most of the workspace's URLs, else a new one. */
  async reattach(state) {
    const taken = new Set([...mirrors.values()].filter((m) => m !== this && m.ready).map((m) => m.b.windowId));
    const windows = await chrome.windows.getAll({ populate: true, windowTypes: ["normal"] });
    const urls = state.tabs.filter((t) => t.url).map((t) => t.url);
    let best = null;
    let bestScore = 0;
    for (const w of windows) {
      if (taken.has(w.id) || w.incognito !== this.b.incognito) continue;
      const score = w.tabs.filter((t) => urls.includes(t.url || t.pendingUrl)).length;
      if (score > bestScore) { best = w; bestScore = score; }
    }
    if (!best || bestScore < Math.max(1, Math.ceil(urls.length / 2))) {
      if (state.tabs.length === 0) return this.fail("the bound window is gone and the workspace is empty: bind a window again");
      return this.openWindow(state);
    }
    this.b.windowId = best.id;
    const free = state.tabs.slice();
    for (const t of best.tabs) {
      const i = free.findIndex((w) => w.url && w.url === (t.url || t.pendingUrl));
      if (i < 0 || !this.mirrorable(t)) continue;
      this.map.set(t.id, free[i].id);
      this.seen.set(t.id, tabFields(t));
      free.splice(i, 1);
    }
    this.lastOrder = state.tabs.map((t) => t.id);
    this.lastActive = null;
  }

  // ------------------------------------------------------------------ the reconcile loop

  /** Marks the window dirty; the reconcile runs once now (or after `delay` ms), never twice at once. */
  schedule(delay = 0) {
    if (delay > 0) {
      clearTimeout(this.delayTimer);
      this.delayTimer = setTimeout(() => this.schedule(0), delay);
      return;
    }
    this.dirty = true;
    if (this.running) return;
    this.running = true;
    (async () => {
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

  mirrorable(tab) {
    if (this.ignored.has(tab.id)) return false;
    return !tab.pinned; // pinned tabs stay local
  }

  /** Takes one op from the pacing bucket (80% of the server's per-connection rate). */
  take() {
    const rate = Math.max(1, Math.floor(0.8 * Number(this.client.limits?.maxOpsPerSecond ?? 50)));
    const now = Date.now();
    this.tokens = Math.min(rate, this.tokens + ((now - this.tokensAt) / 1000) * rate);
    this.tokensAt = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  /** A key for a workspace tab placed right after `leftId` (null: first) in the current state. */
  keyAfter(leftId) {
    const tabs = this.client.state.tabs;
    const i = leftId ? tabs.findIndex((t) => t.id === leftId) : -1;
    return generateKeyBetween(i >= 0 ? tabs[i].key : null, tabs[i + 1]?.key ?? null);
  }

  async windowTabs() {
    try {
      return (await chrome.tabs.query({ windowId: this.b.windowId })).sort((a, b) => a.index - b.index);
    } catch {
      return null;
    }
  }

  async reconcile() {
    if (!this.ready || this.b.stopped) return;
    const c = this.client;
    this.reconciledState = c.state; // a later state (an Applied, our own submit) schedules another pass
    let real = await this.windowTabs();
    const win = await chrome.windows.get(this.b.windowId).catch(() => null);
    if (!real || !win) { this.detached(); return; }
    let deferred = false;
    const wsIds = () => new Set(c.state.tabs.map((t) => t.id));

    // 1. Local closes: a mapped tab that is gone from the window.
    const realIds = new Set(real.map((t) => t.id));
    for (const [tid, wid] of [...this.map]) {
      if (realIds.has(tid)) continue;
      if (wsIds().has(wid)) {
        if (!this.take()) { deferred = true; break; }
        c.remove(wid);
      }
      this.map.delete(tid);
      this.seen.delete(tid);
      this.changedAt.delete(tid);
    }

    // 2. Local moves: tabs out of the order last synced get a key right after their real left neighbour.
    const mirrored = () => real.filter((t) => this.mirrorable(t) && this.map.has(t.id) && wsIds().has(this.map.get(t.id)));
    if (!deferred && this.lastOrder) {
      const now = mirrored().map((t) => this.map.get(t.id));
      const moved = movedTabs(this.lastOrder, now);
      const settled = new Set(now.filter((id) => !moved.includes(id)));
      for (const id of moved) {
        if (!this.take()) { deferred = true; break; }
        const i = now.indexOf(id);
        let left = null;
        for (let j = i - 1; j >= 0; j--) if (settled.has(now[j])) { left = now[j]; break; }
        c.move(id, this.keyAfter(left));
        settled.add(id);
      }
    }

    // 3. Local opens: a tab of the window with no workspace tab.
    if (!deferred) {
      let left = null;
      for (const t of real) {
        if (!this.mirrorable(t)) continue;
        const mapped = this.map.get(t.id);
        if (mapped && wsIds().has(mapped)) { left = mapped; continue; }
        if (mapped) continue; // a remote close, handled below
        const id = workspaceTabId(this.tag, this.nonce, t.id);
        if (wsIds().has(id)) { this.map.set(t.id, id); left = id; continue; } // ours, from before a restart
        if (!this.take()) { deferred = true; break; }
        const f = tabFields(t);
        const tab = { id, title: f.title };
        if (f.url) tab.url = f.url;
        if (f.badge) tab.badge = f.badge;
        this.map.set(t.id, id);
        this.seen.set(t.id, f);
        c.submit({ add: { tab, place: { key: this.keyAfter(left) }, activate: false } });
        left = id;
      }
    }

    // 4. Remote opens: a workspace tab with no real tab (also a refused local close: rolled back).
    const state = c.state;
    const mappedWs = new Set(this.map.values());
    const missing = state.tabs.filter((w) => !mappedWs.has(w.id));
    if (missing.length > 0) {
      real = (await this.windowTabs()) ?? [];
      const order = real.map((t) => t.id);
      const realOf = this.realOf();
      let opened = 0;
      for (const w of missing) {
        const i = state.tabs.indexOf(w);
        let index = order.length;
        for (let j = i - 1; j >= 0; j--) {
          const rid = realOf.get(state.tabs[j].id);
          if (rid !== undefined) { index = order.indexOf(rid) + 1; break; }
        }
        if (index === order.length && i === 0) {
          const firstFree = real.findIndex((t) => !t.pinned);
          if (firstFree >= 0) index = firstFree;
        }
        const lazy = missing.length > LAZY_THRESHOLD && opened >= LAZY_THRESHOLD;
        let tab;
        try {
          tab = await chrome.tabs.create({ windowId: this.b.windowId, index, url: urlFor(w, lazy), active: false });
        } catch (error) {
          console.warn("tabsync: could not open a tab", error);
          break;
        }
        opened++;
        this.map.set(tab.id, w.id);
        realOf.set(w.id, tab.id);
        this.seen.set(tab.id, { title: w.title, badge: w.badge, url: w.url || null });
        order.splice(Math.min(tab.index, order.length), 0, tab.id);
      }
    }

    // 5. Remote closes: a mapped tab whose workspace tab is gone. The workspace's active tab is
    // shown first, so Chrome's choice of a neighbour does not read as a local activation.
    const gone = real.filter((t) => this.map.has(t.id) && !wsIds().has(this.map.get(t.id)));
    if (gone.length > 0) {
      const realOf = this.realOf();
      if (this.b.mode === "follow" && gone.some((t) => t.active) && realOf.has(state.activeTabId)) {
        this.lastActive = state.activeTabId;
        await chrome.tabs.update(realOf.get(state.activeTabId), { active: true }).catch(() => {});
      }
      const remaining = real.length - gone.length;
      if (remaining === 0 && state.tabs.length === 0) {
        const filler = await chrome.tabs.create({ windowId: this.b.windowId, url: urlFor({ title: "(empty workspace)" }, false), active: true });
        this.ignored.add(filler.id);
      }
      for (const t of gone) { this.map.delete(t.id); this.seen.delete(t.id); }
      await chrome.tabs.remove(gone.map((t) => t.id)).catch(() => {});
    }

    // 6. Remote moves: the real order follows the workspace's (the order is recorded before moving).
    real = (await this.windowTabs()) ?? [];
    const desired = c.state.tabs.map((t) => t.id);
    if (!deferred) {
      const realOf = this.realOf();
      const fixed = new Set(real.filter((t) => !this.mirrorable(t) || !this.map.has(t.id)).filter((t) => t.pinned).map((t) => t.id));
      const moves = movesToOrder(real.map((t) => t.id), desired.map((id) => realOf.get(id)).filter((x) => x !== undefined), fixed);
      this.lastOrder = desired;
      for (const m of moves) await chrome.tabs.move(m.id, { index: m.index }).catch(() => {});
      if (moves.length > 0) real = (await this.windowTabs()) ?? [];
    }

    // 7. The active tab: follow shares it both ways; browse keeps it local. Presence either way.
    const activeReal = real.find((t) => t.active);
    const activeWs = activeReal ? this.map.get(activeReal.id) : undefined;
    if (this.b.mode === "follow" && !deferred) {
      const wsActive = c.state.activeTabId;
      if (this.lastActive === null && wsActive) {
        // Joining (or switching to follow): the workspace's active tab is shown, not overridden.
        const rid = this.realOf().get(wsActive);
        if (rid !== undefined) {
          this.lastActive = wsActive;
          await chrome.tabs.update(rid, { active: true }).catch(() => {});
        }
      } else if (activeWs && activeWs !== this.lastActive) {
        this.lastActive = activeWs;
        if (wsActive !== activeWs && this.take()) c.activate(activeWs);
      } else if (wsActive && wsActive !== this.lastActive) {
        const rid = this.realOf().get(wsActive);
        if (rid !== undefined) {
          this.lastActive = wsActive; // recorded before the call: its onActivated is our own
          await chrome.tabs.update(rid, { active: true }).catch(() => {});
        }
      }
    }
    c.focus(activeWs ?? "");

    // 8. Titles, badges and URLs, from the page to the workspace only, once they rest.
    const now = Date.now();
    for (const t of real) {
      const wid = this.map.get(t.id);
      const w = wid && c.state.tabs.find((x) => x.id === wid);
      if (!w || t.status !== "complete") continue;
      const f = tabFields(t);
      const prev = this.seen.get(t.id);
      if (prev && prev.title === f.title && prev.badge === f.badge && (f.url === null || prev.url === f.url)) continue;
      const quietFor = now - (this.changedAt.get(t.id) ?? 0);
      if (quietFor < TITLE_DEBOUNCE_MS) { this.schedule(TITLE_DEBOUNCE_MS - quietFor + 10); continue; }
      const update = {};
      if (f.title !== w.title) update.title = f.title;
      if (f.badge !== w.badge) update.badge = f.badge;
      if (f.url !== null && f.url !== w.url) update.url = f.url;
      if (Object.keys(update).length > 0) {
        if (!this.take()) { deferred = true; continue; }
        c.update(wid, update);
      }
      this.seen.set(t.id, f);
    }

    if (deferred) this.schedule(1000);
    await this.persist();
    this.publish();
    updateBadge(this, real);
  }

  presenceChanged() {
    this.publish();
    chrome.tabs.query({ windowId: this.b.windowId, active: true })
      .then((tabs) => updateBadge(this, tabs), () => {});
  }

  realOf() {
    const m = new Map();
    for (const [tid, wid] of this.map) m.set(wid, tid);
    return m;
  }

  /** The bound window is gone (closed by the user, or the browser is shutting down). */
  detached() {
    this.ready = false;
    this.b.attach = "reattach";
    saveBinding(this.b);
    this.publish();
  }

  // ------------------------------------------------------------------ what the popup shows

  publish() {
    clearTimeout(this.publishTimer);
    this.publishTimer = setTimeout(() => this.publishNow(), 50);
  }

  publishNow() {
    const c = this.client;
    const titles = new Map(c.state.tabs.map((t) => [t.id, t.title]));
    const status = {
      bindingId: this.b.id, windowId: this.b.windowId, workspace: this.b.workspace, server: this.b.server,
      mode: this.b.mode, name: this.b.name,
      status: this.b.stopped ? "stopped" : this.ready ? c.status : (c.status === "connected" ? "attaching" : c.status),
      stopped: this.b.stopped, version: c.confirmed.version, pending: c.pending.length,
      tabs: c.state.tabs.map((t) => ({ id: t.id, title: t.title, badge: t.badge, locked: t.locked })),
      activeTabId: c.state.activeTabId, editable: c.state.editable,
      sessionId: c.sessionId,
      peers: c.peers.filter((p) => p.sessionId !== c.sessionId).map((p) => ({
        name: p.name || p.clientId || "?", tabId: p.focusTabId ?? "", title: titles.get(p.focusTabId) ?? "",
      })),
      rejection: this.lastRejection,
      map: [...this.map],
    };
    chrome.storage.session.set({ [`status:${this.b.id}`]: status });
  }
}

/**
 * The action badge: how many others are here; the tooltip says who views what. Set on the bound
 * window's active tab, the one whose button shows (each pass runs after an activation too), so a
 * presence change costs two calls, not two per tab.
 */
function updateBadge(mirror, real) {
  const c = mirror.client;
  const others = c.peers.filter((p) => p.sessionId !== c.sessionId);
  const titles = new Map(c.state.tabs.map((t) => [t.id, t.title]));
  const text = others.length > 0 ? String(Math.min(others.length, 99)) : "";
  const tooltip = [`tabsync: ${mirror.b.workspace}`, ...others.map((p) =>
    `${cleanText(p.name || p.clientId, 64)} views ${cleanText(titles.get(p.focusTabId) ?? "nothing", MAX_TITLE)}`)].join("\n");
  const active = real.find((t) => t.active);
  if (!active) return;
  const signature = `${text}|${tooltip}|${active.id}`;
  if (signature === mirror.badgeSignature) return;
  mirror.badgeSignature = signature;
  chrome.action.setBadgeText({ tabId: active.id, text }).catch(() => {});
  chrome.action.setTitle({ tabId: active.id, title: tooltip }).catch(() => {});
}

/**
 * An alarm every minute while any binding is live: it wakes a worker the browser stopped (the
 * keepalive failed, or the browser chose to), which resumes, reconnects and catches up; while the
 * worker lives, the client retries a lost connection itself (backoff up to 5 s). A period longer
 * than the 30 s idle limit lets an idle worker stop between alarms instead of being held up by
 * them. A binding stopped for a reason (a refused token) has none: no retries until bound again.
 */
async function updateRetryAlarm() {
  const live = [...mirrors.values()].some((m) => !m.b.stopped);
  const existing = await chrome.alarms.get(RETRY_ALARM);
  if (live && !existing) chrome.alarms.create(RETRY_ALARM, { periodInMinutes: 1 });
  if (!live && existing) chrome.alarms.clear(RETRY_ALARM);
}

// ------------------------------------------------------------------ boot

/** Loads every binding and resumes it (once per worker life). */
function boot() {
  booted ??= (async () => {
    const nonce = await sessionNonce();
    const { boots = 0 } = await chrome.storage.session.get("boots");
    await chrome.storage.session.set({ boots: boots + 1 });
    const bindings = await loadBindings();
    const session = await chrome.storage.session.get(null);
    for (const b of Object.values(bindings)) {
      const resume = session[`resume:${b.id}`];
      if (!resume && !b.attach) b.attach = "reattach"; // a browser restart: window ids are stale
      const m = new Mirror(b, resume && !b.attach ? resume : null, nonce);
      mirrors.set(b.id, m);
      m.start();
    }
    updateRetryAlarm();
  })();
  return booted;
}

function mirrorOfWindow(windowId) {
  for (const m of mirrors.values()) if (m.b.windowId === windowId) return m;
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
chrome.tabs.onMoved.addListener((_, info) => onWindowEvent(info.windowId));
chrome.tabs.onActivated.addListener((info) => onWindowEvent(info.windowId));
chrome.tabs.onAttached.addListener((_, info) => onWindowEvent(info.newWindowId));
chrome.tabs.onDetached.addListener((_, info) => onWindowEvent(info.oldWindowId));
chrome.tabs.onUpdated.addListener(async (tabId, change, tab) => {
  if (!("title" in change || "url" in change || "status" in change || "pinned" in change)) return;
  await boot();
  const m = mirrorOfWindow(tab.windowId);
  if (!m) return;
  if ("title" in change || "url" in change) m.changedAt.set(tabId, Date.now());
  m.schedule("title" in change ? TITLE_DEBOUNCE_MS : 0);
});
chrome.windows.onRemoved.addListener(async (windowId) => {
  await boot();
  mirrorOfWindow(windowId)?.detached();
});
chrome.alarms.onAlarm.addListener(async (alarm) => {
  await boot();
  if (alarm.name !== RETRY_ALARM) return;
  for (const m of mirrors.values()) if (!m.b.stopped && m.client.status === "closed") m.start();
  updateRetryAlarm();
});
chrome.runtime.onStartup.addListener(() => boot());
chrome.runtime.onInstalled.addListener(() => boot());

// The keepalive: a repeated Focus is a data message the server ignores; it keeps the worker alive.
// The switch (storage.session "keepalive", off only in a test that lets the worker stop) is read
// once and then followed by its change events: a storage call per tick would itself keep the
// worker alive, as any extension API call does.
let keepalive = true;
chrome.storage.session.get("keepalive").then((v) => { keepalive = v.keepalive ?? true; });
chrome.storage.onChanged.addListener((changes, area) => {
  if (area === "session" && "keepalive" in changes) keepalive = changes.keepalive.newValue ?? true;
});
setInterval(() => {
  if (!keepalive) return;
  for (const m of mirrors.values()) {
    if (m.client.status === "connected") m.client.send({ focus: { tabId: m.client.focusTabId } });
  }
}, KEEPALIVE_MS);

// ------------------------------------------------------------------ the popup's requests

async function bind(request) {
  const server = String(request.server ?? "").trim();
  const workspace = String(request.workspace ?? "").trim();
  if (!/^wss?:\/\/[^\s/?#]+(\/[^\s]*)?$/i.test(server)) return { error: "the server is a ws:// or wss:// address" };
  if (!WORKSPACE_ID.test(workspace)) return { error: "a workspace id is 1–64 of A–Z a–z 0–9 . _ -" };
  const win = await chrome.windows.get(request.windowId).catch(() => null);
  if (!win) return { error: "that window is gone" };
  if (mirrorOfWindow(win.id)) return { error: "this window is already bound: unbind it first" };
  if (win.incognito) {
    if (!(await chrome.extension.isAllowedIncognitoAccess())) return { error: "this extension is not allowed in private windows" };
    if (!request.incognito) return { error: "a private window is bound only when you choose it (tick the box)" };
  }
  /** @type {Binding} */
  const binding = {
    id: `b-${randomTag(8)}`, server, workspace, token: String(request.token ?? ""),
    name: cleanText(request.name ?? "", 64), mode: request.mode === "browse" ? "browse" : "follow",
    clientId: `ext-${randomTag(12)}`, windowId: win.id, incognito: win.incognito, stopped: "", attach: "adopt-or-open",
  };
  await saveBinding(binding);
  const m = new Mirror(binding, null, await sessionNonce());
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
  m.lastActive = null;
  await saveBinding(m.b);
  m.schedule();
  return { ok: true };
}

chrome.runtime.onMessage.addListener((request, _sender, reply) => {
  (async () => {
    await boot();
    switch (request?.type) {
      case "bind": return bind(request);
      case "unbind": return unbind(request.bindingId);
      case "mode": return setMode(request.bindingId, request.mode);
      case "reopen": {
        const m = mirrors.get(request.bindingId);
        if (!m) return { error: "not bound" };
        m.b.stopped = "";
        m.b.attach = "reattach";
        await saveBinding(m.b);
        m.stop();
        const fresh = new Mirror(m.b, null, await sessionNonce());
        mirrors.set(m.b.id, fresh);
        fresh.start();
        return { ok: true };
      }
      default: return { error: "unknown request" };
    }
  })().then(reply, (error) => reply({ error: String(error?.message ?? error) }));
  return true;
});

boot();
