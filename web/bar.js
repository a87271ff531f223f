// The live tab bar: renders a TabsyncClient's optimistic state and turns clicks, keys and drags
// into ops. All network text is set with textContent (never as HTML), after cleanText.

import { TabsyncClient } from "./tabsync-client.js";
import { GROUP_COLORS } from "./tab-groups.js";

/** Network text made safe to show: control characters become U+FFFD, bidi overrides go. */
export function cleanText(s) {
  return String(s ?? "")
    .replace(/[\u0000-\u001f\u007f-\u009f]/g, "\ufffd")
    .replace(/[\u202a-\u202e\u2066-\u2069]/g, "");
}

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const hash = new URLSearchParams(location.hash.slice(1));
const workspace = location.pathname.startsWith("/w/")
  ? decodeURIComponent(location.pathname.slice(3))
  : params.get("w") || "default";

function stored(storage, key, make) {
  try {
    const have = storage.getItem(key);
    if (have) return have;
    const value = make();
    storage.setItem(key, value);
    return value;
  } catch {
    return make();
  }
}
const random = () => Math.random().toString(36).slice(2, 8);
// One client id per browser tab (sessionStorage survives a reload of that tab, not a second tab).
const clientId = params.get("client") || stored(sessionStorage, "tabsync.clientId", () => "web-" + random() + random());
const name = params.get("name") || stored(localStorage, "tabsync.name", () => "guest-" + random().slice(0, 4));

