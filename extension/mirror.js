// Pure helpers of the extension's reconcile loop (no chrome.* here, so node can test them):
// what a real tab says about its workspace tab, and the order arithmetic.

/** Unicode scalars (code points) a workspace title may hold (DESIGN: Model). */
export const MAX_TITLE = 256;
export const MAX_BADGE = 16;
export const MAX_URL_BYTES = 4096;

// Control characters the protocol refuses (U+0000–U+001F, U+007F–U+009F).
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

/** `text` without control characters (each becomes a space, runs collapsed), at most `max` scalars. */
export function cleanText(text, max) {
  const clean = String(text ?? "").replace(CONTROL, " ").replace(/ {2,}/g, " ").trim();
  return Array.from(clean).slice(0, max).join("");
}

/**
 * What a real tab gives its workspace tab: `title` (a leading "(N) " taken off into `badge`, as
 * pages count unread items), `badge` ("" for none), and `url` (http or https only, else null:
 * an extension's placeholder, chrome://newtab or a file never reaches the workspace).
 */
export function tabFields(tab) {
  let title = cleanText(tab.title ?? "", 4 * MAX_TITLE);
  let badge = "";
  const counted = /^\((\d{1,15}\+?)\)\s*(.*)$/.exec(title);
  if (counted) {
    badge = counted[1];
    title = counted[2];
  }
  const raw = tab.url || tab.pendingUrl || "";
  const url = /^https?:\/\//i.test(raw) && new TextEncoder().encode(raw).length <= MAX_URL_BYTES ? raw : null;
  return { title: cleanText(title, MAX_TITLE), badge: cleanText(badge, MAX_BADGE), url };
}

/**
 * What a placeholder tab (placeholder.html, opened lazily or for a tab without a page) gives its
 * workspace tab: the title and URL of the page it stands for, from its query, never what the
 * browser shows for it (its own URL as the title). docs/extension.md: a placeholder's title is
 * never published.
 */
export function placeholderPage(tab) {
  let q;
  try {
    q = new URL(tab.url || tab.pendingUrl || "").searchParams;
  } catch {
    q = new URLSearchParams();
  }
  return tabFields({ title: q.get("title") ?? "", url: q.get("url") ?? "" });
}

/** What real tab `tab` gives its workspace tab: a placeholder (`placeholder`), the page it stands for. */
export function pageFields(tab, placeholder) {
  return placeholder ? placeholderPage(tab) : tabFields(tab);
}

/** A workspace tab id for a real tab: stable for that tab in this browser session, valid as an id. */
export function workspaceTabId(tag, nonce, chromeTabId) {
  return `x${tag}-${nonce}-${chromeTabId}`.replace(/[^A-Za-z0-9._:-]/g, "").slice(0, 64);
}

/** The elements of a longest common subsequence of `a` and `b` (arrays of strings), as a Set. */
export function lcsSet(a, b) {
  const n = a.length;
  const m = b.length;
  const table = Array.from({ length: n + 1 }, () => new Uint16Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      table[i][j] = a[i] === b[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
    }
  }
  const keep = new Set();
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { keep.add(a[i]); i++; j++; } else if (table[i + 1][j] >= table[i][j + 1]) i++; else j++;
  }
  return keep;
}

/**
 * The tabs a user moved: those of `now` (the real order) outside a longest common subsequence with
 * `before` (the order last synced), both restricted to the ids they share. In `now`'s order.
 */
export function movedTabs(before, now) {
  const common = new Set(before.filter((id) => now.includes(id)));
  const b = before.filter((id) => common.has(id));
  const n = now.filter((id) => common.has(id));
  const keep = lcsSet(b, n);
  return n.filter((id) => !keep.has(id));
}

/**
 * The chrome.tabs.move calls that turn `current` (real tab ids in window order, all of them) into
 * an order where the ids of `desired` appear in that order, moving only tabs outside a longest
 * common subsequence. `fixed` ids (pinned, not mirrored) are never moved and nothing goes before
 * them. Returns [{ id, index }] in call order (each index as chrome.tabs.move reads it).
 */
export function movesToOrder(current, desired, fixed = new Set()) {
  const cur = current.slice();
  const present = new Set(cur);
  const want = desired.filter((id) => present.has(id));
  const inCur = cur.filter((id) => want.includes(id));
  const keep = lcsSet(inCur, want);
  const moves = [];
  for (let j = 0; j < want.length; j++) {
    const id = want[j];
    if (keep.has(id)) continue;
    cur.splice(cur.indexOf(id), 1);
    let index;
    if (j > 0) {
      index = cur.indexOf(want[j - 1]) + 1;
    } else {
      const firstFree = cur.findIndex((x) => !fixed.has(x));
      index = firstFree < 0 ? cur.length : firstFree;
    }
    cur.splice(index, 0, id);
    moves.push({ id, index });
  }
  return moves;
}

/** The placeholder page's workspace tab id (`placeholder.html?id=…`), or null for any other URL. */
export function placeholderId(url, base) {
  if (!url || !url.startsWith(base)) return null;
  try {
    return new URL(url).searchParams.get("id") || null;
  } catch {
    return null;
  }
}

