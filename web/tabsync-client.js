// A browser client of the tabsync protocol (subprotocol tabsync.v1.json), with no DOM and no UI:
// connect, hello and resume (lastVersion + epoch), submit with optimistic pending ops rebased on
// every Applied and their keys translated through rekeys (as core's Replica does), a permanent
// Rejected rolled back, a transient one (UNAVAILABLE, RATE_LIMITED) kept in the outbox and
// resubmitted with a jittered back-off, reconnect with backoff, version gaps answered by
// reconnecting; `state` is rebuilt before "connected" is announced. Importable by any web app;
// web/bar.js and the extension use it. The rules it keeps (docs/design.md, "Submit, seqs and
// dedup", "Transient refusals are retried", "Resume and epoch"):
//
// - an op is settled only by its own answer: a pending op at or below `Welcome.lastSeq` is sent
//   again with its seq and settled by the Applied or Rejected the server repeats (a refusal is
//   never taken for applied); only `Rejected ANSWER_GONE` (the server no longer holds the answer)
//   drops one without it;
// - a snapshot under another epoch, or under this one below a version already seen under it (a
//   store brought back from a copy), is a new history: taken whole, nothing reported removed;
// - the outbox goes in order, each op numbered when sent, paced under the smaller of
//   `Welcome.limits`' `maxOpsPerSecond` and `maxOpsPerSecondPerUser` (a token bucket: ops wait
//   here rather than be refused); a held op holds the ops submitted after it.
//
// Saved state: `exportState()` gives what the client needs to resume after its page or worker is
// gone (plain JSON: `{ confirmed, pending, nextSeq, seen, rekeys }`), `importState(saved)` takes
// it back (checked whole; an older `{ confirmed, pending, nextSeq }` is enough) before connect().
// `confirmed`, `pending` and `state` are for reading: nothing outside this file writes them. A state
// is `{ workspace, version, epoch, tabs, activeTabId, editable, groups }`: tabs sorted by key, each
// with its `group` ("" for none), `groups` ({ id, title, color }) in the display order of their
// tabs, none empty (web/tab-groups.js).
//
//   const client = new TabsyncClient({ url: "ws://127.0.0.1:7070/", workspace: "team" });
//   client.addEventListener("change", () => render(client.state));
//   client.connect();
//   client.add({ id: "t1", title: "Docs" }, { activate: true });
//   client.restore(12);                      // the server decides the state; shown when applied
//   client.group(["t1", "t2"], "g-work", { title: "Work", color: "blue" }); // web/tab-groups.js
//   const page = await client.history({ ops: { limit: 50 } }); // a HistoryAnswer
//
// Events (EventTarget): "change" (state, pending ops or peers changed), "status" (detail:
// "connecting" | "connected" | "disconnected" | "closed"), "rejected" (detail: { seq, code,
// message, op }: a permanent refusal, sent before `state` drops the op), "retrying" (detail:
// { code, message, op, attempts, retryAt }: a transient refusal; the op stays pending and is sent
// again as a new op with a new seq), "applied" (detail: { applied, removed }: an Applied changed
// `confirmed`; `removed` lists the tab ids it took out), "welcome" (detail: { previousEpoch, epoch,
// recovered, newHistory, removed }: sent before `state` is rebuilt from the Welcome; `newHistory`:
// another history replaced the one held, and `removed` is then empty, since no op removed
// anything), "answergone" (detail: { seq, op }: the server no longer holds a resubmitted op's
// answer; its effect, if any, is in the state; not a refusal), "error" (detail: the server's Error
// { code, message }).

import { generateKeyBetween } from "./fractional-indexing.js";
import { applyCanonicalGroupOp, applyPendingGroupOp, normalGroup, predictedGroup, settleGroups } from "./tab-groups.js";

const SUBPROTOCOL = "tabsync.v1.json";

/** Refusals that say "not now" rather than "no": the op stays in the outbox and is sent again. */
export const TRANSIENT = new Set(["UNAVAILABLE", "RATE_LIMITED"]);