const client = new TabsyncClient({
  url: (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/",
  workspace, clientId, name, token: hash.get("token") || "",
});
window.tabsync = client; // for the console (and the browser tests)

const tabElements = new Map(); // tab id -> its element in the bar
const groupChips = new Map(); // group id -> its chip in the bar

const ui = {
  drag: null,            // { id, el, pointerId, startX, started }
  rejection: null,       // { tabId, text, until }
  rejectionTimer: null,
  refused: [],           // recent refusals, newest first
  everConnected: false,
  shownActive: null,     // the tab id the edit form was filled from
  menuOpen: false,
  serverError: null,     // the last Error the server sent before closing
  collapsed: new Set(),  // group ids collapsed in this page only (never sent: each viewer's own)
  shownGroup: null,      // the group id the group form was filled from
};

// ------------------------------------------------------------------ rendering

function peerColor(id) {
  let h = 7;
  for (const c of id) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return `hsl(${Math.round((h * 137.508) % 360)} 65% 42%)`; // golden angle: neighbours differ
}

function span(cls, text) {
  const el = document.createElement("span");
  el.className = cls;
  el.textContent = text;
  return el;
}

/** The browsers' group colours as Chrome draws them (docs/design.md, "Tab groups"). */
const GROUP_HEX = {
  grey: "#5f6368", blue: "#1a73e8", red: "#d93025", yellow: "#f9ab00", green: "#188038",
  pink: "#d01884", purple: "#a142f4", cyan: "#007b83", orange: "#fa903e",
};

/** A group's name as the page shows it. */
function groupLabel(group) {
  return cleanText(group.title) || "Untitled group";
}

/**
 * The chip before a group's first tab: its title in its colour; a click collapses or expands the
 * group here only (collapsed is each viewer's own: nothing is sent), and a tab dropped on it joins it.
 */
function groupChip(group, count) {
  let chip = groupChips.get(group.id);
  if (!chip) {
    chip = document.createElement("button");
    chip.type = "button";
    chip.className = "group-chip";
    chip.dataset.group = group.id;
    chip.addEventListener("click", () => {
      if (ui.collapsed.has(group.id)) ui.collapsed.delete(group.id); else ui.collapsed.add(group.id);
      render();
    });
    chip.addEventListener("pointerdown", (e) => e.stopPropagation());
    groupChips.set(group.id, chip);
  }
  const collapsed = ui.collapsed.has(group.id);
  chip.textContent = (cleanText(group.title) || "·") + (collapsed ? ` +${count}` : "");
  chip.style.setProperty("--group-color", GROUP_HEX[group.color] ?? GROUP_HEX.grey);
  chip.setAttribute("aria-expanded", collapsed ? "false" : "true");
  chip.title = `${groupLabel(group)} (${count} tab${count === 1 ? "" : "s"}): click to ${collapsed ? "expand" : "collapse"} here`;
  return chip;
}

function tabLabel(tab) {
  return cleanText(tab.title) || cleanText(tab.url) || tab.id;
}

function pendingTabIds() {
  const ids = new Set();
  for (const p of client.pending) {
    const [[, body]] = Object.entries(p.op);
    if (body.tabId) ids.add(body.tabId);
    if (body.tab?.id) ids.add(body.tab.id);
  }
  return ids;
}

function renderTabs() {
  const state = client.state;
  const tabsEl = $("tabs");
  const focusedId = document.activeElement?.closest?.(".tab")?.dataset.id;
  const pending = pendingTabIds();
  const viewers = new Map();
  for (const p of client.peers) {
    if (p.sessionId === client.sessionId || !p.focusTabId) continue;
    if (!viewers.has(p.focusTabId)) viewers.set(p.focusTabId, []);
    viewers.get(p.focusTabId).push(p);
  }
  const rejection = ui.rejection && ui.rejection.until > Date.now() ? ui.rejection : null;
  const ordered = [];
  const groups = new Map(state.groups.map((g) => [g.id, g]));
  for (const id of ui.collapsed) if (!groups.has(id)) ui.collapsed.delete(id);
  state.tabs.forEach((tab, index) => {
    const group = groups.get(tab.group);
    if (group && state.tabs[index - 1]?.group !== tab.group) {
      ordered.push(groupChip(group, state.tabs.filter((t) => t.group === group.id).length));
    }
    // One element per tab id for the tab's lifetime (focus, pointer capture and tests keep it).
    let el = tabElements.get(tab.id);
    if (!el) {
      el = document.createElement("div");
      el.dataset.id = tab.id;
      el.setAttribute("role", "tab");
      el.id = "tab-" + tab.id;
      tabElements.set(tab.id, el);
    }
    el.replaceChildren();
    el.className = "tab" + (pending.has(tab.id) ? " pending" : "") + (group ? " grouped" : "")
      + (group && ui.collapsed.has(group.id) && tab.id !== state.activeTabId ? " collapsed-away" : "");
    el.style.transform = "";
    if (group) el.style.setProperty("--group-color", GROUP_HEX[group.color] ?? GROUP_HEX.grey);
    else el.style.removeProperty("--group-color");
    const active = tab.id === state.activeTabId;
    el.setAttribute("aria-selected", active ? "true" : "false");
    el.tabIndex = active || (!state.activeTabId && index === 0) ? 0 : -1;
    const description = [`position ${index + 1} of ${state.tabs.length}`];
    if (tab.badge) description.push(`badge ${cleanText(tab.badge)}`);
    if (tab.locked) description.push("locked");
    if (group) description.push(`in group ${groupLabel(group)}`);
    el.setAttribute("aria-description", description.join(", "));
    el.title = [tabLabel(tab), cleanText(tab.url)].filter(Boolean).join("\n");
    if (tab.icon) el.append(span("icon", cleanText(tab.icon)));
    el.append(span("title", tabLabel(tab)));
    if (tab.badge) el.append(span("badge", cleanText(tab.badge)));
    if (tab.locked) {
      const lock = span("lock", "🔒");
      lock.setAttribute("aria-label", "locked");
      el.append(lock);
    }
    const seen = viewers.get(tab.id);
    if (seen) {
      const box = span("viewers", "");
      for (const p of seen.slice(0, 3)) {
        const dot = span("viewer", cleanText(p.name || p.clientId).slice(0, 1).toUpperCase());
        dot.style.background = peerColor(p.sessionId);
        dot.title = cleanText(p.name || p.clientId) + " is here";
        box.append(dot);
      }
      el.append(box);
    }
    const close = document.createElement("button");
    close.type = "button";
    close.className = "close";
    close.tabIndex = -1;
    close.textContent = "×";
    close.setAttribute("aria-label", "Close " + tabLabel(tab));
    close.addEventListener("click", (e) => { e.stopPropagation(); client.remove(tab.id); });
    close.addEventListener("pointerdown", (e) => e.stopPropagation());
    el.append(close);
    if (rejection && rejection.tabId === tab.id) {
      const note = span("rejection", rejection.text);
      note.setAttribute("role", "status");
      el.append(note);
    }
    ordered.push(el);
  });
  for (const id of tabElements.keys()) if (!state.tabs.some((t) => t.id === id)) tabElements.delete(id);
  for (const id of groupChips.keys()) if (!groups.has(id)) groupChips.delete(id);
  const current = [...tabsEl.children];
  if (current.length !== ordered.length || current.some((el, i) => el !== ordered[i])) tabsEl.replaceChildren(...ordered);
  const barNote = document.querySelector(".bar-rejection");
  barNote?.remove();
  if (rejection && !state.tabs.some((t) => t.id === rejection.tabId)) {
    const note = span("bar-rejection rejection-bar", rejection.text);
    note.setAttribute("role", "status");
    $("add").after(note);
  }
  layoutOverflow();
  if (focusedId) document.getElementById("tab-" + focusedId)?.focus();
}

/** Hides the tabs that do not fit (the active one always stays) and lists them under More. */
function layoutOverflow() {
  const tabsEl = $("tabs");
  const more = $("more");
  const els = [...tabsEl.querySelectorAll(".tab:not(.collapsed-away)")];
  els.forEach((el) => el.classList.remove("hidden-overflow"));
  more.hidden = true;
  const widths = els.map((el) => el.getBoundingClientRect().width + 2);
  const total = widths.reduce((a, b) => a + b, 0);
  const hidden = [];
  if (total > tabsEl.clientWidth + 1) {
    more.hidden = false;
    const room = tabsEl.clientWidth;
    const activeIndex = els.findIndex((el) => el.getAttribute("aria-selected") === "true");
    const visible = [];
    let used = 0;
    for (let i = 0; i < els.length && used + widths[i] <= room; i++) { visible.push(i); used += widths[i]; }
    if (activeIndex >= 0 && !visible.includes(activeIndex)) {
      while (visible.length && used + widths[activeIndex] > room) used -= widths[visible.pop()];
      visible.push(activeIndex);
    }
    els.forEach((el, i) => { if (!visible.includes(i)) { el.classList.add("hidden-overflow"); hidden.push(el.dataset.id); } });
  }
  more.textContent = `More (${hidden.length}) ▾`;
  const menu = $("more-menu");
  // Rebuilt only when what it lists changed, so an open menu keeps its focus and its items.
  const signature = JSON.stringify(hidden.map((id) => client.state.tabs.find((t) => t.id === id)));
  if (menu.dataset.signature === signature) {
    if (!hidden.length) closeMenu();
    return;
  }
  menu.dataset.signature = signature;
  menu.replaceChildren();
  for (const id of hidden) {
    const tab = client.state.tabs.find((t) => t.id === id);
    const li = document.createElement("li");
    li.setAttribute("role", "menuitem");
    li.tabIndex = -1;
    li.dataset.id = id;
    if (tab.icon) li.append(span("icon", cleanText(tab.icon)));
    li.append(span("title", tabLabel(tab)));
    if (tab.badge) li.append(span("badge", "(" + cleanText(tab.badge) + ")"));
    if (tab.locked) li.append(span("lock", "🔒"));
    li.addEventListener("click", () => { closeMenu(); activate(id); });
    menu.append(li);
  }
  if (!hidden.length) closeMenu();
}

function openMenu() {
  ui.menuOpen = true;
  $("more-menu").hidden = false;
  $("more").setAttribute("aria-expanded", "true");
  $("more-menu").querySelector("[role=menuitem]")?.focus();
}
function closeMenu() {
  ui.menuOpen = false;
  $("more-menu").hidden = true;
  $("more").setAttribute("aria-expanded", "false");
}

function renderPanels() {
  const state = client.state;
  document.body.dataset.version = String(client.confirmed.version);
  document.body.dataset.pending = String(client.pending.length);
  document.body.dataset.editable = String(state.editable);
  $("workspace-name").textContent = cleanText(workspace);
  document.title = `${cleanText(workspace)} — tabsync`;
  $("readonly").checked = !state.editable;
  $("readonly-mark").hidden = state.editable;

  const active = state.tabs.find((t) => t.id === state.activeTabId);
  $("no-tab").hidden = Boolean(active);
  $("edit").hidden = !active;
  if (active) {
    const editing = $("edit").contains(document.activeElement) && document.activeElement.tagName === "INPUT";
    if (ui.shownActive !== active.id || !editing) {
      $("edit-title").value = active.title;
      $("edit-icon").value = active.icon;
      $("edit-badge").value = active.badge;
    }
    ui.shownActive = active.id;
    $("lock").textContent = active.locked ? "Unlock" : "Lock";
    $("tab-url").textContent = cleanText(active.url);
  }
  renderGroupEditor(active);
  client.focus(state.activeTabId);

  const people = $("people");
  people.replaceChildren();
  for (const p of client.peers) {
    const li = document.createElement("li");
    const dot = span("viewer", "");
    dot.style.cssText = `display:inline-block;width:10px;height:10px;border-radius:50%;margin-right:6px;background:${peerColor(p.sessionId)}`;
    const viewing = state.tabs.find((t) => t.id === p.focusTabId);
    li.append(dot, span("name", cleanText(p.name || p.clientId) + (p.sessionId === client.sessionId ? " (you)" : "")),
      span("muted", viewing ? " → " + tabLabel(viewing) : " → no tab"));
    people.append(li);
  }
  const refused = $("refused");
  refused.replaceChildren();
  for (const r of ui.refused) {
    const li = document.createElement("li");
    li.textContent = r;
    refused.append(li);
  }
  if (!ui.refused.length) refused.append(span("muted", "nothing"));
}

/** The active tab's group: which one (a select: none, each group, a new one) and its title and colour. */
function renderGroupEditor(active) {
  const select = $("edit-group");
  const options = [["", "No group"], ...client.state.groups.map((g) => [g.id, groupLabel(g)]), ["new", "New group"]];
  const signature = JSON.stringify(options);
  if (select.dataset.signature !== signature) {
    select.dataset.signature = signature;
    select.replaceChildren(...options.map(([value, label]) => {
      const option = document.createElement("option");
      option.value = value;
      option.textContent = label;
      return option;
    }));
  }
  const group = active && client.state.groups.find((g) => g.id === active.group);
  if (document.activeElement !== select) select.value = group?.id ?? "";
  $("group-edit").hidden = !group;
  if (!group) return;
  const typing = document.activeElement === $("group-title");
  if (ui.shownGroup !== group.id || !typing) $("group-title").value = group.title;
  if (document.activeElement !== $("group-color")) $("group-color").value = group.color;
  ui.shownGroup = group.id;
}

function renderStatus() {
  const status = client.status;
  document.body.dataset.status = status;
  const el = $("status");
  el.className = "status " + status;
  el.textContent = status === "connected"
    ? `connected · v${client.confirmed.version}${client.pending.length ? ` · ${client.pending.length} pending` : ""}`
    : status;
  const banner = $("banner");
  if (status === "connected" || (!ui.everConnected && status === "connecting")) {
    banner.hidden = true;
    return;
  }
  const seconds = Math.max(0, Math.ceil((client.retryAt - Date.now()) / 1000));
  const waiting = client.pending.length ? ` ${client.pending.length} change(s) will be sent when it is back.` : "";
  const error = ui.serverError;
  banner.textContent = status === "closed"
    ? error?.code === "UNAUTHORIZED"
      ? "This server needs a token: open the page as …/w/WORKSPACE#token=YOUR_TOKEN."
      : `The server refused this page: ${cleanText(error?.code ?? "closed")} ${cleanText(error?.message ?? "")}. Reload to try again.`
    : `Disconnected from the server: ${status === "connecting" ? "reconnecting…" : `reconnecting in ${seconds} s…`}${waiting}`;
  banner.hidden = false;
}

function render() {
  if (ui.drag) return; // the bar is redrawn when the pointer is released
  renderTabs();
  renderPanels();
  renderStatus();
}

// ------------------------------------------------------------------ ops from the user

function activate(id) {
  if (client.state.activeTabId !== id) client.activate(id);
  document.getElementById("tab-" + id)?.focus();
}

/** Moves a tab so it has `index` among the other tabs: a key between its two new neighbours. */
function moveTo(id, index) {
  const others = client.state.tabs.filter((t) => t.id !== id);
  const before = others[index - 1] ?? null;
  const after = others[index] ?? null;
  const tab = client.state.tabs.find((t) => t.id === id);
  const current = client.state.tabs.indexOf(tab);
  if (current === index) return;
  client.move(id, client.keyBetween(before, after));
}

/** Puts tab `id` into group `groupId` ("" takes it out; "new" makes an untitled group for it). */
function setGroup(id, groupId) {
  const tab = client.state.tabs.find((t) => t.id === id);
  if (!tab || tab.group === groupId) return;
  if (groupId === "") { client.ungroup([id]); return; }
  const target = groupId === "new" ? "g-" + random() + random() : groupId;
  client.group([id], target);
  if (groupId === "new") requestAnimationFrame(() => $("group-title").focus());
}

function addTab({ title, url = "", icon = "", position = null }) {
  const tabs = client.state.tabs;
  let key;
  if (position !== null && position >= 1 && position <= tabs.length) {
    key = client.keyBetween(tabs[position - 2] ?? null, tabs[position - 1]);
  }
  const tab = { title };
  if (url) tab.url = url;
  if (icon) tab.icon = icon;
  client.add(tab, { key, activate: true });
}

const CODES = {
  LOCKED: "the tab is locked",
  NOT_EDITABLE: "the workspace is read-only",
  TAB_GONE: "the tab is gone",
  TAB_EXISTS: "a tab with that id exists",
  INVALID_ARGUMENT: "invalid",
  LIMIT_EXCEEDED: "too many tabs",
  RATE_LIMITED: "too fast",
  UNAVAILABLE: "the server cannot store it now",
};

client.addEventListener("rejected", (event) => {
  const { code, message, op } = event.detail;
  const [[kind, body]] = Object.entries(op ?? { op: {} });
  const tabId = body?.tabId ?? body?.tab?.id ?? "";
  const text = `Refused ${kind}: ${code}${CODES[code] ? ` (${CODES[code]})` : ""}`;
  ui.rejection = { tabId, text, until: Date.now() + 8000 };
  ui.refused.unshift(`${new Date().toLocaleTimeString()} ${text} — ${cleanText(message)}`);
  ui.refused.length = Math.min(ui.refused.length, 10);
  clearTimeout(ui.rejectionTimer);
  ui.rejectionTimer = setTimeout(render, 8100);
  render();
});
// Another history (a new epoch, or the server's store brought back from a copy below a version
// this page saw): its state is shown as it is, and the bar says why tabs may have gone or come back.
client.addEventListener("welcome", (event) => {
  if (!event.detail.newHistory) return;
  document.body.dataset.histories = String(Number(document.body.dataset.histories ?? 0) + 1);
  ui.rejection = { tabId: "", text: "The server's history was replaced: showing its state.", until: Date.now() + 8000 };
  clearTimeout(ui.rejectionTimer);
  ui.rejectionTimer = setTimeout(render, 8100);
});
client.addEventListener("change", render);
client.addEventListener("status", () => {
  if (client.status === "connected") ui.everConnected = true;
  render();
});
client.addEventListener("error", (event) => {
  ui.serverError = event.detail;
  console.warn("tabsync error", event.detail);
  render();
});
setInterval(() => { if (client.status !== "connected") renderStatus(); }, 500);
new ResizeObserver(() => { if (!ui.drag?.started) layoutOverflow(); }).observe($("bar"));

// ------------------------------------------------------------------ history drawer
// Who did what when (HistoryQuery `ops`, newest first, paged with `next`), "Restore to here" with
// an inline confirm, and the recently closed tabs (HistoryQuery `closed`) with Reopen. The server
// decides what a restore or reopen becomes; the drawer only says what it answered.

const PAGE = 50;
const hist = {
  open: false,
  entries: [],        // HistoryEntry, newest first
  next: 0,            // `before` of the next older page; 0: none
  closed: [],         // ClosedTab, newest first
  note: "",           // the last thing to say (a refusal, an error, what was done)
  noteKind: "",       // "error" | "ok" | ""
  confirming: null,   // the version whose restore waits for a confirm
  waiting: null,      // { kind, target, entry }: our restore or reopen until its answer
  generation: 0,      // answers of an older load are dropped
  shownVersion: -1,   // confirmed version the drawer was drawn at
  refreshTimer: null,
};

/** "just now", "5 s ago", "3 min ago", "2 h ago", "yesterday", "4 days ago" ("" when unknown). */
export function relativeTime(at, now = Date.now()) {
  const t = Date.parse(at ?? "");
  if (!at || Number.isNaN(t)) return "";
  const s = Math.round((now - t) / 1000);
  if (s < 10) return "just now";
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  if (s < 172800) return "yesterday";
  return `${Math.floor(s / 86400)} days ago`;
}

function setNote(text, kind = "") {
  hist.note = text;
  hist.noteKind = kind;
}

/** Reads the newest page (as many entries as are shown, so paging is kept) and the closed tabs. */
async function loadHistory() {
  if (!hist.open) return;
  const generation = ++hist.generation;
  const limit = Math.min(1000, Math.max(PAGE, hist.entries.length));
  try {
    const [ops, closed] = await Promise.all([client.history({ ops: { limit } }), client.history({ closed: 20 })]);
    if (generation !== hist.generation) return;
    const error = ops.error ?? closed.error;
    if (error) {
      setNote(`The server could not read the history: ${cleanText(error.message || error.code)}`, "error");
    } else {
      hist.entries = ops.ops ?? [];
      hist.next = Number(ops.next ?? 0);
      hist.closed = closed.closed ?? [];
    }
  } catch (error) {
    if (generation !== hist.generation) return;
    setNote(`History is not available now: ${error.message}`, "error");
  }
  renderHistory();
}

async function loadOlder() {
  if (!hist.next) return;
  const generation = hist.generation;
  try {
    const page = await client.history({ ops: { before: hist.next, limit: PAGE } });
    if (generation !== hist.generation) return;
    if (page.error) {
      setNote(`The server could not read older history: ${cleanText(page.error.message || page.error.code)}`, "error");
    } else {
      const have = new Set(hist.entries.map((e) => String(e.version)));
      hist.entries.push(...(page.ops ?? []).filter((e) => !have.has(String(e.version))));
      hist.next = Number(page.next ?? 0);
    }
  } catch (error) {
    setNote(`History is not available now: ${error.message}`, "error");
  }
  renderHistory();
}

/** The history shows only what is stored, so it may lag an Applied a little: read it soon after. */
function scheduleHistoryRefresh(delay = 300) {
  if (!hist.open) return;
  clearTimeout(hist.refreshTimer);
  hist.refreshTimer = setTimeout(loadHistory, delay);
}

function openHistory() {
  hist.open = true;
  $("history").hidden = false;
  $("history-toggle").setAttribute("aria-expanded", "true");
  document.body.dataset.history = "open";
  renderHistory();
  loadHistory();
  $("history-close").focus();
}

function closeHistory() {
  hist.open = false;
  hist.confirming = null;
  clearTimeout(hist.refreshTimer);
  $("history").hidden = true;
  $("history-toggle").setAttribute("aria-expanded", "false");
  document.body.dataset.history = "closed";
}

function button(text, action, data = {}) {
  const el = document.createElement("button");
  el.type = "button";
  el.textContent = text;
  el.dataset.action = action;
  for (const [k, v] of Object.entries(data)) el.dataset[k] = v;
  return el;
}

function when(at) {
  const el = document.createElement("time");
  el.className = "when";
  if (at) {
    el.dateTime = at;
    const t = new Date(at);
    el.title = Number.isNaN(t.getTime()) ? cleanText(at) : t.toLocaleString();
  }
  el.textContent = relativeTime(at) || "time not kept";
  return el;
}

/**
 * The summaries of `entries` (newest first) with tab ids shown as titles: each entry names a tab by
 * its title just before that entry, as the loaded entries (oldest first) tell it; a tab they do not
 * name yet is named by its title now, or as it was closed.
 */
function readableSummaries(entries) {
  const fallback = new Map();
  const known = (tab) => (tab?.id && (tab.title || tab.url) ? [tab.id, tab.title || tab.url] : null);
  for (const tab of [...client.state.tabs, ...hist.closed.map((c) => c.tab)]) {
    const kv = known(tab);
    if (kv && !fallback.has(kv[0])) fallback.set(...kv);
  }
  const running = new Map();
  const titles = { get: (id) => running.get(id) ?? fallback.get(id) };
  const out = new Array(entries.length);
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i];
    out[i] = readableSummary(e.summary ?? "", titles);
    const op = e.op ?? {};
    for (const tab of [op.add?.tab, op.open?.tab, ...(op.replace?.tabs ?? []), ...(op.restore?.state?.tabs ?? [])]) {
      const kv = known(tab);
      if (kv) running.set(...kv);
    }
    if (op.update?.tabId && op.update.title) running.set(op.update.tabId, op.update.title);
  }
  return out;
}

