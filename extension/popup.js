// The popup: binds its window (or the one named by ?window=ID) and shows the binding's status,
// why it stopped, who is here and which tab each one views. Everything the network sent is put
// on the page with textContent, never as HTML.

import { api as chrome } from "./browser-api.js";
import { bindingOffers } from "./welcome.js";

const params = new URLSearchParams(location.search);
let windowId = null;
let current = null; // the status of this window's binding, as the worker published it

const $ = (id) => document.getElementById(id);

function text(tag, value, className) {
  const el = document.createElement(tag);
  el.textContent = value;
  if (className) el.className = className;
  return el;
}

async function allBindings() {
  const { bindings = {} } = await chrome.storage.local.get("bindings");
  const { privateBindings = {} } = await chrome.storage.session.get("privateBindings");
  return { ...bindings, ...privateBindings };
}

async function findBinding() {
  const bindings = await allBindings();
  const binding = Object.values(bindings).find((b) => b.windowId === windowId && !b.closed);
  if (!binding) return { binding: null, status: null };
  const key = `status:${binding.id}`;
  return { binding, status: (await chrome.storage.session.get(key))[key] ?? null };
}

const WHY = {
  NOT_PERMITTED: "your token may only view this workspace",
  NOT_EDITABLE: "the workspace is read-only",
  LIMIT_EXCEEDED: "the workspace is full",
  INVALID_ARGUMENT: "the server refused it as invalid",
  LOCKED: "it is locked in the workspace",
};

/** What actually happened, in words: each refusal says what it did to the real tab (nothing). */
function explain(r) {
  if (!r) return "";
  const what = r.title ? `“${r.title}”` : "a tab";
  const why = WHY[r.code] ?? `the server refused it (${r.code}${r.message ? `: ${r.message}` : ""})`;
  if (r.retrying) {
    return r.code === "RATE_LIMITED" ? "too many changes at once: they are being sent again, more slowly"
      : "the server cannot store changes right now: they are kept and sent again";
  }
  switch (r.kind) {
    case "add": case "open":
      if (r.code === "TAB_EXISTS") return `${what} is in the workspace already`;
      return `${what} stays open in this window only: ${why}`;
    case "replace": return `this window's tabs stay open here only: ${why}`;
    case "remove":
      if (r.code === "TAB_GONE") return `${what} was already closed by someone else`;
      if (r.code === "LOCKED") return `${what} is locked in the workspace: it was opened again`;
      return `${what} was closed in this window only: ${why}`;
    case "move": case "update": case "activate":
      if (r.code === "TAB_GONE") return `${what} was closed by someone else first: your ${r.kind} did nothing`;
      if (r.code === "LOCKED") return `${what} is locked in the workspace: your ${r.kind} was undone`;
      return `your ${r.kind} of ${what} was undone: ${why}`;
    case "reopen": return `${what} could not be reopened: ${r.message || why} (${r.code})`;
    default: return `the server refused a ${r.kind} (${r.code}${r.message ? `: ${r.message}` : ""})`;
  }
}

