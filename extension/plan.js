// The extension's planner: the contract's rules (docs/extension.md, "The contract") as pure
// functions. No browser API, no timers, no storage: it reads the bound window's real tabs, the
// client's state (confirmed plus pending ops), the tab table and a budget of ops, and returns
// what to do: ops to submit, browser actions, or a pause with its reason. executor.js alone does
// the browser's part; node tests every rule (Tests/extension/plan.test.mjs).
//
// A pass has two plans, each made from a fresh read of the window: `planChanges` (steps 0-5:
// local closes, moves and opens become ops; remote opens and closes become actions) and, once
// those ran, `planArrange` (steps 6-9: order, active tab, navigation, titles). The table is
// updated as the plan is made, before any browser call, so the events of the extension's own
// calls find nothing to do.

import { brakes, movesToOrder, pageFields, tabFields } from "./mirror.js";
import { planMoves } from "./group-moves.js";

export const LAZY_THRESHOLD = 8; // past this many tabs to open at once, the rest open as placeholders
export const TITLE_DEBOUNCE_MS = 400; // a page's title changes are sent once they rest this long
export const UPDATE_EVERY_MS = 5_000; // page-driven updates: at most one per tab this often
export const URL_WAIT_MS = 1_500; // Firefox: an unpublished about:blank tab waits this long for its URL
export const NAVIGATION_WAIT_MS = 10_000; // a tab the mirror navigated says nothing of its page meanwhile

/**
 * The workspace as the plan sees it: the client's state with the plan's own ops applied, so a
 * second add goes after the first and a removed id is gone (as the client's optimistic state
 * would be after each submit).
 */
export class Working {
  constructor(state, keyBetween) {
    this.tabs = state.tabs.map((t) => ({ id: t.id, key: t.key }));
    this.keyBetween = keyBetween;
  }

  has(id) {
    return this.tabs.some((t) => t.id === id);
  }

  /** A key for a tab placed right after `leftId` (null: first); keyBefore: right before `rightId`. */
  keyAfter(leftId) {
    const i = leftId ? this.tabs.findIndex((t) => t.id === leftId) : -1;
    return this.keyBetween(i >= 0 ? this.tabs[i].key : null, this.tabs[i + 1]?.key ?? null);
  }
  keyBefore(rightId) {
    const i = this.tabs.findIndex((t) => t.id === rightId);
    return this.keyBetween(this.tabs[i - 1]?.key ?? null, this.tabs[i].key);
  }

  apply(op) {
    const [[kind, body]] = Object.entries(op);
    if (kind === "remove") this.tabs = this.tabs.filter((t) => t.id !== body.tabId);
    const place = (id, key) => {
      this.tabs = this.tabs.filter((t) => t.id !== id);
      const i = this.tabs.findIndex((t) => t.key > key);
      this.tabs.splice(i < 0 ? this.tabs.length : i, 0, { id, key });
    };
    if (kind === "move") place(body.tabId, body.place.key);
    if (kind === "add") place(body.tab.id, body.place.key);
  }
}

/** A fresh plan: nothing to do yet. */ function emptyPlan(ctx) {
  return { ops: [], actions: [], pause: null, later: null, deferred: false, used: 0, budget: ctx.budget ?? Infinity };
}

function submit(plan, work, op) {
  plan.ops.push(op);
  work.apply(op);
}

/** One op of the pacing budget, or false when it is spent (the pass is deferred). */
function take(plan) {
  if (plan.used >= plan.budget) return false;
  plan.used++;
  return true;
}

function later(plan, ms) {
  plan.later = plan.later === null ? ms : Math.min(plan.later, ms);
}

/** Whether real tab `t` takes part in the mirror: not kept out, not local only, not pinned. */
export function mirrorable(table, t) {
  return !table.ignored(t.id) && !table.localOnly(t.id) && !t.pinned;
}

/**
 * Rule "epoch pause ends by itself": a mirror paused because another history holds other tabs
 * resumes once the workspace holds every tab of this window again (another window published them).
 */