/**
 * The server's one-line summary with the tab ids it names shown as their titles where the drawer
 * knows them ("closed t-x1" → "closed “Docs”"): only whole words after the verb, so a title or a
 * quoted text is never rewritten.
 */
export function readableSummary(summary, titles) {
  const words = String(summary).split(" ");
  return words.map((word, i) => {
    if (i === 0) return word;
    const m = /^(.+?)([:,;]?)$/.exec(word);
    const title = m && titles.get(m[1]);
    return title ? `“${title}”${m[2]}` : word;
  }).join(" ");
}

function renderHistory() {
  if (!hist.open) return;
  const drawer = $("history");
  // The element with the focus is drawn again: give the focus back to its new copy.
  const focused = drawer.contains(document.activeElement) ? document.activeElement.dataset : null;
  const focusKey = focused?.action ? `${focused.action}|${focused.version ?? focused.id ?? ""}` : null;
  hist.shownVersion = client.confirmed.version;

  const note = $("history-note");
  note.hidden = !hist.note;
  note.textContent = hist.note;
  note.className = "history-note" + (hist.noteKind ? " " + hist.noteKind : "");

  const closedList = $("closed-list");
  closedList.replaceChildren();
  for (const c of hist.closed) {
    const tab = c.tab ?? {};
    const li = document.createElement("li");
    li.dataset.id = tab.id ?? "";
    const text = document.createElement("div");
    text.className = "entry-text";
    const title = document.createElement("div");
    title.className = "entry-title";
    if (tab.icon) title.append(span("icon", cleanText(tab.icon) + " "));
    title.append(span("title", cleanText(tab.title) || cleanText(tab.url) || tab.id));
    text.append(title);
    if (tab.url) text.append(span("entry-url muted", cleanText(tab.url)));
    const meta = document.createElement("div");
    meta.className = "entry-meta muted";
    meta.append(`closed by ${cleanText(c.author) || "the server"} · `, when(c.at));
    text.append(meta);
    const reopen = button("Reopen", "reopen", { id: tab.id ?? "" });
    const busy = hist.waiting?.kind === "reopen" && hist.waiting.target === tab.id;
    // aria-disabled, not disabled: a disabled button drops the focus.
    if (busy) { reopen.setAttribute("aria-disabled", "true"); reopen.textContent = "Reopening…"; }
    li.append(text, reopen);
    closedList.append(li);
  }
  if (!hist.closed.length) closedList.append(span("muted empty", "No tab closed recently."));

  const timeline = $("timeline");
  timeline.replaceChildren();
  const summaries = readableSummaries(hist.entries);
  hist.entries.forEach((e, index) => {
    const version = Number(e.version);
    const li = document.createElement("li");
    li.dataset.version = String(version);
    const text = document.createElement("div");
    text.className = "entry-text";
    const summary = span("entry-title summary", cleanText(summaries[index]) || Object.keys(e.op ?? {})[0] || "change");
    summary.title = cleanText(e.summary);
    text.append(summary);
    const meta = document.createElement("div");
    meta.className = "entry-meta muted";
    meta.append(`${cleanText(e.author) || "the server"} · `, when(e.at), ` · v${version}`);
    text.append(meta);
    li.append(text);
    if (version === client.confirmed.version) {
      li.classList.add("current");
      li.append(span("current-mark", "now"));
    } else if (hist.confirming === version) {
      li.classList.add("confirming");
      const ask = document.createElement("div");
      ask.className = "confirm";
      ask.setAttribute("role", "group");
      ask.setAttribute("aria-label", `Restore to version ${version}?`);
      ask.append(span("confirm-text", `Put every tab back as it was after this change (v${version})? ` +
        "What came after stays in the history."),
        button("Restore", "confirm-restore", { version: String(version) }),
        button("Cancel", "cancel-restore", { version: String(version) }));
      ask.querySelector('[data-action="confirm-restore"]').classList.add("danger");
      li.append(ask);
    } else {
      const restore = button("Restore to here", "restore", { version: String(version) });
      if (hist.waiting?.kind === "restore") restore.setAttribute("aria-disabled", "true");
      li.append(restore);
    }
    timeline.append(li);
  });
  if (!hist.entries.length) timeline.append(span("muted empty", "No history yet."));
  $("history-older").hidden = !hist.next;

  if (focusKey) {
    const [action, target] = focusKey.split("|");
    const again = [...drawer.querySelectorAll(`[data-action="${action}"]`)]
      .find((el) => (el.dataset.version ?? el.dataset.id ?? "") === target);
    (again ?? $("history-close")).focus();
  }
}