async function render() {
  const { binding, status } = await findBinding();
  current = status;
  const bound = Boolean(binding);
  $("bind-form").hidden = bound;
  $("bound").hidden = !bound;
  if (!bound) {
    document.body.dataset.status = "unbound";
    await renderDetached();
    return;
  }
  $("detached").hidden = true;
  const s = status ?? { status: "connecting", peers: [], tabs: [] };
  document.body.dataset.status = s.status;
  document.body.dataset.version = String(s.version ?? 0);
  document.body.dataset.pending = String(s.pending ?? 0);
  $("status").textContent = s.status;
  $("status").className = `status ${s.status}`;
  $("ws-name").textContent = `${binding.workspace} on ${binding.server}`;
  $("version").textContent = `v${s.version ?? 0}`;
  $("bound-mode").value = binding.mode;
  $("shared-group").hidden = !s.group;
  $("group-chip").textContent = s.group?.title ?? "";
  $("group-chip").dataset.color = s.group?.color ?? "";
  const why = s.stopped || s.paused?.reason || (binding.closed ? "the bound window is closed" : "")
    || (s.rejection && Date.now() - s.rejection.at < 60_000 ? explain(s.rejection) : "");
  $("why").hidden = !why;
  $("why").textContent = why;
  const note = s.viewOnly === "viewer" ? "read-only mirror: your token may only view; tabs you open here stay in this window"
    : s.viewOnly ? "read-only mirror: the workspace is read-only; tabs you open here stay in this window"
    : (s.retrying ? `${s.retrying} change(s) waiting to be sent again` : "");
  $("note").hidden = !note;
  $("note").textContent = note;
  $("pause-actions").hidden = !s.paused;
  $("use-server").textContent = s.paused?.kind === "brake" ? "Close them" : "Open the server's version (new window)";
  const offers = bindingOffers({ ...binding, stopped: s.stopped || binding.stopped, deleted: s.deleted || binding.deleted });
  $("reopen").hidden = !(offers.retry || offers.reopen);
  $("reopen").textContent = offers.retry ? "Try again" : "Reopen window";
  $("bind-new").hidden = !offers.bindNew;
  $("bound-mode").hidden = offers.bindNew; // nothing to follow in a deleted workspace
  $("token-again").hidden = !(offers.retry && /token/.test(s.stopped));
  const local = s.localOnly ?? [];
  $("local-only").hidden = local.length === 0;
  $("local-list").replaceChildren(...local.map((t) => {
    const li = text("li", t.title || "(untitled)");
    li.dataset.tabId = String(t.tabId);
    li.append(text("span", ` — ${t.reason}`, "dim"));
    if (t.code !== "pinned") {
      // Share: its add is sent again (the workspace may have room again, the token may have changed).
      const share = text("button", "Share", "share");
      share.addEventListener("click", () => send({ type: "share", bindingId: s.bindingId, tabId: t.tabId }));
      li.append(" ", share);
    }
    return li;
  }));
  refreshClosed(s);
  const peers = $("peers");
  peers.replaceChildren(...(s.peers ?? []).map((p) => {
    const li = text("li", p.name);
    li.append(text("span", p.title ? ` views “${p.title}”` : " views nothing", "dim"));
    return li;
  }));
  if ((s.peers ?? []).length === 0) peers.append(text("li", "nobody else", "dim"));
  const n = (s.peers ?? []).length;
  $("peer-count").textContent = `(${n} ${n === 1 ? "other" : "others"})`;
  const viewers = new Map();
  for (const p of s.peers ?? []) viewers.set(p.tabId, [...(viewers.get(p.tabId) ?? []), p.name]);
  $("tabs").replaceChildren(...(s.tabs ?? []).map((t) => {
    const li = text("li", t.title || "(untitled)");
    li.dataset.id = t.id;
    if (t.id === s.activeTabId) li.classList.add("active");
    if (t.badge) li.append(text("span", t.badge, "badge"));
    if (t.locked) li.append(text("span", " 🔒", "dim"));
    if (viewers.has(t.id)) li.append(text("span", `← ${viewers.get(t.id).join(", ")}`, "viewers"));
    return li;
  }));
}

// ------------------------------------------------------------------ Recently closed

let closedFor = ""; // the binding, version and role the list was last asked for
let closedAsking = false;
let settleTimer = null;
const closedKey = (s) => `${s.bindingId}|${s.version}|${s.status}|${s.viewOnly}`;

/** How long ago `at` (RFC 3339) was, in words. */
function ago(at) {
  const ms = Date.now() - Date.parse(at);
  if (!Number.isFinite(ms)) return "";
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(at).toLocaleDateString();
}

/** Asks the worker for the workspace's recently closed tabs when the workspace changed since. */
async function refreshClosed(s, force = false) {
  const key = closedKey(s);
  if (!s.bindingId || s.status !== "connected") { $("recently-closed").hidden = true; closedFor = ""; return; }
  if (closedAsking || (!force && key === closedFor)) return;
  closedAsking = true;
  closedFor = key;
  try {
    const reply = await chrome.runtime.sendMessage({ type: "history", bindingId: s.bindingId, limit: 10 });
    showClosed(s, reply ?? {});
  } catch (error) {
    showClosed(s, { error: `could not list the closed tabs: ${error?.message ?? error}` });
  } finally {
    closedAsking = false;
  }
  // The workspace moved on while the answer was coming: ask again for the newest.
  if (current && closedKey(current) !== closedFor) { refreshClosed(current); return; }
  // An answer shows only what is durable, so it may lag the Applied just received: once the
  // workspace has rested at this version a moment, it is asked once more.
  if (!force) {
    clearTimeout(settleTimer);
    settleTimer = setTimeout(() => { if (current && closedKey(current) === key) refreshClosed(current, true); }, 1500);
  }
}

function showClosed(s, reply) {
  const list = $("closed-list");
  $("recently-closed").hidden = false;
  if (reply.error) { list.replaceChildren(text("li", reply.error, "dim")); return; }
  const closed = reply.closed ?? [];
  if (closed.length === 0) { list.replaceChildren(text("li", reply.note || "nothing closed lately", "dim")); return; }
  list.replaceChildren(...closed.map((c) => {
    const li = document.createElement("li");
    li.dataset.tabId = c.tabId;
    const head = text("div", c.title || c.url || "(untitled)", "closed-title");
    const meta = [c.author ? `closed by ${c.author}` : "closed", ago(c.at)].filter(Boolean).join(", ");
    li.append(head, text("div", c.url, "dim closed-url"), text("div", meta, "dim closed-meta"));
    if (reply.canReopen && !s.viewOnly) {
      // Reopen: the server brings the tab back as an add, which this window opens like any other.
      const button = text("button", "Reopen", "reopen-tab");
      button.addEventListener("click", async () => {
        button.disabled = true;
        const answer = await send({ type: "reopenTab", bindingId: s.bindingId, tabId: c.tabId, title: c.title });
        if (answer?.error || answer?.refused) button.disabled = false;
        if (current) refreshClosed(current, true);
      });
      li.append(button);
    }
    return li;
  }));
}

