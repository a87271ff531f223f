// One bound window's mirror: its client, its tab table (tab-table.js) and its reconcile loop,
// which reads the window, plans (plan.js) and executes (executor.js). Attaching is in attach.js,
// what the popup asks and sees in popup-api.js.

import { api as chrome } from "./browser-api.js";
import { generateKeyBetween } from "./fractional-indexing.js";
import { movedTabs, tokenRole, workspaceTabId } from "./mirror.js";
import { TabTable } from "./tab-table.js";
import { URL_WAIT_MS, mirrorable, planArrange, planChanges } from "./plan.js";
import { localGroupOps, remoteGroupActions } from "./group-plan.js";
import { execute, executeGroups, isPlaceholder, urlNotKnownYet, windowGroups, windowTabs } from "./executor.js";
import { ExtensionClient, exportClient, importClient } from "./client-state.js";
import { afterWelcome, finalClose, isNewHistory, matchNewHistoryByPage } from "./welcome.js";
import { updateBadge } from "./badge.js";
import { switches, attachSerially, updateRetryAlarm } from "./registry.js";
import { resumeArea, saveBinding } from "./storage.js";
import { AttachMethods } from "./attach.js";
import { PopupMethods } from "./popup-api.js";
import { GroupBoundMethods } from "./group-bound.js";
import { shiftActions } from "./shared-group.js";

/**
 * A mirror's lifecycle (`phase`), one value as the server's Connection has:
 * - "new": made at boot, its window to be matched once connected;
 * - "claimed": its window is this binding's (bound now, or an attach that failed), not attached;
 * - "attaching": attach() runs (adopt, open, match): at most one at a time;
 * - "ready": attached; passes run;
 * - "detached": its window closed; only Reopen (a fresh mirror) or a restart brings it back;
 * - "retired": Try again or Reopen handed its window to a fresh mirror; nothing runs again.
 * A window is claimed by a mirror in "claimed", "attaching" or "ready" (registry.js claimedWindows).
 */