/** Sorts tabs by key, bytewise (keys are ASCII, so UTF-16 order is byte order). */
function byKey(a, b) {
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

function cloneState(s) {
  return { ...s, tabs: s.tabs.map((t) => ({ ...t })), groups: (s.groups ?? []).map((g) => ({ ...g })) };
}

/** The state of a Snapshot (missing fields are their defaults, as protobuf JSON leaves them out). */
export function stateFromSnapshot(snapshot = {}, epoch = "") {
  return {
    workspace: snapshot.workspace ?? "",
    version: Number(snapshot.version ?? 0),
    epoch: snapshot.epoch ?? epoch,
    tabs: (snapshot.tabs ?? []).map(normalTab).sort(byKey),
    activeTabId: snapshot.activeTabId ?? "",
    editable: snapshot.editable ?? false,
    groups: (snapshot.groups ?? []).map(normalGroup),
  };
}

function normalTab(t) {
  return {
    id: t.id ?? "", title: t.title ?? "", url: t.url ?? "", icon: t.icon ?? "",
    badge: t.badge ?? "", locked: t.locked ?? false, key: t.key ?? "", group: t.group ?? "",
  };
}

const UPDATE_FIELDS = ["title", "url", "icon", "badge", "locked"];

/**
 * Applies one canonical Applied op (proto/README.md, "Applying an Applied") to `state` in place.
 * Returns false when the op does not fit the state (then resync).
 */
export function applyCanonical(state, applied) {
  const [[kind, op]] = Object.entries(applied.op ?? { none: {} });
  const find = (id) => state.tabs.find((t) => t.id === id);
  state.groups ??= [];
  const known = (group) => !group || state.groups.some((g) => g.id === group);
  switch (kind) {
    case "add": if (!known(op.tab?.group)) return false; state.tabs.push(normalTab(op.tab)); break;
    case "move": {
      const t = find(op.tabId);
      if (!t || !known(op.group)) return false;
      t.key = op.place?.key ?? t.key;
      t.group = op.group ?? "";
      break;
    }
    case "remove": state.tabs = state.tabs.filter((t) => t.id !== op.tabId); break;
    case "activate": break;
    case "update": {
      const t = find(op.tabId);
      if (!t) return false;
      for (const f of UPDATE_FIELDS) if (f in op) t[f] = op[f];
      break;
    }
    case "setEditable": state.editable = op.editable ?? false; break;
    case "replace":
      state.tabs = (op.tabs ?? []).map(normalTab);
      state.groups = (op.groups ?? []).map(normalGroup);
      break;
    // A restore as the server applied it: its `state` replaces tabs (keys and groups as given),
    // groups and editable; the active tab is the Applied's, as for every op.
    case "restore":
      state.tabs = (op.state?.tabs ?? []).map(normalTab);
      state.groups = (op.state?.groups ?? []).map(normalGroup);
      state.editable = op.state?.editable ?? false;
      break;
    case "rekey": for (const k of op.keys ?? []) { const t = find(k.tabId); if (t) t.key = k.key; } break;
    case "group": case "ungroup": case "updateGroup":
      if (!applyCanonicalGroupOp(state, kind, op)) return false;
      break;
    default: return false;
  }
  state.tabs.sort(byKey);
  settleGroups(state);
  state.activeTabId = applied.activeTabId ?? "";
  state.version = Number(applied.version);
  return true;
}

/** The key a `place` gives against `tabs` (the moved tab left out), as the server reads it. */
function placeKey(tabs, place) {
  if (place && typeof place.key === "string" && place.key !== "") return place.key;
  if (place && typeof place.index === "number") {
    const i = Math.min(place.index, tabs.length);
    return generateKeyBetween(tabs[i - 1]?.key ?? null, tabs[i]?.key ?? null);
  }
  return generateKeyBetween(tabs[tabs.length - 1]?.key ?? null, null);
}

/** `key`, or when a tab already has it, a fresh key just after it (ordering rule 1). */
function uniqueKey(tabs, key) {
  const i = tabs.findIndex((t) => t.key === key);
  if (i < 0) return key;
  return generateKeyBetween(key, tabs[i + 1]?.key ?? null);
}

/**
 * Applies one of this client's own ops, not yet answered, to the optimistic `state` in place.
 * Only what the state cannot hold is skipped (a tab that is gone, an id taken); permissions
 * (locked, read-only) are the server's to judge, so a refused op shows until its Rejected
 * rolls it back. Returns false when skipped.
 */
export function applyPending(state, op) {
  const [[kind, body]] = Object.entries(op);
  const find = (id) => state.tabs.find((t) => t.id === id);
  state.groups ??= [];
  try {
    switch (kind) {
      case "add":
      case "open": {
        if (kind === "open") {
          const existing = find(body.tab.id) ?? (body.tab.url ? state.tabs.find((t) => t.url === body.tab.url) : null);
          if (existing) { state.activeTabId = existing.id; return true; }
        }
        if (find(body.tab.id)) return false;
        const key = uniqueKey(state.tabs, placeKey(state.tabs, body.place));
        const t = { ...normalTab(body.tab), key };
        state.tabs.push(t);
        state.tabs.sort(byKey);
        t.group = predictedGroup(state.tabs, state.groups, state.tabs.indexOf(t), t.group);
        if (kind === "open" || body.activate || !state.activeTabId) state.activeTabId = body.tab.id;
        break;
      }
      case "move": {
        const t = find(body.tabId);
        if (!t) return false;
        const others = state.tabs.filter((x) => x !== t);
        const alone = t.group !== "" && !others.some((x) => x.group === t.group);
        t.key = uniqueKey(others, placeKey(others, body.place));
        state.tabs.sort(byKey);
        t.group = predictedGroup(state.tabs, state.groups, state.tabs.indexOf(t), t.group, alone);
        break;
      }
      case "remove": {
        const i = state.tabs.findIndex((t) => t.id === body.tabId);
        if (i < 0) return false;
        state.tabs.splice(i, 1);
        if (state.activeTabId === body.tabId) {
          state.activeTabId = (state.tabs[i] ?? state.tabs[i - 1])?.id ?? "";
        }
        break;
      }
      case "activate": {
        const t = "tabId" in body ? find(body.tabId) : state.tabs[body.index];
        if (!t) return false;
        state.activeTabId = t.id;
        break;
      }
      case "update": {
        const t = find(body.tabId);
        if (!t) return false;
        for (const f of UPDATE_FIELDS) if (f in body) t[f] = body[f];
        break;
      }
      case "setEditable": state.editable = body.editable ?? false; break;
      case "replace": {
        // As the server does: the list's order with fresh keys; the active tab stays if present,
        // else the tab at the old active index, else the first.
        const oldIndex = state.tabs.findIndex((t) => t.id === state.activeTabId);
        let key = null;
        state.tabs = (body.tabs ?? []).map((t) => ({ ...normalTab(t), key: (key = generateKeyBetween(key, null)) }));
        state.groups = (body.groups ?? []).map(normalGroup);
        if (!state.tabs.some((t) => t.id === state.activeTabId)) {
          state.activeTabId = (state.tabs[oldIndex] ?? state.tabs[0])?.id ?? "";
        }
        break;
      }
      // The server decides what these become (the state at a version; the closed tab's last fields
      // and place), so the optimistic view does not guess: they show when their Applied comes.
      case "restore":
      case "reopen":
        return false;
      case "group": case "ungroup": case "updateGroup":
        state.tabs.sort(byKey);
        if (!applyPendingGroupOp(state, kind, body)) return false;
        break;
      default: return false;
    }
  } catch {
    return false; // a key that cannot be computed against this state
  }
  state.tabs.sort(byKey);
  settleGroups(state);
  return true;
}

/** The key a submitted op carries in its place, if any (what a rekey may have to translate). */
function submittedKey(op) {
  const [[kind, body]] = Object.entries(op);
  if (kind !== "add" && kind !== "open" && kind !== "move") return null;
  const key = body.place?.key;
  return typeof key === "string" && key !== "" ? key : null;
}

/** `op` with its place key replaced by `key`. */
function withKey(op, key) {
  const [[kind, body]] = Object.entries(op);
  return { [kind]: { ...body, place: { key } } };
}

/**
 * A rekey the client saw while it had ops pending: the keys before it (ascending) and the keys it
 * gave the same tabs. `translate` maps a key computed against the old keys as the server does
 * (DESIGN rule 7, core's RekeyRecord): a key equal to tab T's old key becomes T's new key; a key
 * between the old keys of L and R becomes a key between their new keys.
 */
export function rekeyRecord(version, tabsBefore, rekey) {
  const newKey = new Map((rekey.keys ?? []).map((k) => [k.tabId, k.key]));
  return rekeyFromData({
    version,
    oldKeys: tabsBefore.map((t) => t.key),
    newKeys: tabsBefore.map((t) => newKey.get(t.id) ?? t.key),
  });
}

/** A rekey record from its data `{ version, oldKeys, newKeys }` (as exportState() saves it). */
function rekeyFromData({ version, oldKeys, newKeys }) {
  return {
    version,
    oldKeys,
    newKeys,
    toJSON() { return { version, oldKeys: [...oldKeys], newKeys: [...newKeys] }; },
    translate(key) {
      let lo = 0;
      let hi = oldKeys.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (oldKeys[mid] < key) lo = mid + 1; else hi = mid;
      }
      if (lo < oldKeys.length && oldKeys[lo] === key) return newKeys[lo];
      return generateKeyBetween(lo > 0 ? newKeys[lo - 1] : null, lo < newKeys.length ? newKeys[lo] : null);
    },
  };
}