$("history-toggle").addEventListener("click", () => (hist.open ? closeHistory() : openHistory()));
$("history-close").addEventListener("click", () => { closeHistory(); $("history-toggle").focus(); });
$("history-refresh").addEventListener("click", () => { setNote(""); loadHistory(); });
$("history-older").addEventListener("click", loadOlder);
$("history").addEventListener("click", (e) => {
  const el = e.target.closest("button[data-action]");
  if (!el || el.getAttribute("aria-disabled") === "true") return;
  const version = Number(el.dataset.version);
  switch (el.dataset.action) {
    case "restore":
      hist.confirming = version;
      renderHistory();
      $("history").querySelector('[data-action="confirm-restore"]')?.focus();
      break;
    case "cancel-restore":
      hist.confirming = null;
      renderHistory();
      $("history").querySelector(`[data-action="restore"][data-version="${version}"]`)?.focus();
      break;
    case "confirm-restore":
      hist.confirming = null;
      hist.waiting = { kind: "restore", target: version, entry: client.restore(version) };
      setNote(`Restoring to v${version}…`);
      renderHistory();
      break;
    case "reopen": {
      const id = el.dataset.id;
      hist.waiting = { kind: "reopen", target: id, entry: client.reopen(id) };
      setNote("Reopening…");
      renderHistory();
      break;
    }
  }
});
$("history").addEventListener("keydown", (e) => {
  if (e.key !== "Escape") return;
  e.stopPropagation();
  if (hist.confirming !== null) {
    const version = hist.confirming;
    hist.confirming = null;
    renderHistory();
    $("history").querySelector(`[data-action="restore"][data-version="${version}"]`)?.focus();
  } else {
    closeHistory();
    $("history-toggle").focus();
  }
});

