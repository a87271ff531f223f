// The shared group (docs/extension.md, "The shared group"): a binding of one browser group of a
// window instead of the whole window. Pure rules, no browser API (node tests them in
// Tests/extension/shared-group.test.mjs): which real tabs the mirror sees, where they sit in the
// window, the group's title and colour against the workspace's, the group a tab added there asks
// for, and which browser group a restarted browser restored.

import { NO_GROUP } from "./group-plan.js";

export const COLORS = ["grey", "blue", "red", "yellow", "green", "pink", "purple", "cyan", "orange"];
/** The group table's key (group-table.js `fields`) for the bound group's title and colour as last synced. */
export const SHARED = "*shared";

/**
 * Rule "the workspace is the group's tabs": the real tabs of browser group `groupId`, in window
 * order, and `offset`, the window index of the first (the planner's indexes are the group's own,
 * executor calls take `offset` + index). Null when the group is gone (closed, ungrouped, its last
 * tab dragged out), which ends the binding as a closed window does.
 */
export function boundTabs(real, groupId) {
  if (groupId === null || groupId === undefined || groupId === NO_GROUP) return null;
  const tabs = real.filter((t) => t.groupId === groupId);
  if (tabs.length === 0) return null;
  return { tabs, offset: tabs[0].index ?? real.indexOf(tabs[0]) };
}

/** Window indexes for actions planned over the group's tabs alone (plan.js `open`, `move`, `filler`). */
export function shiftActions(actions, offset) {
  return actions.map((a) => {
    if (a.open) return { open: { ...a.open, index: a.open.index + offset } };
    if (a.move) return { move: { ...a.move, index: a.move.index + offset } };
    if (a.filler) return { filler: { index: offset } }; // the emptied group keeps one tab, in its place
    return a;
  });
}

/** One of the nine colours, the same for a workspace id in every browser. */
export function colorOf(workspace) {
  let h = 0;
  for (const ch of String(workspace)) h = (h * 31 + ch.codePointAt(0)) >>> 0;
  return COLORS[h % COLORS.length];
}

/**
 * Rule "the group's title and colour are the workspace's": its first group's (in display order),
 * `groupId` that group; a workspace with no group shows its id and a colour drawn from the id
 * (`groupId` ""). Every browser bound to the workspace computes the same.
 */
export function sharedFields(state, workspace) {
  const first = state.tabs.find((t) => t.group);
  const g = first && (state.groups ?? []).find((x) => x.id === first.group);
  if (g) return { groupId: g.id, title: g.title ?? "", color: g.color };
  return { groupId: "", title: workspace, color: colorOf(workspace) };
}

function same(a, b) {
  return Boolean(a && b) && (a.title ?? "") === (b.title ?? "") && a.color === b.color;
}

/**
 * Rule "a rename of the bound group goes to the workspace": the bound browser group `bound`
 * ({ title, color }) differs from the fields last synced (`groups.fields` under SHARED): an
 * `updateGroup` of the changed fields of the workspace's first group, or, when it has no group, a
 * `group` of all its tabs, in order (nothing moves), into a new group `newGroupId()` carrying them.
 * Recorded as synced. The first pass of a binding records the fields without sending. A
 * read-only mirror sends nothing (the rename stays local; the workspace's is not forced on it).
 */
export function localSharedOps(ctx) {
  const { bound, state, groups } = ctx;
  const last = groups.fields.get(SHARED);
  if (!bound) return [];
  if (!last) { groups.fields.set(SHARED, { title: bound.title ?? "", color: bound.color }); return []; }
  if (same(bound, last) || ctx.readOnly) return [];
  const now = sharedFields(state, ctx.workspace);
  groups.fields.set(SHARED, { title: bound.title ?? "", color: bound.color });
  if (now.groupId) {
    const update = {};
    if ((bound.title ?? "") !== last.title) update.title = bound.title ?? "";
    if (bound.color !== last.color) update.color = bound.color;
    return [{ updateGroup: { groupId: now.groupId, ...update } }];
  }
  if (state.tabs.length === 0) return [];
  return [{ group: { tabIds: state.tabs.map((t) => t.id), groupId: ctx.newGroupId(), title: bound.title ?? "", color: bound.color } }];
}