/**
 * The URL a session of `workspace` connects to (docs/design.md, "The protocol in brief"):
 * `/v1/workspaces/{workspace}/ws` under the server URL's path (its trailing "/" dropped, its query
 * kept), so that a proxy in front of several nodes routes by workspace. A URL whose path already
 * ends in `/ws` is kept as it is.
 */
export function sessionUrl(url, workspace) {
  const match = /^(wss?:\/\/[^/?#]*)([^?#]*)(\?[^#]*)?$/i.exec(url);
  if (!match) return url;
  const [, origin, path, query = ""] = match;
  if (path.endsWith("/ws")) return url;
  return `${origin}${path.replace(/\/+$/, "")}/v1/workspaces/${encodeURIComponent(workspace)}/ws${query}`;
}

/** A refused HTTP write: `status` (400, 401, 403, 413, 422, 429, 503…), the wire `code` and `message`. */
export class HttpWriteError extends Error {
  constructor(status, code, message) {
    super(`HTTP ${status}: ${message}`);
    this.name = "HttpWriteError";
    this.status = status;
    this.code = code;
  }
}

/**
 * An HTTP write (docs/design.md, "HTTP writes"): POSTs `ops` (protocol JSON ops) to
 * `/v1/workspaces/{workspace}/ops` of `base` (http(s)://, or a ws(s):// server URL taken as its
 * HTTP twin) under `Idempotency-Key: key` (a random one when none is given), and resolves with the
 * answer's `results`, one per op in order: `{ version, op }` or `{ error: { code, message } }`.
 * The same key and body go again, so the ops are applied at most once however often this tries:
 * after a 503 or 429 (waiting its `Retry-After`, at most `maxWait` ms) and after an answer lost on
 * the way (the connection failed), with a doubling jittered wait, until `deadline` ms have passed;
 * then it rejects with the last failure. Any other refusal rejects at once with an HttpWriteError
 * (422: the key was used with another body; nothing of this body was applied).
 */
export async function httpWrite(base, workspace, ops, { key, token, deadline = 60000, maxWait = 10000, fetch = globalThis.fetch } = {}) {
  const origin = base.replace(/^ws(s?):/i, "http$1:").replace(/^(https?:\/\/[^/?#]*).*$/i, "$1");
  const url = `${origin}/v1/workspaces/${encodeURIComponent(workspace)}/ops`;
  const headers = { "Content-Type": "application/json", Accept: "application/json",
    "Idempotency-Key": key ?? globalThis.crypto.randomUUID() };
  if (token) headers.Authorization = `Bearer ${token}`;
  const body = JSON.stringify({ ops });
  const until = Date.now() + deadline;
  let delay = 100;
  for (;;) {
    let failure, wait = delay * (0.5 + Math.random() / 2);
    try {
      const answer = await fetch(url, { method: "POST", headers, body });
      const text = await answer.text();
      let parsed = {};
      try { parsed = JSON.parse(text); } catch { parsed = { error: { message: text.trim() } }; }
      if (answer.ok) return parsed.results;
      const error = parsed.error ?? {};
      failure = new HttpWriteError(answer.status, error.code ?? "", error.message ?? text.trim());
      if (answer.status !== 503 && answer.status !== 429) throw failure;
      const after = Number(answer.headers.get("Retry-After"));
      if (Number.isFinite(after) && after * 1000 > wait) wait = after * 1000;
    } catch (error) {
      if (error instanceof HttpWriteError && error.status !== 503 && error.status !== 429) throw error;
      failure = error; // the answer did not come (or was transient): the same key again
    }
    wait = Math.min(wait, maxWait);
    if (Date.now() + wait > until) throw failure;
    await new Promise((resolve) => setTimeout(resolve, wait));
    delay = Math.min(delay * 2, maxWait);
  }
}

/**
 * The share of the server's rate an outbox is paced at: the server counts arrivals, and a network
 * that bunches what was sent evenly must not push them over (docs/design.md, "Limits and defaults").
 */
const PACE_SHARE = 0.9;

/** The most epochs `seen` remembers (the newest are kept; only the current one is ever asked). */
const SEEN_EPOCHS = 8;

/** A whole non-negative number, from a number or a decimal string (as protobuf JSON writes uint64). */
function count(value, what) {
  const n = typeof value === "string" && /^[0-9]+$/.test(value) ? Number(value) : value;
  if (!Number.isSafeInteger(n) || n < 0) throw new TypeError(`importState: ${what} is not a whole number ≥ 0`);
  return n;
}

/** One outbox entry of a saved state, checked and copied (its op is kept as the caller gave it). */
function pendingFromData(p, i) {
  const what = `pending[${i}]`;
  if (!p || typeof p !== "object") throw new TypeError(`importState: ${what} is not an object`);
  if (!p.op || typeof p.op !== "object" || Object.keys(p.op).length !== 1) {
    throw new TypeError(`importState: ${what}.op is not an op (one kind, as { remove: { tabId } })`);
  }
  const entry = { seq: count(p.seq ?? 0, `${what}.seq`), baseVersion: count(p.baseVersion ?? 0, `${what}.baseVersion`),
    op: structuredClone(p.op) };
  if (p.retry) entry.retry = { code: String(p.retry.code ?? ""), attempts: count(p.retry.attempts ?? 0, `${what}.retry.attempts`) };
  if (p.retryAt) entry.retryAt = count(Math.round(p.retryAt), `${what}.retryAt`);
  return entry;
}

/** A saved client state checked and made whole (see TabsyncClient.importState); throws a TypeError. */
export function stateFromData(data) {
  if (!data || typeof data !== "object") throw new TypeError("importState: not an object");
  const c = data.confirmed;
  if (!c || typeof c !== "object" || !Array.isArray(c.tabs)) throw new TypeError("importState: confirmed has no tabs");
  const confirmed = stateFromSnapshot({ ...c, version: count(c.version ?? 0, "confirmed.version") }, c.epoch ?? "");
  if (!Array.isArray(data.pending ?? [])) throw new TypeError("importState: pending is not a list");
  // The outbox goes in order and numbers ops as they go: the numbered ones (sent before, in seq
  // order) first, then the rest in the order saved (an older client could leave them mixed).
  const entries = (data.pending ?? []).map(pendingFromData);
  const pending = [...entries.filter((p) => p.seq > 0).sort((a, b) => a.seq - b.seq), ...entries.filter((p) => p.seq === 0)];
  const numbered = pending.map((p) => p.seq);
  const nextSeq = Math.max(count(data.nextSeq ?? 1, "nextSeq"), 1, ...numbered.map((s) => s + 1));
  const seen = {};
  for (const [epoch, version] of Object.entries(data.seen ?? {})) seen[epoch] = count(version, `seen[${epoch}]`);
  // An older saved shape has no `seen`: the confirmed version is the highest it can vouch for.
  if (confirmed.epoch) seen[confirmed.epoch] = Math.max(seen[confirmed.epoch] ?? 0, confirmed.version);
  if (!Array.isArray(data.rekeys ?? [])) throw new TypeError("importState: rekeys is not a list");
  const rekeys = (data.rekeys ?? []).map((r, i) => {
    if (!Array.isArray(r?.oldKeys) || !Array.isArray(r?.newKeys) || r.oldKeys.length !== r.newKeys.length) {
      throw new TypeError(`importState: rekeys[${i}] is not { version, oldKeys, newKeys }`);
    }
    return rekeyFromData({ version: count(r.version, `rekeys[${i}].version`), oldKeys: r.oldKeys.map(String), newKeys: r.newKeys.map(String) });
  });
  return { confirmed, pending, nextSeq, seen, rekeys };
}

function randomId(prefix) {
  const bytes = new Uint8Array(6);
  crypto.getRandomValues(bytes);
  return prefix + Array.from(bytes, (b) => b.toString(36).padStart(2, "0")).join("").slice(0, 10);
}

/**
 * One connection to one workspace, kept open (reconnecting with backoff) until close().
 *
 * Guarantees: `confirmed` changes only by whole contiguous Applied ops or a snapshot; `state`
 * (what a UI shows) is always `confirmed` plus the pending ops in outbox order, which is the order
 * the server applies them; a pending op leaves only when its own Applied or permanent Rejected
 * arrives (or the server answers ANSWER_GONE), and is resubmitted with its seq after a reconnect,
 * so nothing submitted is lost while the page stays open; a seq is never used for two ops.
 */
export class TabsyncClient extends EventTarget {
  /**
   * @param {object} options
   * @param {string} options.url  ws:// or wss:// URL of the server; the session connects to its
   *   `/v1/workspaces/{workspace}/ws` (sessionUrl)
   * @param {string} options.workspace
   * @param {string} [options.clientId]  stable across reconnects (default: random per instance)
   * @param {string} [options.name]  shown to others in presence
   * @param {string} [options.token]  sent in Hello where the server requires one
   * @param {boolean} [options.pacing]  false: ops go at once, unpaced, and the server's rate limit
   *   answers them (for tests of the RATE_LIMITED path); settable later as `client.pacing`
   */
  constructor({ url, workspace, clientId, name = "", token = "", backoff = { first: 250, max: 5000 },
    retry = { first: 200, max: 5000, rateLimited: 1000 }, pacing = true }) {
    super();
    this.pacing = pacing;
    // Back-off of a held op (docs/design.md, "Transient refusals are retried"): UNAVAILABLE from
    // `first` doubling to `max`, RATE_LIMITED from `rateLimited` doubling to `max`, both jittered.
    this.retry = retry;
    this.pumpTimer = null; // wakes the outbox when a held op's back-off ends or a rate token comes
    this.bucket = null; // the pacing token bucket { tokens, at }, made at the first op paced
    this.sentHere = new Set(); // outbox entries sent over the current connection
    this.url = url;
    this.workspace = workspace;
    this.clientId = clientId || randomId("web-");
    this.name = name;
    this.token = token;
    this.backoff = backoff;
    this.confirmed = stateFromSnapshot({ workspace, editable: true });
    this.state = cloneState(this.confirmed);
    // The outbox, in the order it is sent: { seq, baseVersion, op, retry?, retryAt? }. `seq` is 0
    // until the op is sent (numbered then, so seqs rise in sending order) and again while a held op
    // waits for its back-off (`retryAt`); the numbered entries are always a prefix, in seq order.
    this.pending = [];
    this.rekeys = []; // rekeyRecord()s since the oldest pending op's base version
    this.peers = [];
    this.sessionId = "";
    this.status = "closed";
    this.limits = null;
    this.nextSeq = 1;
    this.seen = {}; // epoch -> the highest confirmed version seen under it (the backup rule)
    this.retryAt = 0;
    this.attempts = 0;
    this.welcomed = false;
    this.focusTabId = "";
    this.queries = new Map(); // history query id -> { resolve, reject, timer }
    this.nextQueryId = 1;
    this.ws = null;
    this.timer = null;
    this.stopped = false;
  }

  /** Opens the connection (and keeps reopening it until close()). */
  connect() {
    this.stopped = false;
    this.open();
  }

  /** Closes for good: no reconnect. */
  close() {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.pumpTimer);
    this.ws?.close(1000);
    this.failQueries("closed");
    this.setStatus("closed");
  }

  // ---------------------------------------------------------------- saved state

  /**
   * What this client needs to resume after its page or worker is gone, as plain JSON (a deep copy:
   * changing it changes nothing here): `confirmed` (the last confirmed state), `pending` (the
   * outbox, in order, each `{ seq, baseVersion, op, retry?, retryAt? }`), `nextSeq`, `seen` (the
   * highest version seen per epoch) and `rekeys` (the rekeys pending ops' keys still go through).
   */
  exportState() {
    return JSON.parse(JSON.stringify({
      confirmed: this.confirmed, pending: this.pending, nextSeq: this.nextSeq, seen: this.seen, rekeys: this.rekeys,
    }));
  }

  /**
   * Takes a state exportState() gave (or an older saved shape: `{ confirmed, pending, nextSeq }`
   * alone is enough) and rebuilds `state` from it. Checked whole first: a state of the wrong shape
   * throws a TypeError and changes nothing. Meant for a client not yet connected; a connected one
   * resumes again from the state it took.
   */
  importState(data) {
    const { confirmed, pending, nextSeq, seen, rekeys } = stateFromData(data);
    this.confirmed = confirmed;
    this.pending = pending;
    this.nextSeq = nextSeq;
    this.seen = seen;
    this.rekeys = rekeys;
    this.rebuild();
    if (this.ws) this.resync();
  }

  /** Records the confirmed version as seen under its epoch (kept for the newest SEEN_EPOCHS epochs). */
  noteSeen() {
    const { epoch, version } = this.confirmed;
    if (!epoch) return;
    if ((this.seen[epoch] ?? -1) >= version) return;
    delete this.seen[epoch]; // re-inserted last: insertion order is recency
    this.seen[epoch] = version;
    const epochs = Object.keys(this.seen);
    for (const old of epochs.slice(0, Math.max(0, epochs.length - SEEN_EPOCHS))) delete this.seen[old];
  }

  // ---------------------------------------------------------------- ops

  /** Submits an op (the protocol's Op JSON); it shows in `state` at once. Returns its pending entry. */
  submit(op) {
    const entry = { seq: 0, baseVersion: this.confirmed.version, op };
    this.pending.push(entry);
    this.pump();
    this.rebuild();
    return entry;
  }

  /** Adds a tab (id made when missing) at `key` (default: the end). Returns the tab id. */
  add(tab, { key, activate = false } = {}) {
    const id = tab.id || randomId("t-");
    const op = { add: { tab: { ...tab, id }, activate } };
    if (key) op.add.place = { key };
    this.submit(op);
    return id;
  }
  move(tabId, key) { return this.submit({ move: { tabId, place: { key } } }); }
  remove(tabId) { return this.submit({ remove: { tabId } }); }
  activate(tabId) { return this.submit({ activate: { tabId } }); }
  update(tabId, fields) { return this.submit({ update: { tabId, ...fields } }); }
  setEditable(editable) { return this.submit({ setEditable: { editable } }); }
  /** Puts the workspace back as it was at `version`, as a new version (the server fills the state). */
  restore(version) { return this.submit({ restore: { version: String(version) } }); }
  /** Brings back a recently closed tab (the server turns it into an `add` that activates it). */
  reopen(tabId) { return this.submit({ reopen: { tabId } }); }
  /**
   * Puts tabs into group `groupId` (made when new; `title`, `color` optional: one of GROUP_COLORS).
   * The server places them (docs/design.md, "Tab groups"); the state shows its prediction at once.
   */
  group(tabIds, groupId, { title, color } = {}) {
    const body = { tabIds, groupId };
    if (title !== undefined) body.title = title;
    if (color !== undefined) body.color = color;
    return this.submit({ group: body });
  }
  ungroup(tabIds) { return this.submit({ ungroup: { tabIds } }); }
  /** Sets a group's `title` and/or `color`. */
  updateGroup(groupId, { title, color } = {}) {
    const body = { groupId };
    if (title !== undefined) body.title = title;
    if (color !== undefined) body.color = color;
    return this.submit({ updateGroup: body });
  }

  /**
   * Asks the server for history over the open session: `query` is one of `{ ops: { before, limit } }`,
   * `{ version }`, `{ at }` (RFC 3339) or `{ closed: n }` (proto HistoryQuery). Resolves with the
   * HistoryAnswer of the same id (its `error` set when the server could not answer); rejects when
   * not connected, when the connection closes first, or after `timeout` ms.
   */
  history(query, { timeout = 10000 } = {}) {
    return new Promise((resolve, reject) => {
      if (!this.welcomed || !this.ws || this.ws.readyState !== WebSocket.OPEN) {
        reject(new Error("not connected"));
        return;
      }
      const id = this.nextQueryId++;
      if (this.nextQueryId > 0xffffffff) this.nextQueryId = 1;
      const body = { id };
      if (query.ops) {
        body.ops = {};
        if (query.ops.before) body.ops.before = String(query.ops.before);
        if (query.ops.limit) body.ops.limit = Number(query.ops.limit);
      } else if (query.version !== undefined) body.version = String(query.version);
      else if (query.at !== undefined) body.at = String(query.at);
      else if (query.closed !== undefined) body.closed = Number(query.closed);
      else { reject(new Error("history: no query")); return; }
      const timer = setTimeout(() => {
        this.queries.delete(id);
        reject(new Error("history: no answer in time"));
      }, timeout);
      this.queries.set(id, { resolve, reject, timer });
      this.send({ history: body });
    });
  }

  /** Rejects every history query still waiting (the connection they were asked on is gone). */
  failQueries(reason) {
    const waiting = [...this.queries.values()];
    this.queries.clear();
    for (const q of waiting) { clearTimeout(q.timer); q.reject(new Error(reason)); }
  }

  onHistory(answer) {
    const id = Number(answer.id ?? 0);
    const q = this.queries.get(id);
    if (!q) return; // timed out, or not ours
    this.queries.delete(id);
    clearTimeout(q.timer);
    q.resolve(answer);
  }

  /** A position key between the keys of two tabs of `state` (null: an open end). */
  keyBetween(before, after) {
    return generateKeyBetween(before?.key ?? null, after?.key ?? null);
  }

  /** Tells the others which tab this client views ("" for none); kept across reconnects. */
  focus(tabId) {
    if (tabId === this.focusTabId) return;
    this.focusTabId = tabId;
    if (this.welcomed) this.send({ focus: { tabId } });
  }

  // ---------------------------------------------------------------- connection

  open() {
    clearTimeout(this.timer);
    this.welcomed = false;
    this.setStatus("connecting");
    let ws;
    try {
      ws = new WebSocket(sessionUrl(this.url, this.workspace), SUBPROTOCOL);
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      const hello = { workspace: this.workspace, clientId: this.clientId };
      if (this.name) hello.clientName = this.name;
      if (this.token) hello.token = this.token;
      if (this.confirmed.epoch && this.confirmed.version > 0) {
        hello.lastVersion = String(this.confirmed.version);
        hello.epoch = this.confirmed.epoch;
      }
      ws.send(JSON.stringify({ hello }));
    };
    ws.onmessage = (event) => {
      if (ws !== this.ws) return;
      let message;
      try { message = JSON.parse(event.data); } catch { ws.close(4000, "undecodable"); return; }
      this.receive(message);
    };
    ws.onclose = (event) => {
      if (ws !== this.ws) return;
      this.ws = null;
      this.welcomed = false;
      this.sentHere.clear();
      this.failQueries("disconnected");
      if (this.stopped) return;
      // 4400/4401: this client or its token is wrong (or revoked); retrying the same would fail
      // the same way. 4408: an operator closed the session; 4410: the workspace was deleted.
      if ([4400, 4401, 4408, 4410].includes(event.code)) { this.setStatus("closed"); return; }
      this.scheduleReconnect();
    };
  }

  scheduleReconnect() {
    // Full jitter: anywhere in [0, min(max, first·2^attempts)], so the clients of a server that
    // went away come back spread over the whole window, not in lock-step (docs/design.md,
    // "Reconnecting").
    const delay = Math.min(this.backoff.max, this.backoff.first * 2 ** this.attempts);
    const jittered = Math.random() * delay;
    this.attempts++;
    this.retryAt = Date.now() + jittered;
    this.setStatus("disconnected");
    this.timer = setTimeout(() => this.open(), jittered);
  }

  /** Drops the connection and resumes at once (a version gap). */
  resync() {
    const ws = this.ws;
    this.ws = null;
    ws?.close(4000, "version gap");
    this.sentHere.clear();
    this.failQueries("disconnected");
    this.open();
  }

  send(message) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN && this.welcomed) {
      this.ws.send(JSON.stringify(message));
    }
  }

  submitBody(entry) {
    return { seq: String(entry.seq), baseVersion: String(entry.baseVersion), op: entry.op };
  }

  receive(message) {
    if (message.welcome) this.onWelcome(message.welcome);
    else if (message.applied) this.onApplied(message.applied);
    else if (message.rejected) this.onRejected(message.rejected);
    else if (message.presence) { this.peers = message.presence.peers ?? []; this.emit("change"); }
    else if (message.history) this.onHistory(message.history);
    else if (message.error) this.dispatchEvent(new CustomEvent("error", { detail: message.error }));
  }

  /**
   * A Welcome: the confirmed state is resumed (the missed ops applied; an Applied of this client's
   * among them answers its seq) or replaced by the snapshot, and the outbox is sent again from its
   * start. A pending op at or below `lastSeq` was consumed but its answer was lost with the
   * connection: it goes again with its seq and is settled only by the answer the server repeats
   * (docs/design.md, "Submit, seqs and dedup": a refused op is never taken for applied).
   *
   * A snapshot under another epoch, or under this one below a version already seen here (a store
   * brought back from a copy: docs/design.md, "Resume and epoch"), is a new history: taken whole,
   * and the "welcome" event says `newHistory` with no tab reported removed, since no op removed any.
   */
  onWelcome(welcome) {
    this.sessionId = welcome.sessionId ?? "";
    this.limits = welcome.limits ?? null;
    const lastSeq = Number(welcome.lastSeq ?? 0);
    const previousEpoch = this.confirmed.epoch;
    const epoch = welcome.epoch ?? previousEpoch;
    const before = new Set(this.confirmed.tabs.map((t) => t.id));
    let newHistory = false;
    if (welcome.recovered) {
      for (const applied of welcome.missed ?? []) {
        applyCanonical(this.confirmed, applied);
        if (applied.clientId === this.clientId) this.settle(Number(applied.seq ?? 0));
      }
    } else {
      const version = Number(welcome.snapshot?.version ?? 0);
      newHistory = previousEpoch !== "" && (epoch !== previousEpoch || version < (this.seen[epoch] ?? 0));
      if (newHistory) delete this.seen[epoch]; // the versions seen belong to the history that ended
      this.confirmed = stateFromSnapshot(welcome.snapshot, epoch);
      this.rekeys = []; // another history's rekeys say nothing about this snapshot's keys
    }
    this.confirmed.epoch = epoch;
    this.nextSeq = Math.max(this.nextSeq, lastSeq + 1);
    for (const p of this.pending) if (p.seq === 0) delete p.retryAt; // held ops go at once
    const after = new Set(this.confirmed.tabs.map((t) => t.id));
    this.dispatchEvent(new CustomEvent("welcome", { detail: {
      previousEpoch, epoch, recovered: Boolean(welcome.recovered), newHistory,
      removed: newHistory ? [] : [...before].filter((id) => !after.has(id)),
    } }));
    this.welcomed = true;
    this.attempts = 0;
    this.sentHere.clear();
    // `state` is the new one before anyone hears "connected".
    this.rebuild();
    this.setStatus("connected");
    if (this.focusTabId) this.send({ focus: { tabId: this.focusTabId } });
    this.pump();
  }

  /** Drops the pending op numbered `seq` (its answer came); false when none is. */
  settle(seq) {
    const index = seq > 0 ? this.pending.findIndex((p) => p.seq === seq) : -1;
    if (index < 0) return false;
    this.sentHere.delete(this.pending[index]);
    this.pending.splice(index, 1);
    return true;
  }

  onApplied(applied) {
    const version = Number(applied.version);
    const mine = applied.clientId === this.clientId;
    if (version > this.confirmed.version + 1) { this.resync(); return; }
    if (version === this.confirmed.version + 1) {
      const before = this.confirmed.tabs.map((t) => ({ id: t.id, key: t.key }));
      if (!applyCanonical(this.confirmed, applied)) {
        this.confirmed.version = 0; // does not fit: take a snapshot
        this.resync();
        return;
      }
      if (applied.op?.rekey && this.pending.length > 0) {
        this.rekeys.push(rekeyRecord(version, before, applied.op.rekey));
      }
      const after = new Set(this.confirmed.tabs.map((t) => t.id));
      const removed = before.filter((t) => !after.has(t.id)).map((t) => t.id);
      this.dispatchEvent(new CustomEvent("applied", { detail: { applied, removed } }));
    }
    // An Applied at a version already held is the server repeating a resubmitted seq's answer: it
    // settles that op and changes nothing else.
    if (mine) this.settle(Number(applied.seq));
    this.rebuild();
  }

  /**
   * A permanent refusal drops the op (the "rejected" event goes first, so a listener sees the op
   * before `state` loses it). A transient one (TRANSIENT) keeps it in the outbox, shown in `state`
   * as before: it is held (seq 0) for a back-off and is then sent as a new op with a new seq and its
   * original baseVersion (so a key computed before a rekey is still translated), until an answer
   * that is not transient (docs/design.md, "Transient refusals are retried").
   *
   * ANSWER_GONE is not a refusal: the op was resubmitted at or below `Welcome.lastSeq` and the
   * server no longer holds its answer. Whatever it did is in the state this client was welcomed
   * with, so it leaves the outbox with an "answergone" event and no "rejected" one: the one case an
   * op is settled without its own answer, because the server cannot give it (docs/design.md,
   * "Submit, seqs and dedup").
   */
  onRejected(rejected) {
    const seq = Number(rejected.seq ?? 0);
    const code = rejected.code ?? "ERROR_CODE_UNSPECIFIED";
    const message = rejected.message ?? "";
    const index = seq > 0 ? this.pending.findIndex((p) => p.seq === seq) : -1;
    const entry = index >= 0 ? this.pending[index] : null;
    if (code === "ANSWER_GONE") {
      if (entry) this.settle(seq);
      this.dispatchEvent(new CustomEvent("answergone", { detail: { seq, op: entry?.op ?? null } }));
      this.rebuild();
      return;
    }
    if (entry && TRANSIENT.has(code)) {
      const attempts = (entry.retry?.attempts ?? 0) + 1;
      this.sentHere.delete(entry);
      entry.seq = 0;
      entry.retry = { code, attempts };
      const first = code === "RATE_LIMITED" ? (this.retry.rateLimited ?? 1000) : this.retry.first;
      const delay = Math.min(this.retry.max, first * 2 ** (attempts - 1));
      entry.retryAt = Math.round(Date.now() + delay / 2 + Math.random() * delay / 2);
      // The server's bucket is empty: what is not yet sent waits for the pace to refill ours.
      if (code === "RATE_LIMITED" && this.bucket) this.bucket.tokens = 0;
      // Its new seq will be above every op sent now: the server applies it after them, so it goes
      // after them in `state` too, after the ops held before it, and before the ops submitted
      // after it that wait for their first sending (the outbox keeps its order).
      this.pending.splice(index, 1);
      const firstFresh = this.pending.findIndex((p) => p.seq === 0 && !p.retry);
      this.pending.splice(firstFresh < 0 ? this.pending.length : firstFresh, 0, entry);
      this.pump();
      this.dispatchEvent(new CustomEvent("retrying", {
        detail: { code, message, op: entry.op, attempts, retryAt: entry.retryAt },
      }));
      this.rebuild();
      return;
    }
    this.dispatchEvent(new CustomEvent("rejected", { detail: { seq, code, message, op: entry?.op ?? null } }));
    if (index >= 0) this.settle(seq);
    this.rebuild();
  }

  /** Ops waiting to be retried (refused UNAVAILABLE or RATE_LIMITED, not yet answered for good). */
  get retrying() {
    return this.pending.filter((p) => p.retry);
  }

  /**
   * The pace ops are sent at, in ops per second: the smaller of `Welcome.limits`'
   * `maxOpsPerSecond` and `maxOpsPerSecondPerUser` (0 or absent: no such limit), or Infinity
 * (also when `pacing` is false).
   */
  get pace() {
    if (this.pacing === false) return Infinity;
    const rates = [this.limits?.maxOpsPerSecond, this.limits?.maxOpsPerSecondPerUser]
      .map(Number).filter((r) => Number.isFinite(r) && r > 0);
    return rates.length ? Math.min(...rates) : Infinity;
  }

  /**
   * Takes one token of the pacing bucket: half the server's burst (`pace` / 2 tokens at most, at
   * least 1), refilled at PACE_SHARE of `pace` per second. The server's bucket (`pace` tokens) so
   * keeps half its burst and a tenth of its rate in reserve, and what a busy network or machine
   * bunches on the way stays under it (a full-size burst left it empty: any op that arrived a
   * little early was refused). Returns 0, or the ms until a token comes.
   */
  takeToken(now) {
    const rate = this.pace;
    if (rate === Infinity) return 0;
    const burst = Math.max(1, Math.floor(rate / 2));
    const b = this.bucket ??= { tokens: burst, at: now };
    b.tokens = Math.min(burst, b.tokens + (Math.max(0, now - b.at) / 1000) * rate * PACE_SHARE);
    b.at = now;
    if (b.tokens >= 1) { b.tokens -= 1; return 0; }
    return Math.ceil(((1 - b.tokens) / (rate * PACE_SHARE)) * 1000);
  }

  /**
   * Sends the outbox in order over a welcomed connection, each op not yet sent on it: numbered when
   * it goes, paced under `pace`, stopping at a held op whose back-off is not over (the ops after it
   * wait: the outbox keeps its order). Sets a timer for when it can go on.
   */
  pump(now = Date.now()) {
    clearTimeout(this.pumpTimer);
    this.pumpTimer = null;
    if (!this.welcomed || this.stopped) return;
    let wait = null;
    for (const p of this.pending) {
      if (this.sentHere.has(p)) continue;
      if (p.retryAt && p.retryAt > now) { wait = p.retryAt - now; break; }
      const token = this.takeToken(now);
      if (token > 0) { wait = token; break; }
      if (p.seq === 0) p.seq = this.nextSeq++;
      delete p.retryAt;
      this.sentHere.add(p);
      this.send({ submit: this.submitBody(p) });
    }
    if (wait !== null) this.pumpTimer = setTimeout(() => this.pump(), wait);
  }

  /** Sends what is due at `now` (a held op's back-off over; tests pass a later `now`). */
  resendDue(now = Date.now()) {
    this.pump(now);
  }

  /**
   * Rebuilds `state` as `confirmed` plus the pending ops, in seq order, each op's key translated
   * through the rekeys applied since its base version (as the server will translate it).
   */
  rebuild() {
    const oldestBase = Math.min(this.confirmed.version, ...this.pending.map((p) => p.baseVersion));
    this.rekeys = this.rekeys.filter((r) => r.version > oldestBase);
    this.noteSeen();
    const state = cloneState(this.confirmed);
    for (const p of this.pending) applyPending(state, this.translated(p));
    if (state.activeTabId && !state.tabs.some((t) => t.id === state.activeTabId)) {
      state.activeTabId = state.tabs[0]?.id ?? "";
    }
    this.state = state;
    this.emit("change");
  }

  /** A pending op with its place key translated through the rekeys since its base version. */
  translated(p) {
    const key = submittedKey(p.op);
    if (key === null) return p.op;
    let k = key;
    try {
      // baseVersion 0 means "the current version" to the server: it translates nothing then.
      if (p.baseVersion > 0) for (const r of this.rekeys) if (r.version > p.baseVersion) k = r.translate(k);
    } catch {
      return p.op; // an invalid key: the server refuses it; shown untranslated until then
    }
    return k === key ? p.op : withKey(p.op, k);
  }

  setStatus(status) {
    if (status === this.status) return;
    this.status = status;
    this.dispatchEvent(new CustomEvent("status", { detail: status }));
  }

  emit(type) {
    this.dispatchEvent(new Event(type));
  }
}