client.addEventListener("applied", (event) => {
  const { applied } = event.detail;
  const w = hist.waiting;
  if (w && applied.clientId === client.clientId && Number(applied.seq) === w.entry.seq) {
    hist.waiting = null;
    if (w.kind === "restore") setNote(`Restored to v${w.target} (now v${applied.version}).`, "ok");
    else {
      const tab = applied.op?.add?.tab;
      setNote(`Reopened ${tab ? `“${cleanText(tab.title) || cleanText(tab.url) || tab.id}”` : w.target}.`, "ok");
    }
  }
  scheduleHistoryRefresh();
});
client.addEventListener("rejected", (event) => {
  const { code, message, op } = event.detail;
  const kind = Object.keys(op ?? {})[0];
  if (kind !== "restore" && kind !== "reopen") return;
  if (hist.waiting?.kind === kind) hist.waiting = null;
  setNote(`The server refused to ${kind}: ${cleanText(message) || code}`, "error");
  renderHistory();
});
client.addEventListener("status", () => { if (client.status === "connected") scheduleHistoryRefresh(0); });
client.addEventListener("change", () => { if (hist.open && hist.shownVersion !== client.confirmed.version) renderHistory(); });
setInterval(() => { if (hist.open) renderHistory(); }, 30000);

// ------------------------------------------------------------------ input