export function epochPauseEnds(table, state) {
  if (table.paused?.kind !== "epoch") return false;
  const ids = new Set(state.tabs.map((t) => t.id));
  return table.mapped().every(([, id]) => ids.has(id));
}

/**
 * Step 0, rule "local only is the user's": a local-only tab that closed is forgotten; a tab kept
 * local because it was pinned may be shared again once unpinned; the others keep their reason
 * (only Share publishes them) with the title their page has now.
 */
export function forgetGoneLocalOnly(ctx) {
  const byId = new Map(ctx.real.map((t) => [t.id, t]));
  for (const [tid, v] of ctx.table.localOnlyEntries()) {
    const t = byId.get(tid);
    if (!t) ctx.table.forget(tid);
    else if (v.code === "pinned" && !t.pinned) ctx.table.setLocalOnly(tid, null);
    else v.title = tabFields(t).title;
  }
}

/**
 * Step 1, rule "a local close is a remove": a mapped tab gone from the window (or pinned: pinned
 * tabs are local, so pinning takes a tab out of the workspace and keeps it here) sends `remove`,
 * unless an applied op removed it already. A read-only mirror closes it here only (dismissed: not
 * reopened). A pinned tab stays, listed local only.
 */
export function localCloses(ctx, plan, work) {
  const { table } = ctx;
  const byId = new Map(ctx.real.map((t) => [t.id, t]));
  for (const [tid, wid] of table.mapped()) {
    const t = byId.get(tid);
    if (t && !t.pinned) continue;
    if (work.has(wid) && !table.removed.has(wid)) {
      if (ctx.readOnly) table.dismissed.add(wid);
      else if (!take(plan)) { plan.deferred = true; return; } else submit(plan, work, { remove: { tabId: wid } });
    }
    if (t) { table.unmap(tid); table.setLocalOnly(tid, { code: "pinned", title: tabFields(t).title }); } else table.forget(tid);
  }
}

/** The window's mirrored tabs (mapped, in the workspace), in real order, as workspace ids. */
function mirroredIds(ctx, work) {
  const { table } = ctx;
  return ctx.real.filter((t) => mirrorable(table, t) && work.has(table.wsOf(t.id) ?? "")).map((t) => table.wsOf(t.id));
}

/**
 * Step 2, rule "a local move is a move": tabs out of a longest common subsequence of the order last
 * synced and the real order get a key beside a neighbour that stayed, a group kept whole (group-moves.js).
 */
export function localMoves(ctx, plan, work) {
  const { table } = ctx;
  if (plan.deferred || !table.lastOrder || ctx.readOnly) return;
  const { moves, regroup } = planMoves(table.lastOrder, mirroredIds(ctx, work), (id) => table.groups.member.get(id) ?? "");
  for (const m of moves) {
    if (!take(plan)) { plan.deferred = true; return; }
    submit(plan, work, { move: { tabId: m.id, place: { key: m.before ? work.keyBefore(m.before) : work.keyAfter(m.left) } } });
  }
  for (const r of regroup) plan.ops.push({ group: r }); // right after its moves, whatever the budget
}

/**
 * Step 3, rule "a local open is an add": a tab with no workspace tab is added after its real left
 * neighbour. A mapped tab whose id is not in the workspace and that no op removed (a new epoch, a
 * lost add) is added again under its id. Never published: a local-only or pinned tab (until
 * Share), a tab of a read-only mirror (kept local), a Firefox tab whose URL is not known yet. A
 * tab whose made-up id is in the workspace already is ours from before a restart: mapped only.
 * A placeholder is added as the page it stands for.
 */
