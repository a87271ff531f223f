// Tab groups in a client's state (docs/design.md, "Tab groups"; proto/README.md, "Tab groups"),
// for web/tabsync-client.js and every app built on it. No DOM, no socket.
//
// A state holds `groups` (`{ id, title, color }`, in the display order of their tabs) and each tab
// its `group` ("" for none). What this file guarantees of a state it changes: every tab's group is
// listed, no listed group is empty, and the list is in display order (`settleGroups`). The server's
// canonical ops carry every placed tab's final key and group, so `applyCanonicalGroupOp` needs no
// rule; `applyPendingGroupOp` and `predictedGroup` foresee the placement rule for this client's own
// ops not yet answered (what the user sees at once). The server decides: its Applied replaces the
// prediction whenever the two differ (another client's op came first).

import { generateKeyBetween } from "./fractional-indexing.js";

/** The browsers' nine group colours; a new group without one is `grey`. */
export const GROUP_COLORS = ["grey", "blue", "red", "yellow", "green", "pink", "purple", "cyan", "orange"];

/** A group of a Snapshot or an op, with protobuf JSON's left-out fields filled in. */
export function normalGroup(g = {}) {
  return { id: g.id ?? "", title: g.title ?? "", color: g.color || "grey" };
}

/** Makes `state.groups` exactly the groups some tab names, in display order (`state.tabs` sorted). */
export function settleGroups(state) {
  const byId = new Map((state.groups ?? []).map((g) => [g.id, g]));
  const ordered = [];
  for (const t of state.tabs) {
    const g = t.group ? byId.get(t.group) : undefined;
    if (g) { ordered.push(g); byId.delete(t.group); }
  }
  state.groups = ordered;
}

/** Sets a group's fields, adding it when new (`title`/`color` undefined: kept, or the defaults). */
function upsertGroup(state, id, title, color) {
  const old = state.groups.find((g) => g.id === id);
  const made = { id, title: title ?? old?.title ?? "", color: color ?? old?.color ?? "grey" };
  if (old) Object.assign(old, made); else state.groups.push(made);
}

/**
 * Applies a canonical `group`, `ungroup` or `updateGroup` (as an Applied carries it) to `state` in
 * place: each listed tab takes its key and the group (or none). Returns false when the op does not
 * fit the state (a tab or group it names is missing: then resync). The caller sorts and settles.
 */
export function applyCanonicalGroupOp(state, kind, op) {
  const find = (id) => state.tabs.find((t) => t.id === id);
  switch (kind) {
    case "group":
    case "ungroup": {
      const ids = op.tabIds ?? [];
      const keys = op.keys ?? [];
      if (ids.length !== keys.length || ids.some((id) => !find(id))) return false;
      ids.forEach((id, i) => { const t = find(id); t.key = keys[i]; t.group = kind === "group" ? op.groupId : ""; });
      if (kind === "group") upsertGroup(state, op.groupId, op.title, op.color);
      return true;
    }
    case "updateGroup": {
      const g = state.groups.find((x) => x.id === op.groupId);
      if (!g) return false;
      if ("title" in op) g.title = op.title;
      if ("color" in op) g.color = op.color;
      return true;
    }
    default:
      return false;
  }
}

/**
 * The placement rule as the server applies it, for the tab at index `i` of the sorted `tabs`: between
 * two tabs of G it joins G; else it keeps `asked` (the group it had, or asked for) if that group
 * exists and a neighbour is in it, or if it was that group's only tab (`alone`); else none.
 */
export function predictedGroup(tabs, groups, i, asked, alone = false) {
  const left = tabs[i - 1]?.group;
  const right = tabs[i + 1]?.group;
  if (left && left === right) return left;
  if (!asked || !groups.some((g) => g.id === asked)) return "";
  return left === asked || right === asked || alone ? asked : "";
}

/** Takes the named tabs out of `tabs` (in the order named) and returns them. */
function take(tabs, ids) {
  return ids.map((id) => tabs.splice(tabs.findIndex((t) => t.id === id), 1)[0]);
}

/** Puts `moved` right after index `after` of `tabs`, in order, with fresh keys and group `group`. */
function insertAfter(tabs, after, moved, group) {
  let previous = tabs[after]?.key ?? null;
  const next = tabs[after + 1]?.key ?? null;
  moved.forEach((t, n) => {
    t.key = generateKeyBetween(previous, next);
    t.group = group;
    previous = t.key;
    tabs.splice(after + 1 + n, 0, t);
  });
}

/** Whether the tab at `i` of `tabs` is strictly inside its group's span (both neighbours in it). */
function strictlyInside(tabs, i) {
  const g = tabs[i].group;
  return g !== "" && tabs[i - 1]?.group === g && tabs[i + 1]?.group === g;
}

/**
 * Applies one of this client's own group ops, not yet answered, to the optimistic `state` (tabs
 * sorted) as the server would apply it now. Returns false when it changes nothing the state can
 * show (no listed tab is there, the group is gone). The caller sorts and settles.
 */
export function applyPendingGroupOp(state, kind, body) {
  if (kind === "updateGroup") return applyCanonicalGroupOp(state, kind, body);
  const tabs = state.tabs;
  const present = [...new Set(body.tabIds ?? [])].filter((id) => tabs.some((t) => t.id === id));
  if (present.length === 0) return false;
  if (kind === "ungroup") {
    for (const id of present) {
      const i = tabs.findIndex((t) => t.id === id);
      const old = tabs[i].group;
      if (!old) continue;
      if (!strictlyInside(tabs, i)) { tabs[i].group = ""; continue; }
      const moved = take(tabs, [id]);
      insertAfter(tabs, tabs.findLastIndex((t) => t.group === old), moved, "");
    }
    return true;
  }
  const g = body.groupId;
  if (state.groups.some((x) => x.id === g)) {
    const movers = take(tabs, present.filter((id) => tabs.find((t) => t.id === id).group !== g));
    insertAfter(tabs, tabs.findLastIndex((t) => t.group === g), movers, g);
  } else {
    const others = take(tabs, present.slice(1));
    const f = tabs.findIndex((t) => t.id === present[0]);
    if (strictlyInside(tabs, f)) {
      const old = tabs[f].group;
      const block = take(tabs, [present[0]]).concat(others);
      insertAfter(tabs, tabs.findLastIndex((t) => t.group === old), block, g);
    } else {
      tabs[f].group = g;
      insertAfter(tabs, f, others, g);
    }
  }
  upsertGroup(state, g, body.title, body.color);
  return true;
}