const tabsEl = $("tabs");

tabsEl.addEventListener("pointerdown", (e) => {
  const el = e.target.closest(".tab");
  if (!el || e.button !== 0) return;
  el.setPointerCapture(e.pointerId);
  ui.drag = { id: el.dataset.id, el, pointerId: e.pointerId, startX: e.clientX, started: false, index: null };
});

tabsEl.addEventListener("pointermove", (e) => {
  const drag = ui.drag;
  if (!drag || e.pointerId !== drag.pointerId) return;
  const dx = e.clientX - drag.startX;
  if (!drag.started && Math.abs(dx) < 6) return;
  drag.started = true;
  drag.el.classList.add("dragging");
  drag.el.style.transform = `translateX(${dx}px)`;
  // The drop index among the other tabs: before the first visible tab whose middle is right of the pointer.
  const others = client.state.tabs.filter((t) => t.id !== drag.id);
  const visible = [...tabsEl.querySelectorAll(".tab:not(.hidden-overflow)")].filter((el) => el !== drag.el);
  let marker = tabsEl.querySelector(".drop-marker");
  if (!marker) { marker = document.createElement("div"); marker.className = "drop-marker"; tabsEl.append(marker); }
  // Over a group's chip: the tab joins that group (after its last tab) when dropped.
  const chip = document.elementsFromPoint(e.clientX, e.clientY).find((el) => el.classList?.contains("group-chip"));
  drag.group = chip?.dataset.group ?? null;
  tabsEl.querySelectorAll(".group-chip.drop-target").forEach((el) => el.classList.remove("drop-target"));
  chip?.classList.add("drop-target");
  marker.hidden = Boolean(chip);
  const target = visible.find((el) => { const r = el.getBoundingClientRect(); return e.clientX < r.left + r.width / 2; });
  const box = tabsEl.getBoundingClientRect();
  if (target) {
    drag.index = others.findIndex((t) => t.id === target.dataset.id);
    marker.style.left = `${target.getBoundingClientRect().left - box.left - 2}px`;
  } else {
    const last = visible[visible.length - 1];
    drag.index = last ? others.findIndex((t) => t.id === last.dataset.id) + 1 : 0;
    marker.style.left = last ? `${last.getBoundingClientRect().right - box.left}px` : "0px";
  }
});

