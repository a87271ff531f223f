// A browser window and a server, as values, for the planner's node tests (plan.test.mjs): the
// window's real tabs, the workspace state, and what executing a plan's actions and the server's
// answers does to them. No browser: the executor's effects, written out plainly.
import { generateKeyBetween } from "../../web/fractional-indexing.js";
import { TabTable } from "../../extension/tab-table.js";

export const BASE = "chrome-extension://ext/";
export const keyBetween = (a, b) => generateKeyBetween(a, b);

/** A seeded random source (mulberry32): `seed` replays a run exactly. */
export function random(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  next.int = (n) => Math.floor(next() * n);
  next.chance = (p) => next() < p;
  next.pick = (xs) => xs[Math.floor(next() * xs.length)];
  return next;
}

/** Workspace tabs `ids` in that order, with keys, titles and URLs made from their ids. */
export function workspace(ids, active = "") {
  let key = null;
  const tabs = ids.map((id) => {
    key = keyBetween(key, null);
    return { id, key, title: `T ${id}`, url: `https://example.test/${id}`, badge: "" };
  });
  return { tabs, activeTabId: active || ids[0] || "", editable: true, version: 1 };
}

/** A real tab showing workspace tab `w` (or a page of its own when `w` is a string). */
export function realTab(id, w, extra = {}) {
  const page = typeof w === "string" ? { title: `T ${w}`, url: `https://example.test/${w}` } : { title: w.title, url: w.url };
  return { id, index: 0, pinned: false, active: false, status: "complete", ...page, ...extra };
}

export function indexed(real) {
  return real.map((t, index) => ({ ...t, index }));
}

/** A table mapping real tab ids to workspace ids (`pairs`), each seen as the workspace has it. */
export function tableOf(pairs, state) {
  const table = new TabTable();
  for (const [tid, wid] of pairs) {
    table.map(tid, wid);
    const w = state.tabs.find((t) => t.id === wid);
    table.setSeen(tid, { title: w?.title ?? `T ${wid}`, badge: "", url: w?.url ?? `https://example.test/${wid}` });
  }
  table.lastOrder = state.tabs.map((t) => t.id);
  return table;
}

/** The planner's input for window `real`, state `state`, table `table`, with overrides. */
export function context(real, state, table, extra = {}) {
  return {
    real: indexed(real), state, table, mode: "follow", readOnly: false, viewer: false, budget: Infinity, now: 1_000_000,
    keyBetween, newId: (tid) => `xn-${tid}`, urlPending: () => false,
    isPlaceholder: (t) => (t.url || t.pendingUrl || "").startsWith(`${BASE}placeholder.html`), ...extra,
  };
}

/**
 * The server's answer to `ops` from this window: each applied in order to `state` (a new state
 * returned), unless `refuse(op)` names a refusal code, which is returned in `refused`. An add of
 * an id already there is refused TAB_EXISTS, an op on a missing tab TAB_GONE, as the server does.
 * `removed`: the ids the applied ops took out (the client's Applied `removed` list).
 */
export function serve(state, ops, refuse = () => null) {
  let tabs = state.tabs.map((t) => ({ ...t }));
  let active = state.activeTabId;
  const refused = [];
  const removed = [];
  const place = (t) => {
    tabs = tabs.filter((x) => x.id !== t.id);
    const i = tabs.findIndex((x) => x.key > t.key);
    tabs.splice(i < 0 ? tabs.length : i, 0, t);
  };
  for (const op of ops) {
    const [[kind, body]] = Object.entries(op);
    const code = refuse(op);
    if (code) { refused.push({ op, code }); continue; }
    const has = (id) => tabs.some((t) => t.id === id);
    if (kind === "add") {
      if (has(body.tab.id)) { refused.push({ op, code: "TAB_EXISTS" }); continue; }
      place({ badge: "", url: "", ...body.tab, key: body.place.key });
    } else if (kind === "remove") {
      if (!has(body.tabId)) { refused.push({ op, code: "TAB_GONE" }); continue; }
      tabs = tabs.filter((t) => t.id !== body.tabId);
      removed.push(body.tabId);
    } else if (kind === "move") {
      const t = tabs.find((x) => x.id === body.tabId);
      if (!t) { refused.push({ op, code: "TAB_GONE" }); continue; }
      place({ ...t, key: body.place.key });
    } else if (kind === "update") {
      const t = tabs.find((x) => x.id === body.tabId);
      if (!t) { refused.push({ op, code: "TAB_GONE" }); continue; }
      for (const f of ["title", "url", "badge"]) if (f in body) t[f] = body[f];
    } else if (kind === "activate") {
      if (has(body.tabId)) active = body.tabId;
    }
  }
  if (!tabs.some((t) => t.id === active)) active = tabs[0]?.id ?? "";
  return { state: { ...state, tabs, activeTabId: active, version: state.version + 1 }, refused, removed };
}

/**
 * Runs a plan's actions on window `real` (a new array returned), as executor.js does in a
 * browser: opens make tabs with fresh ids `nextId()` mapped in `table`, closes take tabs out,
 * moves reorder, navigations load the URL, activations move the active mark.
 */
export function act(real, actions, table, nextId) {
  let tabs = real.map((t) => ({ ...t }));
  for (const a of actions) {
    if (a.open) {
      const id = nextId();
      const { tab, index, lazy } = a.open;
      const url = lazy ? `${BASE}placeholder.html?id=${tab.id}` : tab.url;
      tabs.splice(Math.min(index, tabs.length), 0, realTab(id, { title: lazy ? url : tab.title, url }));
      table.map(id, tab.id);
      table.setSeen(id, { title: tab.title, badge: tab.badge ?? "", url: tab.url || null });
    } else if (a.close) {
      tabs = tabs.filter((t) => !a.close.tabIds.includes(t.id));
    } else if (a.filler) {
      const id = nextId();
      tabs.splice(a.filler.index ?? tabs.length, 0, realTab(id, { title: "(empty workspace)", url: `${BASE}placeholder.html` }));
      table.ignore(id);
    } else if (a.move) {
      const t = tabs.find((x) => x.id === a.move.tabId);
      if (!t) continue;
      tabs = tabs.filter((x) => x !== t);
      tabs.splice(a.move.index, 0, t);
    } else if (a.activate) {
      const id = a.activate.tabId ?? table.tabOf(a.activate.wsId);
      if (tabs.some((t) => t.id === id)) for (const t of tabs) t.active = t.id === id;
    } else if (a.navigate) {
      const t = tabs.find((x) => x.id === a.navigate.tabId);
      if (t) { t.url = a.navigate.tab.url; t.title = a.navigate.tab.title; }
    }
  }
  return indexed(tabs);
}
