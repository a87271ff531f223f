// What the popup asks of a bound window's mirror, and what it shows of it (storage.session
// "status:<bindingId>"): Mirror's methods for the popup (binding-mirror.js mixes them in).

import { api as chrome } from "./browser-api.js";
import { MAX_TITLE, cleanText } from "./mirror.js";
import { attachSerially, mirrors } from "./registry.js";
import { saveBinding } from "./storage.js";
import { SHARED } from "./shared-group.js";

export const REASONS = {
  NOT_PERMITTED: "your token may only view this workspace",
  NOT_EDITABLE: "the workspace is read-only",
  LIMIT_EXCEEDED: "the workspace is full",
  INVALID_ARGUMENT: "the server refused it as invalid",
  LOCKED: "the tab is locked in the workspace",
  pinned: "pinned tabs stay in this window only",
};

export class PopupMethods {
  describe({ code, message, op }, retrying) {
    const [[kind, body]] = Object.entries(op ?? { none: {} });
    const tabId = body?.tabId ?? body?.tab?.id ?? "";
    const title = this.titleOf(tabId) || body?.tab?.title || this.reopenTitles.get(tabId) || "";
    return { code, message, kind, tabId, title, retrying, at: Date.now() };
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
      this.phase = "attaching";
      this.release();
      await attachSerially(() => this.openHere(this.client.state));
      await saveBinding(this.b);
      this.phase = "ready";
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
      mode: this.b.mode, name: this.b.name, group: this.b.group ? this.table.groups.fields.get(SHARED) ?? {} : null,
      status: this.b.deleted ? "deleted" : this.b.stopped ? "stopped" : this.b.closed ? "closed" : this.table.paused ? "paused"
        : this.ready ? c.status : (c.status === "connected" ? "attaching" : c.status),
      stopped: this.b.stopped, deleted: Boolean(this.b.deleted), version: c.confirmed.version, pending: c.pending.length,
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