function endDrag(e, cancelled) {
  const drag = ui.drag;
  if (!drag || e.pointerId !== drag.pointerId) return;
  ui.drag = null;
  tabsEl.querySelector(".drop-marker")?.remove();
  if (!drag.started) {
    if (!cancelled) activate(drag.id);
    render();
    return;
  }
  tabsEl.querySelectorAll(".group-chip.drop-target").forEach((el) => el.classList.remove("drop-target"));
  if (!cancelled && drag.group) client.group([drag.id], drag.group);
  else if (!cancelled && drag.index !== null) moveTo(drag.id, drag.index);
  render();
}
tabsEl.addEventListener("pointerup", (e) => endDrag(e, false));
tabsEl.addEventListener("pointercancel", (e) => endDrag(e, true));

tabsEl.addEventListener("keydown", (e) => {
  const el = e.target.closest(".tab");
  if (!el) return;
  const id = el.dataset.id;
  const tabs = client.state.tabs;
  const index = tabs.findIndex((t) => t.id === id);
  const visible = [...tabsEl.querySelectorAll(".tab:not(.hidden-overflow)")];
  const at = visible.indexOf(el);
  if (e.ctrlKey && e.shiftKey && (e.key === "ArrowLeft" || e.key === "ArrowRight")) {
    e.preventDefault();
    const target = e.key === "ArrowLeft" ? index - 1 : index + 1;
    if (target >= 0 && target < tabs.length) moveTo(id, target);
    requestAnimationFrame(() => document.getElementById("tab-" + id)?.focus());
  } else if (e.key === "ArrowLeft" || e.key === "ArrowRight") {
    e.preventDefault();
    const next = visible[(at + (e.key === "ArrowLeft" ? -1 : 1) + visible.length) % visible.length];
    next?.focus();
  } else if (e.key === "Home" || e.key === "End") {
    e.preventDefault();
    (e.key === "Home" ? visible[0] : visible[visible.length - 1])?.focus();
  } else if (e.key === "Enter" || e.key === " ") {
    e.preventDefault();
    activate(id);
  } else if (e.key === "Delete") {
    e.preventDefault();
    client.remove(id);
  }
});

