// The tab table: what one bound window's mirror knows about its real tabs, as one value (no
// browser API, no storage: node tests it). It replaces the parallel maps and sets the mirror kept.
import { GroupTable } from "./group-table.js";

/**
 * One record per real (browser) tab: its workspace id (`wsId`, null while unmapped), the fields
 * last synced with its page (`seen`), when its page last changed and last sent an update, the
 * navigation the mirror started and waits for (`navigating`), why it is kept local only
 * (`localOnly`: { code, wsId?, title }) or whether it is kept out of the mirror (`ignored`).
 * Beside the records, the workspace ids the window's passes remember: `removed` (an applied op
 * removed it, its real tab still to close), `snapshotRemoved` (a snapshot left it out, no op seen),
 * `dismissed` (closed here only, in a read-only mirror), `localIds` (its add was refused), and the
 * order, the active tab and the pause last synced.
 *
 * Guarantees: the id map is two-way and one-to-one (a workspace id names at most one real tab:
 * mapping it to another tab unmaps the first); `replaceTab` moves every field of a record;
 * `serialize()` writes the shape the extension has stored since 0.1 and `restore` reads it, so an
 * extension update keeps its tables.
 */
export class TabTable {
  constructor() {
    /** @type {Map<number, TabRecord>} */
    this.records = new Map();
    /** @type {Map<string, number>} workspace id -> real tab id */
    this.byWs = new Map();
    this.removed = new Set();
    this.snapshotRemoved = new Set();
    this.dismissed = new Set();
    this.localIds = new Set();
    this.lastOrder = null; // workspace ids in the order last synced (null: none yet)
    this.lastActive = null; // the active workspace tab last synced
    this.paused = null; // { kind: "epoch" | "brake", reason, count }
    this.groups = new GroupTable(); // the window's groups (docs/extension.md, "Tab groups")
  }

  /** The record of real tab `tid`, made empty if there is none. */
  record(tid) {
    let r = this.records.get(tid);
    if (!r) {
      r = { wsId: null, seen: null, changedAt: 0, updatedAt: 0, navigating: null, localOnly: null, ignored: false };
      this.records.set(tid, r);
    }
    return r;
  }

  /** Real tab `tid` shows workspace tab `wsId` (a tab mapped to `wsId` before is unmapped). */
  map(tid, wsId) {
    const other = this.byWs.get(wsId);
    if (other !== undefined && other !== tid) this.unmap(other);
    const r = this.record(tid);
    if (r.wsId !== null && r.wsId !== wsId) this.byWs.delete(r.wsId);
    r.wsId = wsId;
    this.byWs.set(wsId, tid);
  }

  /** Real tab `tid` leaves the mirror (its other fields stay). */
  unmap(tid) {
    const r = this.records.get(tid);
    if (!r || r.wsId === null) return;
    this.byWs.delete(r.wsId);
    r.wsId = null;
    r.changedAt = 0;
  }

  /** The workspace id of real tab `tid`, or undefined. */
  wsOf(tid) {
    return this.records.get(tid)?.wsId ?? undefined;
  }

  /** The real tab of workspace id `wsId`, or undefined. */
  tabOf(wsId) {
    return this.byWs.get(wsId);
  }

  /** [real tab id, workspace id] of every mapped tab. */
  mapped() {
    return [...this.byWs].map(([w, t]) => [t, w]);
  }

  mappedIds() {
    return new Set(this.byWs.keys());
  }

  seen(tid) {
    return this.records.get(tid)?.seen ?? undefined;
  }

  setSeen(tid, fields) {
    this.record(tid).seen = fields;
  }

  localOnly(tid) {
    return this.records.get(tid)?.localOnly ?? undefined;
  }

  /** [real tab id, { code, wsId?, title }] of every tab kept local only. */
  localOnlyEntries() {
    return [...this.records].filter(([, r]) => r.localOnly).map(([t, r]) => [t, r.localOnly]);
  }

  setLocalOnly(tid, value) {
    this.record(tid).localOnly = value;
  }

