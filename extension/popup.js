// The popup: binds its window (or the one named by ?window=ID) and shows the binding's status,
// why it stopped, who is here and which tab each one views. Everything the network sent is put
// on the page with textContent, never as HTML.

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

async function findBinding() {
  const { bindings = {} } = await chrome.storage.local.get("bindings");
  const binding = Object.values(bindings).find((b) => b.windowId === windowId);
  if (!binding) return { binding: null, status: null };
  const key = `status:${binding.id}`;
  return { binding, status: (await chrome.storage.session.get(key))[key] ?? null };
}

function explain(rejection) {
  if (!rejection) return "";
  const what = rejection.title ? `“${rejection.title}”` : "a tab";
  const reasons = {
    LOCKED: `${what} is locked in the workspace: your ${rejection.kind} was rolled back`,
    NOT_EDITABLE: `the workspace is read-only: your ${rejection.kind} was rolled back`,
    NOT_PERMITTED: `your token may only view: your ${rejection.kind} was rolled back`,
    TAB_GONE: `${what} was closed by someone else first`,
    RATE_LIMITED: "too many changes at once: they are being sent more slowly",
    LIMIT_EXCEEDED: `the workspace is full: your ${rejection.kind} was rolled back`,
  };
  return reasons[rejection.code] ?? `the server refused a ${rejection.kind} (${rejection.code}: ${rejection.message})`;
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
  const why = s.stopped || (s.status === "attaching" && binding.attach === "reattach" ? "the bound window is closed" : "")
    || (s.rejection && Date.now() - s.rejection.at < 60_000 ? explain(s.rejection) : "");
  $("why").hidden = !why;
  $("why").textContent = why;
  $("reopen").hidden = !(binding.attach === "reattach" || s.stopped);
  $("reopen").textContent = s.stopped ? "Try again" : "Reopen window";
  const peers = $("peers");
  peers.replaceChildren(...(s.peers ?? []).map((p) => {
    const li = text("li", p.name);
    li.append(text("span", p.title ? ` views “${p.title}”` : " views nothing", "dim"));
    return li;
  }));
  if ((s.peers ?? []).length === 0) peers.append(text("li", "nobody else", "dim"));
  $("peer-count").textContent = `(${(s.peers ?? []).length} others)`;
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

/** Bindings whose window was closed: reopen them (here or in a new window) or forget them. */
async function renderDetached() {
  const { bindings = {} } = await chrome.storage.local.get("bindings");
  const windows = new Set((await chrome.windows.getAll()).map((w) => w.id));
  const detached = Object.values(bindings).filter((b) => !windows.has(b.windowId));
  $("detached").hidden = detached.length === 0;
  $("detached-list").replaceChildren(...detached.map((b) => {
    const li = text("li", `${b.workspace} on ${b.server} `);
    const reopen = text("button", "Reopen");
    reopen.addEventListener("click", () => send({ type: "reopen", bindingId: b.id }));
    const forget = text("button", "Forget");
    forget.addEventListener("click", async () => { await send({ type: "unbind", bindingId: b.id }); render(); });
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

async function main() {
  windowId = params.has("window") ? Number(params.get("window")) : (await chrome.windows.getCurrent()).id;
  const win = await chrome.windows.get(windowId).catch(() => null);
  $("window-label").textContent = win ? `window ${windowId}${win.incognito ? " (private)" : ""}` : "no window";
  $("incognito-row").hidden = !win?.incognito;
  const saved = (await chrome.storage.local.get("lastForm")).lastForm ?? {};
  for (const f of ["server", "workspace", "name", "mode"]) if (saved[f]) $(f).value = saved[f];
  $("bind-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = { server: $("server").value, workspace: $("workspace").value, name: $("name").value, mode: $("mode").value };
    await chrome.storage.local.set({ lastForm: form });
    await send({ type: "bind", windowId, ...form, token: $("token").value, incognito: $("incognito").checked });
    render();
  });
  $("unbind").addEventListener("click", async () => {
    if (current) await send({ type: "unbind", bindingId: current.bindingId });
    render();
  });
  $("reopen").addEventListener("click", () => current && send({ type: "reopen", bindingId: current.bindingId }));
  $("bound-mode").addEventListener("change", () => current && send({ type: "mode", bindingId: current.bindingId, mode: $("bound-mode").value }));
  chrome.storage.onChanged.addListener(() => render());
  await render();
}

main();
