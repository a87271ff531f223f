// A browser window's groups and a server's, as values, for the group planner's node tests
// (group-plan.test.mjs): what the server does with the group ops (membership and fields; the
// window keeps the workspace's order here, so where the server puts a tab does not matter) and
// what the browser does with the executor's group calls (as Chrome: a group is gone with its
// last tab; `collapsed` is the browser's own). No browser: the effects, written out plainly.
import { TabTable } from "../../extension/tab-table.js";
import { GroupTable } from "../../extension/group-table.js";
import { NO_GROUP } from "../../extension/group-plan.js";

export const COLORS = ["grey", "blue", "red", "yellow", "green", "pink", "purple", "cyan", "orange"];

/** The planner's input: real tabs `real` mapped to `ws${id}`, browser groups, state, tables. */
export function groupContext(real, browserGroups, state, groups, extra = {}) {
  const table = new TabTable();
  for (const t of real) if (!t.local) table.map(t.id, `ws${t.id}`);
  let made = 0;
  return {
    real, browserGroups, state, table, groups, mirrorable: (t) => !t.pinned && !t.local,
    newGroupId: (b) => `gnew${b}-${made++}`, readOnly: false, groupBound: false, ...extra,
  };
}

/** The server's answer to the group ops (membership and fields), a new state returned. */
export function serveGroups(state, ops) {
  const tabs = state.tabs.map((t) => ({ ...t }));
  let groups = state.groups.map((g) => ({ ...g }));
  for (const op of ops) {
    const [[kind, body]] = Object.entries(op);
    if (kind === "group") {
      let g = groups.find((x) => x.id === body.groupId);
      if (!g) { g = { id: body.groupId, title: body.title ?? "", color: body.color ?? "grey" }; groups.push(g); }
      if (body.title !== undefined) g.title = body.title;
      if (body.color !== undefined) g.color = body.color;
      for (const t of tabs) if (body.tabIds.includes(t.id)) t.group = body.groupId;
    }
    if (kind === "ungroup") for (const t of tabs) if (body.tabIds.includes(t.id)) t.group = "";
    if (kind === "updateGroup") Object.assign(groups.find((x) => x.id === body.groupId) ?? {}, body.title !== undefined ? { title: body.title } : {}, body.color !== undefined ? { color: body.color } : {});
  }
  groups = groups.filter((g) => tabs.some((t) => t.group === g.id));
  return { ...state, tabs, groups };
}

/** The browser after the executor's group calls: [real, browserGroups] (new arrays). */
export function runGroupActions(real, browserGroups, actions, groups) {
  const tabs = real.map((t) => ({ ...t }));
  let bgs = browserGroups.map((b) => ({ ...b }));
  let next = 1000 + Math.max(0, ...bgs.map((b) => b.id));
  for (const a of actions) {
    const [[kind, body]] = Object.entries(a);
    assert(["group", "ungroup", "create", "updateGroup"].includes(kind), `unknown group action ${kind}`);
    if (kind === "ungroup") for (const t of tabs) if (body.tabIds.includes(t.id)) t.groupId = NO_GROUP;
    if (kind === "group") for (const t of tabs) if (body.tabIds.includes(t.id)) t.groupId = body.groupId;
    if (kind === "create") {
      const id = next++;
      bgs.push({ id, title: body.title, color: body.color, collapsed: false });
      groups.map(id, body.wsGroupId); // the executor records the new browser id
      for (const t of tabs) if (body.tabIds.includes(t.id)) t.groupId = id;
    }
    if (kind === "updateGroup") {
      assert(!("collapsed" in body), "a remote change never sets collapsed");
      Object.assign(bgs.find((b) => b.id === body.groupId), { title: body.title, color: body.color });
    }
  }
  bgs = bgs.filter((b) => tabs.some((t) => t.groupId === b.id));
  return [tabs, bgs];
}

function assert(ok, message) {
  if (!ok) throw new Error(message);
}

/**
 * The server's order and membership under the placement rule (shared/DESIGN.md, "Tab groups"),
 * for `move` (by key) and `group` into an existing group: `tabs` [{ id, key, group }] changed in place.
 */
export function placeByRule(tabs, keyBetween, op) {
  const place = (id, key, asked) => {
    const i = tabs.findIndex((t) => t.id === id);
    const [t] = tabs.splice(i, 1);
    t.key = key;
    let at = tabs.findIndex((x) => x.key > key);
    if (at < 0) at = tabs.length;
    tabs.splice(at, 0, t);
    const L = tabs[at - 1]?.group ?? "";
    const R = tabs[at + 1]?.group ?? "";
    const alone = !tabs.some((x) => x !== t && x.group === asked);
    t.group = L && L === R ? L : asked && (L === asked || R === asked || alone) ? asked : "";
  };
  if (op.move) place(op.move.tabId, op.move.place.key, tabs.find((t) => t.id === op.move.tabId).group);
  if (op.group) {
    for (const id of op.group.tabIds) {
      if (tabs.find((t) => t.id === id).group === op.group.groupId) continue;
      const last = tabs.findLastIndex((t) => t.group === op.group.groupId);
      place(id, keyBetween(tabs[last].key, tabs[last + 1]?.key ?? null), op.group.groupId);
    }
  }
}