export function localOpens(ctx, plan, work) {
  const { table } = ctx;
  if (plan.deferred) return;
  let left = null;
  for (const t of ctx.real) {
    if (!mirrorable(table, t)) continue;
    const mapped = table.wsOf(t.id);
    if (mapped && work.has(mapped)) { left = mapped; continue; }
    if (!mapped && ctx.urlPending?.(t)) { later(plan, URL_WAIT_MS); continue; }
    if (mapped && (table.removed.has(mapped) || table.snapshotRemoved.has(mapped))) continue; // closed in step 5
    const id = mapped ?? ctx.newId(t.id);
    if (!mapped && work.has(id)) { table.map(t.id, id); left = id; continue; }
    if (ctx.readOnly) {
      table.unmap(t.id);
      table.setLocalOnly(t.id, { code: ctx.viewer ? "NOT_PERMITTED" : "NOT_EDITABLE", title: pageFields(t, ctx.isPlaceholder(t)).title });
      continue;
    }
    if (!take(plan)) { plan.deferred = true; return; }
    const f = pageFields(t, ctx.isPlaceholder(t));
    const tab = { id, title: f.title, group: ctx.askGroup?.(id, left, work) || undefined }; // group-bound: shared-group.js
    if (tab.group === undefined) delete tab.group;
    if (f.url) tab.url = f.url;
    if (f.badge) tab.badge = f.badge;
    table.map(t.id, id);
    table.setSeen(t.id, f);
    submit(plan, work, { add: { tab, place: { key: work.keyAfter(left) }, activate: false } });
    left = id;
  }
}

/**
 * Step 4, rule "a remote open opens once": each workspace tab with no real tab (and not dismissed
 * in a read-only mirror) opens at its place, right of the real tab of its nearest mapped left
 * neighbour; past LAZY_THRESHOLD at once, the rest as placeholders. A workspace id that has a real
 * tab is never opened again.
 */
export function remoteOpens(ctx, plan, state) {
  const { table } = ctx;
  const mapped = table.mappedIds();
  const missing = state.tabs.filter((w) => !mapped.has(w.id) && !table.dismissed.has(w.id));
  if (missing.length === 0) return;
  const order = ctx.real.map((t) => t.id);
  const place = new Map(); // workspace id -> real id or the open action that makes it
  for (const [tid, wid] of table.mapped()) place.set(wid, tid);
  let opened = 0;
  for (const w of missing) {
    const i = state.tabs.indexOf(w);
    let index = order.length;
    for (let j = i - 1; j >= 0; j--) {
      const at = order.indexOf(place.get(state.tabs[j].id));
      if (place.has(state.tabs[j].id) && at >= 0) { index = at + 1; break; }
    }
    if (index === order.length && i === 0) {
      const firstFree = ctx.real.findIndex((t) => !t.pinned);
      if (firstFree >= 0) index = firstFree;
    }
    const lazy = missing.length > LAZY_THRESHOLD && opened >= LAZY_THRESHOLD;
    const marker = { open: w.id };
    plan.actions.push({ open: { tab: { id: w.id, title: w.title, url: w.url, badge: w.badge }, index, lazy } });
    opened++;
    place.set(w.id, marker);
    order.splice(Math.min(index, order.length), 0, marker);
  }
}

/**
 * Step 5, rule "only an applied remove closes": a mapped tab closes only when an applied op
 * removed its workspace id (`table.removed`) and the workspace does not hold it. Rule "the brake":
 * ids a snapshot of the same history left out (no op seen) close too, unless more than 5 and more
 * than half of the window's mapped tabs would go at once: then the mirror pauses and asks. In
 * follow mode the workspace's active tab is shown first; an emptied window keeps one placeholder.
 */
export function remoteCloses(ctx, plan, state) {
  const { table, real } = ctx;
  const snapGone = real.filter((t) => table.snapshotRemoved.has(table.wsOf(t.id) ?? ""));
  if (snapGone.length > 0) {
    if (brakes(snapGone.length, real.filter((t) => table.wsOf(t.id) !== undefined).length)) {
      plan.pause = {
        kind: "brake", count: snapGone.length,
        reason: `the server's copy no longer has ${snapGone.length} of this window's tabs, and no change that removed them `
          + "reached this window: nothing was closed. Close them, or publish this window's tabs again.",
      };
      return;
    }
    for (const t of snapGone) table.removed.add(table.wsOf(t.id));
  }
  table.snapshotRemoved.clear();
  const inWorkspace = new Set(state.tabs.map((t) => t.id));
  const gone = real.filter((t) => { const w = table.wsOf(t.id); return w !== undefined && table.removed.has(w) && !inWorkspace.has(w); });
  if (gone.length > 0) {
    const shown = state.activeTabId && (table.tabOf(state.activeTabId) !== undefined || plan.actions.some((a) => a.open?.tab.id === state.activeTabId));
    if (ctx.mode === "follow" && gone.some((t) => t.active) && shown) {
      table.lastActive = state.activeTabId;
      plan.actions.push({ activate: { wsId: state.activeTabId } });
    }
    if (real.length === gone.length && state.tabs.length === 0) plan.actions.push({ filler: {} });
    for (const t of gone) { table.removed.delete(table.wsOf(t.id)); table.forget(t.id); }
    plan.actions.push({ close: { tabIds: gone.map((t) => t.id) } });
  }
  // Removed ids with no real tab left have nothing to close; an id in the workspace again is no longer removed.
  const mappedNow = table.mappedIds();
  for (const id of [...table.removed]) if (!mappedNow.has(id) || inWorkspace.has(id)) table.removed.delete(id);
}