/**
 * Rule "the bound group follows the workspace": when the workspace's title or colour (sharedFields)
 * differ from the ones last synced and the browser group still shows those (the user did not
 * rename it since: that change goes out first), the browser group takes the workspace's. Returns
 * the `{ title, color }` to set, or null; recorded as synced before the call. Never `collapsed`.
 * Rule "a viewer's rename stays local until the workspace's next": a read-only binding's rename
 * is never sent, so it is kept (not undone by sync) while the workspace's fields are the ones last
 * synced; once the workspace's change, the newer name is the workspace's and the group shows it.
 */
export function remoteSharedUpdate(ctx) {
  const { bound, state, groups } = ctx;
  if (!bound) return null;
  const last = groups.fields.get(SHARED);
  const want = sharedFields(state, ctx.workspace);
  if (last && !same(bound, last) && (!ctx.readOnly || same(want, last))) return null;
  groups.fields.set(SHARED, { title: want.title, color: want.color });
  return same(bound, want) ? null : { title: want.title, color: want.color };
}

/**
 * Rule "the workspace's own groups stay untouched": a tab added in a group-bound window asks for
 * its left neighbour's workspace group, or, first in the group, its right neighbour's (the
 * server's placement rule confirms or drops it), so adding a tab never splits or extends a group
 * the whole-window clients see against their rule. `groupOf`: workspace tab id -> group ("").
 */
export function askedGroup(groupOf, work, id, leftId) {
  const i = leftId ? work.tabs.findIndex((t) => t.id === leftId) : -1;
  const neighbour = leftId ?? work.tabs[i + 1]?.id;
  const g = (neighbour && groupOf.get(neighbour)) || "";
  groupOf.set(id, g);
  return g;
}

/**
 * Rule "a group-bound window is matched by its group's tabs": after a browser restart (new tab ids),
 * the records are matched against the tabs of one browser group of the window, the one that matches
 * them best (`score(tabs)`; ties: the group last bound, by its id (Firefox keeps it) or `wasBound(g)`,
 * its title and colour the ones last synced (Chromium gives a new id); then the leftmost), never
 * against the window's private tabs: a private tab showing the same page as a tab of the group,
 * matched first by URL, would be mapped in its place, and the group's own tab then sent as an `add`
 * and the workspace's as a `remove`. The whole window when no group matches at all (the browser
 * restored the tabs ungrouped).
 */
export function restoredScope(tabs, groupId, score, wasBound = () => false) {
  const groups = new Map();
  for (const t of tabs) {
    if (t.groupId === undefined || t.groupId === NO_GROUP) continue;
    if (!groups.has(t.groupId)) groups.set(t.groupId, []);
    groups.get(t.groupId).push(t);
  }
  let best = null;
  for (const [g, list] of groups) {
    const s = score(list);
    const bound = g === groupId || wasBound(g);
    if (s > 0 && (best === null || s > best.s || (s === best.s && bound && !best.bound))) best = { s, list, bound };
  }
  return best ? best.list : tabs;
}

/**
 * Rule "a restored group is matched by its tabs": after a browser restart or an update the bound
 * group has a new id; it is the browser group holding most of the window's mapped tabs (ties: the
 * leftmost). Null when no mapped tab is in a group (the browser restored them ungrouped).
 */
export function restoredGroupId(real, table) {
  const count = new Map();
  for (const t of real) {
    if (t.groupId === undefined || t.groupId === NO_GROUP || table.wsOf(t.id) === undefined) continue;
    count.set(t.groupId, (count.get(t.groupId) ?? 0) + 1);
  }
  let best = null;
  for (const [g, n] of count) if (best === null || n > count.get(best)) best = g;
  return best;
}