/**
 * Which restored real tabs are which workspace tabs (after a browser restart, a crash or an
 * extension update). `records`: the workspace tabs as last known, in order ({ id, url, title });
 * `tabs`: the window's real tabs in order ({ id, url, pendingUrl, title, pinned }); `prior`: the
 * Chrome tab id -> workspace id map saved before (valid after an update, stale after a restart);
 * `base`: the extension's URL (its placeholders carry their workspace id). Matched in this order:
 * the saved Chrome id showing the same page, a placeholder's id, the URL, then the title at the
 * nearest position, then (a tab without a page, such as a new-tab page) the position alone.
 * Returns { map: Map(chromeId -> workspaceId), byId, byUrl, other }.
 */
export function matchTabs(records, tabs, prior = new Map(), base = "chrome-extension://") {
  const map = new Map();
  const free = new Set(records.map((r) => r.id));
  const byIdRecord = new Map(records.map((r) => [r.id, r]));
  const real = tabs.filter((t) => !t.pinned);
  const pageOf = (t) => tabFields(t).url;
  let byId = 0;
  let byUrl = 0;
  let other = 0;
  const take = (t, id) => { map.set(t.id, id); free.delete(id); };
  for (const t of real) {
    const id = prior.get(t.id);
    const r = id && free.has(id) ? byIdRecord.get(id) : null;
    if (r && ((r.url || null) === pageOf(t) || placeholderId(t.url || t.pendingUrl, base) === id)) { take(t, id); byId++; }
  }
  for (const t of real) {
    if (map.has(t.id)) continue;
    const id = placeholderId(t.url || t.pendingUrl, base);
    if (id && free.has(id)) { take(t, id); byId++; }
  }
  for (const t of real) {
    if (map.has(t.id)) continue;
    const url = pageOf(t);
    const r = url && records.find((x) => free.has(x.id) && x.url === url);
    if (r) { take(t, r.id); byUrl++; }
  }
  const position = new Map(real.map((t, i) => [t.id, i]));
  for (const [ri, r] of records.entries()) {
    if (!free.has(r.id)) continue;
    let best = null;
    for (const t of real) {
      if (map.has(t.id)) continue;
      const f = tabFields(t);
      const sameTitle = r.title && f.title === r.title;
      const blankAtPlace = !r.url && f.url === null && position.get(t.id) === ri;
      if (!sameTitle && !blankAtPlace) continue;
      if (r.url && f.url !== null) continue; // a page showing another URL is another tab
      const d = Math.abs(position.get(t.id) - ri);
      if (!best || d < best.d) best = { t, d };
    }
    if (best) { take(best.t, r.id); other++; }
  }
  return { map, byId, byUrl, other };
}

/**
 * Whether a window may be re-attached to a workspace whose tabs are `records`: it matches by ids
 * (at least 2, or all of them), or by at least 80% of the workspace's URLs and at least 2 tabs, or
 * it shows exactly the records' pages and nothing else (`windowTabs`: its unpinned tabs). The last
 * is what a window of one shared tab is after a browser restart (new tab ids, one URL): without it
 * the binding opened the workspace in a second window beside the restored one, showing that page
 * twice (docs/extension.md, "Restart").
 */
export function windowMatches(records, match, windowTabs = Infinity) {
  const urls = records.filter((r) => r.url).length;
  if (match.byId >= 2 || (match.byId > 0 && match.byId === records.length)) return true;
  if (urls > 0 && match.byUrl === urls && match.map.size === records.length && windowTabs === records.length) return true;
  return match.byUrl >= 2 && match.byUrl >= 0.8 * urls;
}

/**
 * What a window is matched against when it is attached again (the window matcher, attach.js):
 * after a browser restart or an update, `restored` ({ map: real id -> workspace id, tabs: the
 * saved records }) says what this browser last had in that window, and only that counts: the
 * workspace's tabs added meanwhile by others (`stateTabs`) are not in the window yet, and
 * counting them would refuse the restored window and open the workspace twice. Without a saved
 * table (Reopen of a window this worker knew nothing of), the workspace's tabs.
 */
export function attachRecords(restored, stateTabs) {
  if (restored) {
    const had = new Set(restored.map.values());
    return had.size > 0 ? restored.tabs.filter((t) => had.has(t.id)) : restored.tabs.slice();
  }
  return stateTabs.map((t) => ({ id: t.id, url: t.url, title: t.title }));
}

/** The mass-close brake: closing `count` of a window's `windowTabs` tabs at once needs an applied op. */
export function brakes(count, windowTabs) {
  return count > 5 && count > windowTabs / 2;
}

/** The `role` claim of a JWT (read, not verified: the server verifies), or "". */
export function tokenRole(token) {
  try {
    const part = String(token).split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return String(JSON.parse(atob(part)).role ?? "");
  } catch {
    return "";
  }
}

/** True for ws:// and wss:// URLs whose host is this machine (a token may go there in clear). */
export function isLoopback(url) {
  const m = /^wss?:\/\/(\[[^\]]*\]|[^/:?#]*)/i.exec(url);
  if (!m) return false;
  const host = m[1].toLowerCase();
  return host === "localhost" || host === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
