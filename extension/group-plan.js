// The extension's group rules (docs/extension.md, "Tab groups") as pure functions: the browser's
// groups of a bound window against the workspace's and the group table (group-table.js). No
// browser API: `localGroupOps` returns the ops a pass submits, `remoteGroupActions` the browser
// calls executor.js makes. Neither ever closes a tab, nor sends or sets `collapsed`.
//
// ctx = { real: the window's tabs in order ({ id, groupId, pinned }), browserGroups: the window's
// groups ({ id, title, color, collapsed }), state: the client's state ({ tabs: [{ id, group }],
// groups: [{ id, title, color }] }), table: the TabTable, groups: the GroupTable,
// mirrorable(t): whether real tab t takes part, newGroupId(browserId), readOnly, groupBound }.

export const NO_GROUP = -1; // chrome.tabGroups.TAB_GROUP_ID_NONE

/** The window's mirrored tabs: [{ t, wsId, ws }] in real order (mapped and in the workspace). */
function mirrored(ctx) {
  const byId = new Map(ctx.state.tabs.map((w) => [w.id, w]));
  const out = [];
  for (const t of ctx.real) {
    const wsId = ctx.table.wsOf(t.id);
    if (wsId !== undefined && byId.has(wsId) && ctx.mirrorable(t)) out.push({ t, wsId, ws: byId.get(wsId) });
  }
  return out;
}

/**
 * Rule "a group is matched by its tabs": browser groups gone are forgotten; a browser group the
 * table does not know whose mirrored tabs all were, last synced, in one workspace group that no
 * other browser group holds is that group (a browser restart gives restored groups new ids).
 */
export function matchGroups(ctx) {
  const { groups } = ctx;
  groups.forgetBrowser(new Set(ctx.browserGroups.map((g) => g.id)));
  const tabs = mirrored(ctx);
  for (const b of ctx.browserGroups) {
    if (groups.wsOf(b.id) !== undefined) continue;
    const was = new Set(tabs.filter((m) => m.t.groupId === b.id).map((m) => groups.member.get(m.wsId) ?? ""));
    if (was.size !== 1) continue;
    const [g] = was;
    if (g !== "" && groups.browserOf(g) === undefined) groups.map(b.id, g);
  }
}

/** The workspace group a browser group stands for, made (and mapped) when it is new. */
function wsGroupOf(ctx, browserId, made) {
  if (browserId === NO_GROUP || browserId === undefined) return "";
  let g = ctx.groups.wsOf(browserId);
  if (g === undefined) {
    g = ctx.newGroupId(browserId);
    ctx.groups.map(browserId, g);
    made.add(g);
  }
  return g;
}

/**
 * Rule "a local regroup is a group op": a mirrored tab whose browser group differs from its group
 * last synced was regrouped here: the tabs that entered a group go out as one `group` per group
 * (window order; a group the workspace lacks carries its title and colour), those that left every group as one
 * `ungroup`. Rule "a local rename is an updateGroup": a mapped group whose title or colour differs
 * from the ones last synced sends the changed fields. What is sent is recorded as synced.
 */