/**
 * Steps 0-5 of a pass over `ctx` = { real (the window's tabs in order), state (the client's
 * state), table, mode, readOnly, viewer, budget, now, newId(realId), keyBetween(a, b),
 * urlPending(tab), askGroup(id, leftId, work)? (group-bound: the group an add asks for) }. Returns { ops, actions, pause, later, deferred, used }: the ops go to the
 * client in order, then the actions to the executor. A paused mirror plans nothing.
 */
export function planChanges(ctx) {
  const plan = emptyPlan(ctx);
  const { table, state } = ctx;
  if (epochPauseEnds(table, state)) table.paused = null;
  if (table.paused) { plan.pause = table.paused; return plan; }
  const work = new Working(state, ctx.keyBetween);
  forgetGoneLocalOnly(ctx);
  localCloses(ctx, plan, work);
  localMoves(ctx, plan, work);
  localOpens(ctx, plan, work);
  const added = plan.ops.filter((op) => op.add).map((op) => ({ ...op.add.tab, key: op.add.place.key }));
  const full = new Map([...state.tabs, ...added].map((t) => [t.id, t]));
  const after = { ...state, tabs: work.tabs.map((t) => ({ ...full.get(t.id), key: t.key })) };
  remoteOpens(ctx, plan, after);
  remoteCloses(ctx, plan, after);
  if (plan.pause) table.paused = plan.pause;
  return plan;
}

/**
 * Step 6, rule "remote moves follow with the fewest moves": the real order takes the workspace's,
 * moving only tabs outside a longest common subsequence; pinned tabs are never moved. The order
 * is recorded first. Skipped while local changes wait for the budget.
 */
export function remoteMoves(ctx, plan) {
  const { table, real, state } = ctx;
  if (ctx.deferred) return;
  const desired = state.tabs.map((t) => t.id);
  const fixed = new Set(real.filter((t) => t.pinned && (!mirrorable(table, t) || table.wsOf(t.id) === undefined)).map((t) => t.id));
  const wanted = desired.map((id) => table.tabOf(id)).filter((x) => x !== undefined);
  table.lastOrder = desired;
  for (const m of movesToOrder(real.map((t) => t.id), wanted, fixed)) plan.actions.push({ move: { tabId: m.id, index: m.index } });
}

/**
 * Step 7, rule "follow shares the active tab both ways; browse keeps it local": joining, the
 * workspace's active tab is shown; a tab the user activated is sent (`activate`); a tab another
 * client activated is shown. The active tab last synced is recorded before the browser call.
 * Presence (`focus`) either way.
 */
export function activeTab(ctx, plan) {
  const { table, real, state } = ctx;
  const activeReal = real.find((t) => t.active);
  const activeWs = activeReal ? table.wsOf(activeReal.id) : undefined;
  plan.focus = activeWs ?? "";
  if (ctx.mode !== "follow" || ctx.deferred) return;
  const wsActive = state.activeTabId;
  const show = () => {
    const rid = table.tabOf(wsActive);
    if (rid === undefined) return;
    table.lastActive = wsActive;
    plan.actions.push({ activate: { tabId: rid } });
  };
  if (table.lastActive === null && wsActive) show();
  else if (activeWs && activeWs !== table.lastActive) {
    table.lastActive = activeWs;
    if (wsActive !== activeWs && !ctx.viewer && take(plan)) plan.ops.push({ activate: { tabId: activeWs } });
  } else if (wsActive && wsActive !== table.lastActive) show();
}