  ignored(tid) {
    return Boolean(this.records.get(tid)?.ignored);
  }

  ignore(tid) {
    this.record(tid).ignored = true;
  }

  /** Everything known of real tab `tid` goes (it closed). */
  forget(tid) {
    this.unmap(tid);
    this.records.delete(tid);
  }

  /**
   * Real tab `added` replaced `old` (prerendering, a discarded tab brought back): the record moves
   * whole, its workspace id, page, marks and navigation included.
   */
  replaceTab(old, added) {
    const r = this.records.get(old);
    if (!r) return;
    this.records.delete(old);
    if (this.records.has(added)) this.forget(added);
    this.records.set(added, r);
    if (r.wsId !== null) this.byWs.set(r.wsId, added);
  }

  /** The workspace's tab `wsId` is in the workspace again (re-added, reopened): nothing to close. */
  present(wsId) {
    this.removed.delete(wsId);
    this.snapshotRemoved.delete(wsId);
  }

  /** The window's tabs leave the mirror, untouched (adopting it was refused, or the user chose so). */
  release() {
    for (const tid of [...this.records.keys()]) {
      const r = this.records.get(tid);
      if (r.ignored) { r.wsId = null; r.localOnly = null; r.seen = null; continue; }
      this.records.delete(tid);
    }
    this.byWs.clear();
    this.lastOrder = null;
    this.lastActive = null;
  }

  /** The stored shape (storage.local "resume:<id>", beside the client's state): arrays of pairs. */
  serialize() {
    const pairs = (pick) => [...this.records].filter(([, r]) => pick(r) != null).map(([t, r]) => [t, pick(r)]);
    return {
      map: [...this.byWs].map(([w, t]) => [t, w]),
      seen: pairs((r) => r.seen),
      ignored: [...this.records].filter(([, r]) => r.ignored).map(([t]) => t),
      localOnly: pairs((r) => r.localOnly),
      navigating: pairs((r) => r.navigating),
      removed: [...this.removed], snapshotRemoved: [...this.snapshotRemoved], dismissed: [...this.dismissed],
      localIds: [...this.localIds], paused: this.paused, lastOrder: this.lastOrder, lastActive: this.lastActive,
      groups: this.groups.serialize(),
    };
  }

  /**
   * A table from a stored record `r` (this shape, or the one saved before the table existed: the
   * same keys). `trusted`: the real tab ids in it are this browser session's (a worker restart);
   * else (a browser restart, an extension update) only the workspace-id sets, the order and the
   * pause are kept (and the groups last synced, without the browser's group ids: matched again by
 * membership), and the tab-id part is returned apart as `prior` for the window matcher.
   */
  static restore(r = {}, trusted = true) {
    const t = new TabTable();
    t.removed = new Set(r.removed ?? []);
    t.dismissed = new Set(r.dismissed ?? []);
    t.snapshotRemoved = new Set(r.snapshotRemoved ?? []);
    t.localIds = new Set(r.localIds ?? []);
    t.lastOrder = r.lastOrder ?? null;
    t.paused = r.paused ?? null;
    t.groups = GroupTable.restore(r.groups, trusted);
    const prior = { map: new Map((r.map ?? []).map(([k, v]) => [Number(k), v])), seen: new Map((r.seen ?? []).map(([k, v]) => [Number(k), v])) };
    if (!trusted) return { table: t, prior };
    for (const [tid, wid] of prior.map) t.map(tid, wid);
    for (const [tid, seen] of prior.seen) t.setSeen(tid, seen);
    for (const tid of r.ignored ?? []) t.ignore(Number(tid));
    for (const [tid, v] of r.localOnly ?? []) t.setLocalOnly(Number(tid), v);
    for (const [tid, v] of r.navigating ?? []) t.record(Number(tid)).navigating = v;
    t.lastActive = r.lastActive ?? null;
    return { table: t, prior };
  }
}

/** @typedef {{ wsId: string | null, seen: object | null, changedAt: number, updatedAt: number,
 *   navigating: { url: string, until: number } | null, localOnly: object | null, ignored: boolean }} TabRecord */