export function localGroupOps(ctx) {
  if (ctx.readOnly || ctx.groupBound) return [];
  matchGroups(ctx);
  const { groups } = ctx;
  const made = new Set();
  const into = new Map(); // workspace group id -> workspace tab ids
  const out = [];
  for (const { t, wsId } of mirrored(ctx)) {
    const now = wsGroupOf(ctx, t.groupId, made);
    if (now === (groups.member.get(wsId) ?? "")) continue;
    groups.member.set(wsId, now);
    if (now === "") out.push(wsId);
    else into.set(now, [...(into.get(now) ?? []), wsId]);
  }
  const ops = [];
  const byBrowser = new Map(ctx.browserGroups.map((b) => [b.id, b]));
  const known = new Set(ctx.state.groups.map((g) => g.id));
  for (const [g, tabIds] of into) {
    const op = { tabIds, groupId: g };
    if (made.has(g) || !known.has(g)) { // a group the workspace lacks is made by this op: with its fields
      const b = byBrowser.get(groups.browserOf(g));
      Object.assign(op, { title: b.title ?? "", color: b.color });
      groups.fields.set(g, { title: op.title, color: op.color });
    }
    ops.push({ group: op });
  }
  if (out.length > 0) ops.push({ ungroup: { tabIds: out } });
  for (const b of ctx.browserGroups) {
    const g = groups.wsOf(b.id);
    const last = g !== undefined && groups.fields.get(g);
    if (!last) continue;
    const update = {};
    if ((b.title ?? "") !== last.title) update.title = b.title ?? "";
    if (b.color !== last.color) update.color = b.color;
    if (Object.keys(update).length === 0) continue;
    groups.fields.set(g, { ...last, ...update });
    ops.push({ updateGroup: { groupId: g, ...update } });
  }
  return ops;
}

/**
 * Rule "the window's groups take the workspace's" (after the remote moves, from a fresh read): a
 * tab whose browser group is not its workspace group's is grouped into it (`create` when no
 * browser group shows it yet) or ungrouped; a title or colour that differs is set. Rule "a remote
 * move never ungroups": a tab the browser took out of its group while moving it reads as such a
 * difference and is grouped again (`ctx.moved`: the real tabs this pass moved). Rule "the user's
 * change is not overwritten": a tab or a group that differs from what was last synced, and that the
 * mirror did not move, was changed here since the local half ran: it is left for the next pass to
 * send. What is applied is recorded as synced before the calls. Never `collapsed`, never a close.
 */
export function remoteGroupActions(ctx) {
  if (ctx.groupBound) return [];
  matchGroups(ctx);
  const { groups } = ctx;
  const wsGroups = new Map(ctx.state.groups.map((g) => [g.id, g]));
  const present = new Set(ctx.browserGroups.map((b) => b.id));
  const join = new Map(); // workspace group id -> real tab ids
  const leave = [];
  for (const { t, wsId, ws } of mirrored(ctx)) {
    const want = wsGroups.has(ws.group ?? "") ? ws.group : "";
    const have = t.groupId === NO_GROUP || t.groupId === undefined ? "" : groups.wsOf(t.groupId) ?? null;
    if (have !== (groups.member.get(wsId) ?? "") && !ctx.moved?.has(t.id)) continue; // the user's, not sent yet
    groups.member.set(wsId, want);
    if (have === want) continue;
    if (want === "") leave.push(t.id);
    else join.set(want, [...(join.get(want) ?? []), t.id]);
  }
  const actions = [];
  if (leave.length > 0) actions.push({ ungroup: { tabIds: leave } });
  for (const [g, tabIds] of join) {
    const b = groups.browserOf(g);
    const { title, color } = wsGroups.get(g);
    if (b !== undefined && present.has(b)) actions.push({ group: { groupId: b, tabIds } });
    else actions.push({ create: { wsGroupId: g, tabIds, title, color } });
  }
  for (const b of ctx.browserGroups) {
    const g = groups.wsOf(b.id);
    const w = g !== undefined && wsGroups.get(g);
    const last = w && groups.fields.get(g);
    if (!w || (last && ((b.title ?? "") !== last.title || b.color !== last.color))) { if (w) wsGroups.delete(g); continue; }
    groups.fields.set(g, { title: w.title, color: w.color });
    if ((b.title ?? "") !== w.title || b.color !== w.color) actions.push({ updateGroup: { groupId: b.id, title: w.title, color: w.color } });
  }
  for (const [g, w] of wsGroups) if (!groups.fields.has(g) || groups.browserOf(g) === undefined) groups.fields.set(g, { title: w.title, color: w.color });
  const live = new Set(ctx.state.groups.map((g) => g.id));
  for (const g of [...groups.fields.keys()]) if (!live.has(g)) groups.fields.delete(g);
  return actions;
}