/**
 * Step 8, rule "navigation follows, never over the user's": a URL another client set is loaded
 * in the real tab when it still shows the URL last synced (or is a placeholder); a tab the user
 * navigated elsewhere is left alone (its own URL goes out in step 9).
 */
export function navigations(ctx, plan) {
  const { table, real, state } = ctx;
  for (const t of real) {
    const wid = table.wsOf(t.id);
    const w = wid && state.tabs.find((x) => x.id === wid);
    if (!w || !/^https?:\/\//i.test(w.url ?? "")) continue;
    const prev = table.seen(t.id) ?? { title: w.title, badge: w.badge, url: null };
    if (prev.url === w.url) continue;
    const current = tabFields({ url: t.pendingUrl || t.url }).url; // a navigation the user just started counts
    if (current === w.url) { table.setSeen(t.id, { ...prev, url: w.url }); continue; }
    const placeholder = ctx.isPlaceholder(t);
    if (!placeholder && current !== prev.url) continue;
    table.setSeen(t.id, { ...prev, url: w.url });
    table.record(t.id).navigating = { url: w.url, until: ctx.now + NAVIGATION_WAIT_MS };
    plan.actions.push({ navigate: { tabId: t.id, tab: { id: w.id, title: w.title, url: w.url }, lazy: placeholder && !t.active } });
  }
}

/**
 * Step 9, rule "a page's own changes go out once they rest": title, badge and URL changes of a
 * loaded page are sent when they rested TITLE_DEBOUNCE_MS, at most one update per tab every
 * UPDATE_EVERY_MS, only what the page changed since last synced. Not sent: a tab the mirror is
 * navigating (the page it leaves is not news), and anything of a placeholder (rule "a
 * placeholder's title is never published": the browser names it by its own URL).
 */
export function pageUpdates(ctx, plan) {
  const { table, real, state, now } = ctx;
  for (const t of real) {
    const wid = table.wsOf(t.id);
    const w = wid && state.tabs.find((x) => x.id === wid);
    if (!w || t.status !== "complete" || ctx.viewer || ctx.isPlaceholder(t)) continue;
    const f = tabFields(t);
    const r = table.record(t.id);
    if (r.navigating && r.navigating.url !== f.url && now < r.navigating.until) continue;
    r.navigating = null;
    const prev = r.seen;
    if (prev && prev.title === f.title && prev.badge === f.badge && (f.url === null || prev.url === f.url)) continue;
    const quietFor = now - r.changedAt;
    if (quietFor < TITLE_DEBOUNCE_MS) { later(plan, TITLE_DEBOUNCE_MS - quietFor + 10); continue; }
    const update = {};
    if (f.title !== w.title && f.title !== prev?.title) update.title = f.title;
    if (f.badge !== w.badge && f.badge !== prev?.badge) update.badge = f.badge;
    if (f.url !== null && f.url !== w.url && f.url !== prev?.url) update.url = f.url;
    if (Object.keys(update).length > 0) {
      const since = now - r.updatedAt;
      if (since < UPDATE_EVERY_MS) { later(plan, UPDATE_EVERY_MS - since + 10); continue; }
      if (!take(plan)) { plan.deferred = true; continue; }
      plan.ops.push({ update: { tabId: wid, ...update } });
      r.updatedAt = now;
    }
    r.seen = f;
  }
}

/**
 * Steps 6-9 of a pass, from a fresh read of the window after planChanges' actions ran. `ctx` as
 * for planChanges, plus `deferred` (planChanges ran out of budget). Returns the plan, with `focus`.
 */
export function planArrange(ctx) {
  const plan = emptyPlan(ctx);
  remoteMoves(ctx, plan);
  activeTab(ctx, plan);
  navigations(ctx, plan);
  pageUpdates(ctx, plan);
  if (ctx.deferred || plan.deferred) later(plan, 1000);
  return plan;
}