document.addEventListener("keydown", (e) => {
  const typing = ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement?.tagName);
  if (typing || e.ctrlKey || e.altKey || e.metaKey) return;
  if (e.key >= "1" && e.key <= "9") {
    const tab = client.state.tabs[Number(e.key) - 1];
    if (tab) { e.preventDefault(); activate(tab.id); }
  } else if (e.key === "Escape" && ui.menuOpen) {
    closeMenu();
    $("more").focus();
  } else if (e.key === "Escape" && hist.open) {
    closeHistory();
    $("history-toggle").focus();
  }
});

$("more").addEventListener("click", () => (ui.menuOpen ? closeMenu() : openMenu()));
$("more-menu").addEventListener("keydown", (e) => {
  const items = [...$("more-menu").querySelectorAll("[role=menuitem]")];
  const at = items.indexOf(document.activeElement);
  if (e.key === "ArrowDown" || e.key === "ArrowUp") {
    e.preventDefault();
    items[(at + (e.key === "ArrowDown" ? 1 : -1) + items.length) % items.length]?.focus();
  } else if (e.key === "Enter" || e.key === " ") {
    e.preventDefault();
    document.activeElement?.click();
  }
});
document.addEventListener("click", (e) => {
  if (ui.menuOpen && !e.target.closest(".more-wrap")) closeMenu();
});

$("add").addEventListener("click", () => addTab({ title: "New tab" }));
$("add-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const position = $("add-position").value ? Number($("add-position").value) : null;
  addTab({ title: $("add-title").value, url: $("add-url").value, icon: $("add-icon").value, position });
  $("add-form").reset();
});
$("edit").addEventListener("submit", (e) => {
  e.preventDefault();
  const tab = client.state.tabs.find((t) => t.id === client.state.activeTabId);
  if (!tab) return;
  const fields = {};
  for (const f of ["title", "icon", "badge"]) {
    const value = $("edit-" + f).value;
    if (value !== tab[f]) fields[f] = value;
  }
  if (Object.keys(fields).length) client.update(tab.id, fields);
});
$("lock").addEventListener("click", () => {
  const tab = client.state.tabs.find((t) => t.id === client.state.activeTabId);
  if (tab) client.update(tab.id, { locked: !tab.locked });
});
$("close-tab").addEventListener("click", () => {
  if (client.state.activeTabId) client.remove(client.state.activeTabId);
});
$("readonly").addEventListener("change", (e) => client.setEditable(!e.target.checked));
$("edit-group").addEventListener("change", (e) => {
  if (client.state.activeTabId) setGroup(client.state.activeTabId, e.target.value);
});
$("group-color").replaceChildren(...GROUP_COLORS.map((c) => {
  const option = document.createElement("option");
  option.value = c;
  option.textContent = c;
  return option;
}));
$("group-edit").addEventListener("submit", (e) => {
  e.preventDefault();
  const active = client.state.tabs.find((t) => t.id === client.state.activeTabId);
  const group = client.state.groups.find((g) => g.id === active?.group);
  if (!group) return;
  const title = $("group-title").value;
  const color = $("group-color").value;
  const change = {};
  if (title !== group.title) change.title = title;
  if (color !== group.color) change.color = color;
  if (Object.keys(change).length) client.updateGroup(group.id, change);
});
$("group-color").addEventListener("change", () => $("group-edit").requestSubmit());

function applyPosition(bottom) {
  document.body.classList.toggle("bar-bottom", bottom);
  document.body.classList.toggle("bar-top", !bottom);
  $("position").textContent = bottom ? "Bar at the top" : "Bar at the bottom";
  try { localStorage.setItem("tabsync.bar", bottom ? "bottom" : "top"); } catch { /* private mode */ }
}
$("position").addEventListener("click", () => applyPosition(!document.body.classList.contains("bar-bottom")));
applyPosition((params.get("bar") || (() => { try { return localStorage.getItem("tabsync.bar"); } catch { return null; } })()) === "bottom");

render();
client.connect();