/** Bindings whose window was closed: reopen them (here or in a new window) or forget them. */
async function renderDetached() {
  const bindings = await allBindings();
  const windows = new Set((await chrome.windows.getAll()).map((w) => w.id));
  const detached = Object.values(bindings).filter((b) => b.closed || !windows.has(b.windowId));
  $("detached").hidden = detached.length === 0;
  $("detached-list").replaceChildren(...detached.map((b) => {
    const li = text("li", `${b.workspace} on ${b.server} `);
    const forget = text("button", "Forget");
    forget.addEventListener("click", async () => { await send({ type: "unbind", bindingId: b.id }); render(); });
    if (bindingOffers(b).bindNew) {
      li.append(text("span", "(deleted on the server) ", "dim"), forget); // never reopened: that would make it again
      return li;
    }
    const reopen = text("button", "Reopen");
    reopen.addEventListener("click", () => send({ type: "reopen", bindingId: b.id }));
    li.append(reopen, " ", forget);
    return li;
  }));
}

async function send(request) {
  const reply = await chrome.runtime.sendMessage(request);
  if (reply?.error) {
    $("error").hidden = false;
    $("error").textContent = reply.error;
  } else {
    $("error").hidden = true;
  }
  return reply;
}

/** The form's "Bind" choice: the whole window, a new group, or one of the window's groups (a shared group). */
async function listGroups() {
  const groups = await chrome.tabGroups?.query({ windowId }).catch(() => null);
  $("group-row").hidden = !groups;
  for (const g of groups ?? []) {
    const option = document.createElement("option");
    option.value = String(g.id);
    option.textContent = `the group “${g.title || "(untitled)"}” (${g.color})`;
    $("group").append(option);
  }
  $("group").addEventListener("change", () => { $("bind").textContent = $("group").value ? "Bind this group" : "Bind this window"; });
}

async function main() {
  windowId = params.has("window") ? Number(params.get("window")) : (await chrome.windows.getCurrent()).id;
  const win = await chrome.windows.get(windowId).catch(() => null);
  $("window-label").textContent = win ? `window ${windowId}${win.incognito ? " (private)" : ""}` : "no window";
  $("incognito-row").hidden = !win?.incognito;
  await listGroups();
  const saved = (await chrome.storage.local.get("lastForm")).lastForm ?? {};
  for (const f of ["server", "workspace", "name", "mode"]) if (saved[f]) $(f).value = saved[f];
  $("bind-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = { server: $("server").value, workspace: $("workspace").value, name: $("name").value, mode: $("mode").value };
    if (!win?.incognito) await chrome.storage.local.set({ lastForm: form }); // nothing of a private window on disk
    await send({ type: "bind", windowId, ...form, token: $("token").value, remember: $("remember").checked, incognito: $("incognito").checked, group: $("group").value });
    render();
  });
  $("unbind").addEventListener("click", async () => {
    if (current) await send({ type: "unbind", bindingId: current.bindingId });
    render();
  });
  $("bind-new").addEventListener("click", async () => {
    // The deleted binding goes (the tabs stay); the form comes back for this window, the server
    // filled in and the workspace empty, so the user names another one (or the same, on purpose).
    if (!current) return;
    // The fields first: the unbind's storage change renders the form at once (onChanged), and it
    // must not show the deleted workspace's name, even for a moment.
    $("server").value = current.server;
    $("workspace").value = "";
    await send({ type: "unbind", bindingId: current.bindingId });
    await render();
    $("workspace").focus();
  });
  $("reopen").addEventListener("click", () => current && send({ type: "reopen", bindingId: current.bindingId, token: $("token2").value }));
  $("publish-again").addEventListener("click", () => current && send({ type: "resolve", bindingId: current.bindingId, choice: "publish" }));
  $("use-server").addEventListener("click", () => current && send({ type: "resolve", bindingId: current.bindingId, choice: "server" }));
  $("bound-mode").addEventListener("change", () => current && send({ type: "mode", bindingId: current.bindingId, mode: $("bound-mode").value }));
  chrome.storage.onChanged.addListener(() => render());
  await render();
}

main();
