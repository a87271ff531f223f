// A browser as values, for node tests of the extension's modules that call the browser
// (binding-mirror.js, requests.js, registry.js): windows of tabs, storage areas and the few
// chrome.* calls those modules make, carried out plainly in memory. It fires no events (the
// tests call what background.js's listeners would). `slowCreate(ms)` makes each tab open take
// that long, as a loaded machine does, so a pass can be caught in flight.

const BASE = "chrome-extension://ext/";

export class BrowserWorld {
  constructor() {
    this.tabs = []; // { id, windowId, index, url, title, status, active, pinned }
    this.windows = new Set();
    this.nextId = 100;
    this.createDelay = 0;
    this.created = 0; // tabs opened through the API
    const area = () => {
      const data = new Map();
      return {
        data,
        get: async (keys) => {
          const names = keys === null || keys === undefined ? [...data.keys()] : typeof keys === "string" ? [keys] : Array.isArray(keys) ? keys : Object.keys(keys);
          return Object.fromEntries(names.filter((k) => data.has(k)).map((k) => [k, structuredClone(data.get(k))]));
        },
        set: async (items) => { for (const [k, v] of Object.entries(items)) data.set(k, structuredClone(v)); },
        remove: async (keys) => { for (const k of [keys].flat()) data.delete(k); },
      };
    };
    const world = this;
    const ok = async () => {};
    this.api = {
      runtime: { getURL: (path) => BASE + path, getPlatformInfo: async () => ({ os: "linux" }) },
      extension: { isAllowedIncognitoAccess: async () => false },
      storage: { local: area(), session: area() },
      alarms: { get: async () => undefined, create: () => {}, clear: async () => true },
      action: { setBadgeText: ok, setBadgeBackgroundColor: ok, setTitle: ok },
      windows: {
        get: async (id) => { if (!world.windows.has(id)) throw new Error(`no window ${id}`); return { id, incognito: false, type: "normal" }; },
        getAll: async () => [...world.windows].map((id) => ({ id, incognito: false, type: "normal" })),
        create: async ({ url = [] } = {}) => {
          const id = world.nextId++;
          world.windows.add(id);
          for (const u of [url].flat()) world.open(id, u);
          return { id, incognito: false, type: "normal" };
        },
      },
      tabs: {
        query: async ({ windowId, active } = {}) => {
          if (windowId !== undefined && !world.windows.has(windowId)) throw new Error(`no window ${windowId}`);
          return world.tabs.filter((t) => (windowId === undefined || t.windowId === windowId) && (active === undefined || t.active === active)).map((t) => ({ ...t }));
        },
        get: async (id) => { const t = world.tab(id); if (!t) throw new Error(`no tab ${id}`); return { ...t }; },
        create: async ({ windowId, index, url, active = false }) => {
          if (world.createDelay > 0) await new Promise((r) => setTimeout(r, world.createDelay));
          world.created += 1;
          return { ...world.open(windowId, url, index, active) };
        },
        remove: async (ids) => { world.close([ids].flat()); },
        move: async (id, { index }) => {
          const t = world.tab(id);
          if (!t) throw new Error(`no tab ${id}`);
          const strip = world.strip(t.windowId).filter((x) => x !== t);
          strip.splice(Math.min(index < 0 ? strip.length : index, strip.length), 0, t);
          world.reindex(t.windowId, strip);
          return { ...t };
        },
        update: async (id, { active, url }) => {
          const t = world.tab(id);
          if (!t) throw new Error(`no tab ${id}`);
          if (active) for (const x of world.strip(t.windowId)) x.active = x === t;
          if (url) { t.url = url; t.title = titleOf(url); }
          return { ...t };
        },
      },
    };
  }

  /** A window of pages `urls`, the first active; returns its id. */
  window(urls) {
    const id = this.nextId++;
    this.windows.add(id);
    urls.forEach((u, i) => this.open(id, u, i, i === 0));
    return id;
  }

  /** Opens page `url` in window `windowId` at `index` (the end if none), as a user would. */
  open(windowId, url, index, active = false) {
    const t = { id: this.nextId++, windowId, index: 0, url, title: titleOf(url), status: "complete", active, pinned: false };
    const strip = this.strip(windowId);
    strip.splice(index === undefined ? strip.length : Math.min(index, strip.length), 0, t);
    this.tabs.push(t);
    this.reindex(windowId, strip);
    return t;
  }

  close(ids) {
    const windows = new Set(this.tabs.filter((t) => ids.includes(t.id)).map((t) => t.windowId));
    this.tabs = this.tabs.filter((t) => !ids.includes(t.id));
    for (const w of windows) this.reindex(w, this.strip(w));
  }

  tab(id) {
    return this.tabs.find((t) => t.id === id);
  }

  strip(windowId) {
    return this.tabs.filter((t) => t.windowId === windowId).sort((a, b) => a.index - b.index);
  }

  reindex(windowId, strip) {
    strip.forEach((t, i) => { t.index = i; });
  }

  slowCreate(ms) {
    this.createDelay = ms;
  }
}

/** A page's title: its last path segment (a placeholder's `title` parameter). */
function titleOf(url) {
  if (url.startsWith(BASE)) return new URLSearchParams(url.split("?")[1] ?? "").get("title") ?? url;
  return url.split("/").pop();
}
