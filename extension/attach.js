// Attaching a bound window: adopting it, opening the workspace in a new one, or matching a
// restored window again. One window matcher (findWindow) for a browser restart, a worker
// restart, Try again and Reopen: a window is matched against what this browser last had in it.

import { api as chrome } from "./browser-api.js";
import { attachRecords, matchTabs, pageFields, tabFields, windowMatches, workspaceTabId } from "./mirror.js";
import { mirrorable } from "./plan.js";
import { isPlaceholder, urlFor } from "./executor.js";
import { attachSerially, claimedWindows } from "./registry.js";
import { SHARED, restoredScope } from "./shared-group.js";
import { saveBinding } from "./storage.js";

export const RESTORE_WAIT_MS = 8_000; // after a browser restart, how long a binding waits for its window
const BASE = chrome.runtime.getURL("");

/**
 * The window that matches `records` (the workspace tabs the window showed: { id, url, title })
 * best, with `prior` (real tab id -> workspace id saved before): { w, match, tabs } or null. A
 * window another binding claimed, or of the other kind (private or not), is never taken. Waits
 * up to `waitMs` for the browser to restore one. A group-bound binding's records are matched against
 * one group's tabs (shared-group.js `restoredScope`), never the window's private tabs.
 */
export async function findWindow(mirror, records, prior, waitMs) {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const taken = claimedWindows(mirror);
    const windows = await chrome.windows.getAll({ populate: true, windowTypes: ["normal"] });
    let best = null;
    for (const w of windows) {
      if (taken.has(w.id) || w.incognito !== mirror.b.incognito) continue;
      const all = w.tabs.slice().sort((a, b) => a.index - b.index);
      const matched = (tabs) => { const m = matchTabs(records, tabs, prior, BASE); return m.byId * 2 + m.byUrl + m.other; };
      const tabs = mirror.b.group ? restoredScope(all, mirror.b.groupId, matched, await lastBound(mirror, w.id)) : all;
      const match = matchTabs(records, tabs, prior, BASE);
      if (!windowMatches(records, match, tabs.filter((t) => !t.pinned).length)) continue;
      const score = match.byId * 2 + match.byUrl + match.other;
      if (!best || score > best.score) best = { w, match, score, tabs };
    }
    if (best || Date.now() >= deadline) return best;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** For a group-bound binding: whether browser group `g` of window `windowId` shows the title and colour last synced. */
async function lastBound(mirror, windowId) {
  const fields = mirror.table?.groups?.fields?.get(SHARED);
  if (!fields) return () => false;
  const groups = chrome.tabGroups?.query ? await chrome.tabGroups.query({ windowId }).catch(() => []) : [];
  const info = new Map(groups.map((g) => [g.id, g]));
  return (g) => (info.get(g)?.title ?? "") === fields.title && info.get(g)?.color === fields.color;
}

/** The attach methods of Mirror (binding-mirror.js). */
export class AttachMethods {
  /** The first Welcome of a new binding, after a browser restart, an update or Reopen. */
  async attach() {
    await attachSerially(async () => {
      const state = this.client.state;
      if (this.b.attach === "reattach") {
        await this.reattach(state);
        if (this.b.group && !this.b.closed) await this.findBoundGroup(); // its id is new after a restart
      } else if (this.readOnly) {
        // A view-only binding never adopts: the workspace opens in a window (a group) of its own.
        await this.openHere(state);
      } else if (state.tabs.length === 0) {
        await (this.b.group ? this.adoptGroup() : this.adopt());
      } else {
        await this.openHere(state);
      }
    });
    if (this.b.closed) return; // no window to attach (a closed binding stays closed)
    this.b.attach = "";
    await saveBinding(this.b);
    this.phase = "ready";
    this.schedule();
  }

  /** An empty workspace takes the window's tabs, in one `replace` (one op, whatever their number). */
  async adopt() {
    const table = this.table;
    const tabs = (await chrome.tabs.query({ windowId: this.b.windowId })).filter((t) => mirrorable(table, t));
    if (tabs.length === 0) return;
    const list = tabs.map((t) => {
      const id = workspaceTabId(this.tag, this.nonce, t.id);
      const f = pageFields(t, isPlaceholder(t));
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

  /** The workspace opens in a window of its own, or as a group of its own in a group-bound binding's window. */
  openHere(state) {
    return this.b.group ? this.openGroup(state) : this.openWindow(state);
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
    const records = attachRecords(this.restored, state.tabs);
    const best = await findWindow(this, records, this.restored?.map ?? new Map(), this.restored ? RESTORE_WAIT_MS : 0);
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
    this.restored = null;
    if (this.b.closed && !this.reopening) {
      this.client.close();
      return;
    }
    if (state.tabs.length === 0) { this.fail("the bound window is gone and the workspace is empty: bind a window again"); return; }
    this.release();
    await this.openHere(state);
  }

  /** After a browser restart: waits a little for a restored window that matches the closed binding. */
  async findRestored() {
    return Boolean(await findWindow(this, attachRecords(this.restored, []), this.restored?.map ?? new Map(), RESTORE_WAIT_MS));
  }
}
