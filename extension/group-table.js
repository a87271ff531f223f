// The group table: which browser group of a bound window is which workspace group, and the groups
// as last synced (docs/extension.md, "Tab groups"). No browser API, no storage: node tests it.

/**
 * Browser group id → workspace group id (one to one), and what was last synced: each mirrored
 * workspace tab's group (`member`, "" for none) and each workspace group's title and colour
 * (`fields`). A browser's group ids change when it restarts; `forgetBrowser` drops the ids gone and
 * the planner matches the new ones by membership against `member`.
 *
 * Guarantees: the map is two-way and one-to-one (mapping a workspace group to another browser
 * group unmaps the first); `serialize()` and `restore()` round-trip every field; a restore after
 * a browser restart keeps what was synced and drops the browser's ids, which are new.
 */
export class GroupTable {
  constructor() {
    /** @type {Map<number, string>} browser group id -> workspace group id */
    this.byBrowser = new Map();
    /** @type {Map<string, number>} workspace group id -> browser group id */
    this.byWs = new Map();
    /** @type {Map<string, string>} workspace tab id -> its workspace group last synced ("" none) */
    this.member = new Map();
    /** @type {Map<string, {title: string, color: string}>} workspace group id -> fields last synced */
    this.fields = new Map();
  }

  wsOf(browserId) {
    return this.byBrowser.get(browserId);
  }

  browserOf(wsGroupId) {
    return this.byWs.get(wsGroupId);
  }

  /** Browser group `browserId` shows workspace group `wsGroupId`. */
  map(browserId, wsGroupId) {
    const other = this.byWs.get(wsGroupId);
    if (other !== undefined) this.byBrowser.delete(other);
    const before = this.byBrowser.get(browserId);
    if (before !== undefined) this.byWs.delete(before);
    this.byBrowser.set(browserId, wsGroupId);
    this.byWs.set(wsGroupId, browserId);
  }

  /** Drops the mappings of browser groups not in `present` (a Set of browser group ids). */
  forgetBrowser(present) {
    for (const [b, w] of [...this.byBrowser]) {
      if (!present.has(b)) { this.byBrowser.delete(b); this.byWs.delete(w); }
    }
  }

  serialize() {
    return { byBrowser: [...this.byBrowser], member: [...this.member], fields: [...this.fields] };
  }

  /** `trusted`: the browser group ids in `r` are this browser session's (else they are dropped). */
  static restore(r = {}, trusted = true) {
    const g = new GroupTable();
    if (trusted) for (const [b, w] of r.byBrowser ?? []) g.map(Number(b), w);
    g.member = new Map(r.member ?? []);
    g.fields = new Map((r.fields ?? []).map(([id, f]) => [id, { ...f }]));
    return g;
  }
}