/** One bound window: its client, its tab table and its reconcile loop. */
export class Mirror {
  /** @param {Binding} binding */
  constructor(binding, nonce) {
    this.b = binding;
    this.nonce = nonce;
    this.tag = binding.clientId.slice(-6);
    this.table = new TabTable(); // the real tabs, their workspace ids and marks (tab-table.js)
    this.reopenTitles = new Map(); // workspace id -> title, of closed tabs the popup asked to reopen
    this.phase = "new"; // the lifecycle (Phase below): one value, no overlapping flags
    this.restored = null; // after a browser restart or an update: { map, tabs } to match the window against
    this.reconciledState = null; // the client state the last pass started from
    this.dirty = false;
    this.running = false;
    this.delayTimer = null;
    this.lastRejection = null;
    this.tokens = Infinity; // a full bucket (capped at the rate on first use)
    this.tokensAt = Date.now();
    this.reopening = false; // made by Try again or Reopen: a closed binding's window may be opened
    this.passing = Promise.resolve(); // the pass loop under way, if any
    this.seenVersion = 0; // the highest confirmed version seen (a Welcome below it, same epoch: a backup)
    this.client = new ExtensionClient({
      url: binding.server, workspace: binding.workspace, clientId: binding.clientId,
      name: binding.name, token: binding.token, backoff: { first: 300, max: 5000 }, pacing: !switches.pacingOff,
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
    this.client.addEventListener("applied", (e) => {
      this.seenVersion = Math.max(this.seenVersion, this.client.confirmed.version);
      this.onRemoved(e.detail.removed);
    });
    this.client.addEventListener("welcome", (e) => this.onWelcome(e.detail));
    this.client.addEventListener("error", (e) => this.onError(e.detail));
  }

  /** Loads the saved record. `trusted`: the Chrome tab ids in it are this browser session's. */
  restore(r, trusted) {
    const c = this.client;
    importClient(c, r);
    this.seenVersion = Number(r.confirmed?.version ?? 0);
    const { table, prior } = TabTable.restore(r, trusted);
    this.table = table;
    if (trusted) {
      this.phase = "ready";
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
    if (this.phase === "retired") return;
    if (this.b.stopped || this.b.closed) { this.publish(); return; }
    if (switches.offline) { this.publish(); return; }
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
    this.phase = "retired";
    this.stop();
    await this.passing;
  }

  /** Attached: the reconcile may act. */
  get ready() {
    return this.phase === "ready";
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
    const final = status === "closed" && !this.b.stopped && finalClose(this.client.lastClose?.code, this.b.workspace);
    if (final) { this.b.deleted = true; this.fail(final); return; } // only unbind or bind anew (welcome.js bindingOffers)
    if (status === "connected" && (this.phase === "new" || this.phase === "claimed") && !this.b.closed) {
      this.phase = "attaching";
      this.attach()
        .catch((error) => this.fail(`could not attach the window: ${error?.message ?? error}`))
        .finally(() => { if (this.phase === "attaching") this.phase = "claimed"; });
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
   * A Welcome (welcome.js): a new history closes nothing; the same history's removals close as
   * the contract says. The highest version seen is kept to recognise a server restored from a backup.
   */
  onWelcome(detail) {
    const c = this.client;
    const newHistory = isNewHistory(detail, this.seenVersion, c.confirmed.version);
    if (newHistory) matchNewHistoryByPage(this.table, c.confirmed.tabs);
    const ours = new Set([...this.table.mappedIds(), ...(this.restored?.tabs ?? []).map((t) => t.id)]);
    afterWelcome(this.table, { ...detail, newHistory }, new Set(c.confirmed.tabs.map((t) => t.id)), ours);
    this.seenVersion = c.confirmed.version;
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
        attachSerially(() => this.openHere(this.client.state)).then(() => saveBinding(this.b)).then(() => this.schedule());
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

  // ------------------------------------------------------------------ the reconcile loop

  /** Marks the window dirty; the reconcile runs once now (or after `delay` ms), never twice at once. */
  schedule(delay = 0) {
    if (delay > 0) {
      clearTimeout(this.delayTimer);
      this.delayTimer = setTimeout(() => this.schedule(0), delay);
      return;
    }
    if (this.phase === "retired") return;
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
    if (switches.pacingOff) return Infinity;
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
      isPlaceholder, askGroup: this.askGroupHook(),
    };
  }

  /**
   * The group half of a pass (docs/extension.md, "Tab groups"; group-plan.js): `local` sends the
   * window's regroups and renames, else the window's groups take the workspace's (`moved`: the real
   * tabs the arrange just moved, which the browser may have ungrouped). Only when the
   * browser has tab groups and the client knows the workspace's (a client without them would read
   * every group as gone); never in a paused mirror.
   */
  async groupsPass(local, moved = new Set()) {
    const state = this.client.state;
    if (!Array.isArray(state?.groups) || this.table.paused) return;
    if (this.b.group) { await this.sharedGroupPass(local); return; } // one group bound (group-bound.js)
    const browserGroups = await windowGroups(this.b.windowId);
    const real = browserGroups && (await windowTabs(this.b.windowId));
    if (!real) return;
    const ctx = {
      real, browserGroups, state, table: this.table, groups: this.table.groups, readOnly: this.readOnly,
      groupBound: false, moved, mirrorable: (t) => mirrorable(this.table, t),
      newGroupId: (gid) => workspaceTabId(`g${this.tag}`, this.nonce, gid),
    };
    if (local) for (const op of localGroupOps(ctx)) this.client.submit(op);
    else await executeGroups(remoteGroupActions(ctx), this.b.windowId, this.table.groups);
  }

  /** Executes a plan's actions (executor.js); in a group-bound window at the group's place, into it. */
  async executeAll(actions) {
    if (!this.b.group) return execute(actions, this.b.windowId, this.table);
    return execute(shiftActions(actions, this.offset ?? 0), this.b.windowId, this.table, this.b.groupId);
  }

  /** Submits a plan's ops and takes them from the pacing bucket. */
  submitAll(plan) {
    if (!switches.pacingOff) this.tokens -= plan.used;
    for (const op of plan.ops) this.client.submit(op);
  }

  /**
   * One pass (docs/extension.md, "How it works"): read the window, plan (plan.js), submit the
   * ops and execute the actions (executor.js); then read again for the order, the active tab,
   * navigation and titles. A paused mirror does nothing until the popup's answer.
   */
  async reconcile() {
    if (this.phase !== "ready" || this.b.stopped || this.b.closed) return;
    this.reconciledState = this.client.state; // a later state (an Applied, our own submit) schedules another pass
    let real = await this.scopeTabs(); // the window's tabs, or the bound group's (group-bound.js)
    const win = await chrome.windows.get(this.b.windowId).catch(() => null);
    if (!real || !win) { this.detached(); return; } // a closed group is a closed window
    const changes = planChanges(this.context(real));
    this.submitAll(changes);
    await this.executeAll(changes.actions); // a pause plans no closes
    await this.groupsPass(true);
    const first = real;
    if (!changes.pause) real = (await this.scopeTabs()) ?? [];
    if (!changes.pause && movedTabs(first.map((t) => t.id), real.map((t) => t.id)).length > 0) {
      // The user moved tabs since the first half read the window (a drag during the pass): the
      // arrange would put them back. The next pass sends the move first, then arranges.
      this.schedule(0);
    } else if (!changes.pause) {
      const arrange = planArrange({ ...this.context(real), deferred: changes.deferred });
      this.submitAll(arrange);
      await this.executeAll(arrange.actions);
      if (this.b.group && arrange.actions.some((x) => x.move)) await this.regroupMoved();
      // A move may change the group of the tab moved and of its neighbours (the browser keeps groups
      // contiguous): after any, every tab's group is the workspace's, not read as the user's.
      const moved = new Set(arrange.actions.some((x) => x.move) ? real.map((t) => t.id) : []);
      await this.groupsPass(false, moved); // after the moves: a tab the browser ungrouped moving it is grouped again
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
    this.phase = "detached";
    this.b.closed = true;
    this.b.attach = "reattach";
    clearTimeout(this.delayTimer);
    this.client.close();
    this.persist().catch(() => {});
    saveBinding(this.b);
    updateRetryAlarm();
    this.publish();
  }
}

for (const methods of [AttachMethods, PopupMethods, GroupBoundMethods]) {
  for (const name of Object.getOwnPropertyNames(methods.prototype)) {
    if (name !== "constructor") Object.defineProperty(Mirror.prototype, name, Object.getOwnPropertyDescriptor(methods.prototype, name));
  }
}
