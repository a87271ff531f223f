// TypeScript declarations of web/tabsync-client.js's public API (the npm package tabsync-client).
// Checked by Tests/web/npm-package.test.mjs: every export of the module is declared here and every
// member declared on TabsyncClient exists (with `tsc --noEmit` too where TypeScript is installed).
// Ops and snapshots are the protocol's JSON (proto/README.md): 64-bit numbers are strings there.

/** A tab as the client keeps it: sorted by `key`; `group` is "" for none. */
export interface Tab {
  id: string;
  title?: string;
  url?: string;
  key: string;
  group: string;
  [field: string]: unknown;
}

/** A tab group, in the display order of its tabs. */
export interface Group {
  id: string;
  title: string;
  color: string;
}

/** A workspace state: confirmed (the server's) or shown (confirmed plus pending ops). */
export interface State {
  workspace: string;
  version: number;
  epoch: string;
  tabs: Tab[];
  activeTabId: string;
  editable: boolean;
  groups: Group[];
}

/** One op of the protocol, e.g. `{ add: { tab: { id, title } } }` or `{ remove: { tabId } }`. */
export type Op = Record<string, unknown>;

/** An outbox entry: `seq` is 0 until the op is sent. */
export interface PendingEntry {
  seq: number;
  baseVersion: number;
  op: Op;
  retry?: number;
  retryAt?: number;
}

/** What exportState() gives and importState() takes. */
export interface SavedState {
  confirmed: State;
  pending: PendingEntry[];
  nextSeq: number;
  seen?: Record<string, number>;
  rekeys?: unknown[];
}

export interface RekeyRecord {
  version: number;
  oldKeys: string[];
  newKeys: string[];
  translate(key: string): string;
}

export type Status = "connecting" | "connected" | "disconnected" | "closed";

export interface HistoryQuery {
  ops?: { before?: number | string; limit?: number };
  version?: number | string;
  at?: string;
  closed?: number;
}

export interface ClientOptions {
  /** ws:// or wss:// URL of the server; the session connects to its /v1/workspaces/{workspace}/ws. */
  url: string;
  workspace: string;
  /** Stable across reconnects (default: random per instance). */
  clientId?: string;
  /** Shown to others in presence. */
  name?: string;
  /** Sent in Hello where the server requires one. */
  token?: string;
  backoff?: { first: number; max: number };
  retry?: { first: number; max: number; rateLimited: number };
  /** false: ops go at once, unpaced. */
  pacing?: boolean;
}

/** Refusals that say "not now": the op stays in the outbox and is sent again. */
export const TRANSIENT: Set<string>;

/** The state of a Snapshot (missing fields are their defaults). */
export function stateFromSnapshot(snapshot?: Record<string, unknown>, epoch?: string): State;
/** Applies a server Applied to a confirmed state, in place; false when it does not fit (resync). */
export function applyCanonical(state: State, applied: Record<string, unknown>): boolean;
/** Applies one of this client's pending ops to a shown state, in place; false when skipped. */
export function applyPending(state: State, op: Op): boolean;
/** A rekey seen while ops were pending, to translate their keys. */
export function rekeyRecord(version: number, tabsBefore: Tab[], rekey: Record<string, unknown>): RekeyRecord;
/** The session URL of a workspace under a server URL. */
export function sessionUrl(url: string, workspace: string): string;
/** A saved client state checked and made whole; throws a TypeError. */
export function stateFromData(data: unknown): SavedState;

/** A refused HTTP write: the HTTP status, the wire code and the server's message. */
export class HttpWriteError extends Error {
  constructor(status: number, code: string, message: string);
  status: number;
  code: string;
}

export interface HttpWriteOptions {
  /** The Idempotency-Key (1–64 of A–Z a–z 0–9 - _ . : ~); a random one when omitted. */
  key?: string;
  token?: string;
  /** How long it may keep trying, in ms (default 60000). */
  deadline?: number;
  /** The longest wait between tries, in ms (default 10000). */
  maxWait?: number;
  fetch?: typeof globalThis.fetch;
}

/** One op's answer: applied (its version and op as stored) or refused in its place. */
export type HttpWriteResult = { version: string; op: Op } | { error: { code: string; message: string } };

/** POST /v1/workspaces/{workspace}/ops under one Idempotency-Key, tried again only where safe. */
export function httpWrite(base: string, workspace: string, ops: Op[], options?: HttpWriteOptions): Promise<HttpWriteResult[]>;

/**
 * A session with the outbox, retry and resume rules of tabsync's clients. Events: "change",
 * "status" (detail: Status), "rejected", "retrying", "applied", "welcome", "answergone", "error"
 * (CustomEvent, see the module's header comment).
 */
export class TabsyncClient extends EventTarget {
  constructor(options: ClientOptions);
  readonly url: string;
  readonly workspace: string;
  readonly clientId: string;
  /** The shown state: confirmed plus pending ops. For reading. */
  readonly state: State;
  /** The server's state as last confirmed. For reading. */
  readonly confirmed: State;
  /** The outbox, in order. For reading. */
  readonly pending: PendingEntry[];
  readonly status: Status;
  readonly peers: Record<string, unknown>[];
  pacing: boolean;
  /** Opens the connection (and keeps reopening it until close()). */
  connect(): void;
  /** Closes for good: no reconnect. */
  close(): void;
  exportState(): SavedState;
  importState(data: SavedState): void;
  /** Submits an op; it shows in `state` at once. Returns its pending entry. */
  submit(op: Op): PendingEntry;
  /** Adds a tab (id made when missing) at `key` (default: the end). Returns the tab id. */
  add(tab: Partial<Tab> & { title?: string; url?: string }, options?: { key?: string; activate?: boolean }): string;
  move(tabId: string, key: string): PendingEntry;
  remove(tabId: string): PendingEntry;
  activate(tabId: string): PendingEntry;
  update(tabId: string, fields: { title?: string; url?: string; [field: string]: unknown }): PendingEntry;
  setEditable(editable: boolean): PendingEntry;
  restore(version: number | string): PendingEntry;
  reopen(tabId: string): PendingEntry;
  group(tabIds: string[], groupId: string, options?: { title?: string; color?: string }): PendingEntry;
  ungroup(tabIds: string[]): PendingEntry;
  updateGroup(groupId: string, options?: { title?: string; color?: string }): PendingEntry;
  /** Asks the server's history over the session; resolves with its HistoryAnswer. */
  history(query: HistoryQuery, options?: { timeout?: number }): Promise<Record<string, unknown>>;
  /** A position key between the keys of two tabs (null: an open end). */
  keyBetween(before: Tab | null, after: Tab | null): string;
  /** Tells the others which tab this client views ("" for none). */
  focus(tabId: string): void;
}
