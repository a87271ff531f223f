// The browser side of a group-bound binding (docs/extension.md, "The shared group"): the mirror
// of one browser group instead of a whole window. The rules are shared-group.js's (pure); these
// are Mirror's methods (binding-mirror.js) that read the group, adopt it, open the workspace as a
// group in the current window, and keep its title and colour.

import { api as chrome } from "./browser-api.js";
import { pageFields, workspaceTabId } from "./mirror.js";
import { mirrorable } from "./plan.js";
import { isPlaceholder, urlFor, windowTabs } from "./executor.js";
import { SHARED, askedGroup, boundTabs, localSharedOps, remoteSharedUpdate, restoredGroupId, sharedFields } from "./shared-group.js";

/** Group-bound methods of Mirror. `this.b.group`: the binding is of one group; `this.b.groupId` its browser id. */
export class GroupBoundMethods {
  /**
   * The real tabs the mirror sees: the window's, or a group-bound binding's group's alone (its
   * window index in `this.offset`). Null when the window, or the bound group, is gone.
   */
  async scopeTabs() {
    const all = await windowTabs(this.b.windowId);
    this.offset = 0;
    if (!all || !this.b.group) return all;
    const scope = boundTabs(all, this.b.groupId);
    if (!scope) return null;
    this.offset = scope.offset;
    return scope.tabs;
  }

  /** The planner's hook for adds in a group-bound window (shared-group.js askedGroup), else none. */
  askGroupHook() {
    if (!this.b.group) return undefined;
    const groupOf = new Map(this.client.state.tabs.map((t) => [t.id, t.group ?? ""]));
    return (id, left, work) => askedGroup(groupOf, work, id, left);
  }

  /** The group half of a group-bound pass: the bound group's title and colour both ways. */
  async sharedGroupPass(local) {
    const bound = await chrome.tabGroups.get(this.b.groupId).catch(() => null);
    const ctx = {
      bound, state: this.client.state, groups: this.table.groups, workspace: this.b.workspace, readOnly: this.readOnly,
      newGroupId: () => workspaceTabId(`g${this.tag}`, this.nonce, this.b.groupId),
    };
    if (local) { for (const op of localSharedOps(ctx)) this.client.submit(op); return; }
    const update = remoteSharedUpdate(ctx);
    if (update) await chrome.tabGroups.update(this.b.groupId, update).catch(() => {});
  }

  /**
   * Rule "a remote move never takes a tab out of the shared group": after the arrange moved tabs,
   * a mapped tab of the workspace that the browser left outside the group joins it again.
   */
  async regroupMoved() {
    const all = (await windowTabs(this.b.windowId)) ?? [];
    const ids = new Set(this.client.state.tabs.map((t) => t.id));
    const out = all.filter((t) => t.groupId !== this.b.groupId && ids.has(this.table.wsOf(t.id) ?? ""));
    if (out.length > 0) await chrome.tabs.group({ groupId: this.b.groupId, tabIds: out.map((t) => t.id) }).catch(() => {});
  }

  /**
   * An empty workspace takes the bound group's tabs (a new group made of the active tab when none
   * was chosen) in one `replace` that carries one workspace group with the browser group's title
   * and colour: the shared group's. The window's other tabs are never read.
   */
  async adoptGroup() {
    const table = this.table;
    if (this.b.groupId === null) await this.newBrowserGroup();
    const g = await chrome.tabGroups.get(this.b.groupId);
    const tabs = (await windowTabs(this.b.windowId) ?? []).filter((t) => t.groupId === this.b.groupId && mirrorable(table, t));
    if (tabs.length === 0) return;
    const groupId = workspaceTabId(`g${this.tag}`, this.nonce, g.id);
    const list = tabs.map((t) => {
      const id = workspaceTabId(this.tag, this.nonce, t.id);
      const f = pageFields(t, isPlaceholder(t));
      table.map(t.id, id);
      table.setSeen(t.id, f);
      const tab = { id, title: f.title, group: groupId };
      if (f.url) tab.url = f.url;
      if (f.badge) tab.badge = f.badge;
      return tab;
    });
    this.client.submit({ replace: { tabs: list, groups: [{ id: groupId, title: g.title ?? "", color: g.color }] } });
    table.groups.fields.set(SHARED, { title: g.title ?? "", color: g.color });
    table.lastOrder = list.map((t) => t.id);
    const active = tabs.find((t) => t.active);
    table.lastActive = active ? table.wsOf(active.id) : list[0].id;
    if (table.lastActive !== list[0].id) this.client.activate(table.lastActive);
  }

  /** "A new group" in the popup: the window's active tab (unpinned) becomes a group named after the workspace. */
  async newBrowserGroup() {
    const [active] = await chrome.tabs.query({ windowId: this.b.windowId, active: true });
    if (!active || active.pinned) throw new Error("a new group starts from the active tab, which must not be pinned");
    this.b.groupId = await chrome.tabs.group({ tabIds: [active.id], createProperties: { windowId: this.b.windowId } });
    await chrome.tabGroups.update(this.b.groupId, { title: this.b.workspace });
  }

  /**
   * A workspace with tabs opens as a new group at the end of the binding's window (a new window
   * when that one is gone): its first tab now, the others by the pass (step 4, into the group).
   * A group the user chose is never merged into, as a window is not.
   */
  async openGroup(state) {
    let win = await chrome.windows.get(this.b.windowId).catch(() => null);
    const first = state.tabs[0];
    const url = urlFor(first ?? { title: "(empty workspace)" }, false);
    let tab;
    if (win) tab = await chrome.tabs.create({ windowId: win.id, url, active: true });
    else {
      win = await chrome.windows.create({ url, focused: true, incognito: this.b.incognito });
      [tab] = win.tabs;
    }
    this.b.windowId = win.id;
    this.b.closed = false;
    this.b.groupId = await chrome.tabs.group({ tabIds: [tab.id], createProperties: { windowId: win.id } });
    const fields = sharedFields(state, this.b.workspace);
    await chrome.tabGroups.update(this.b.groupId, { title: fields.title, color: fields.color });
    const table = this.table;
    table.groups.fields.set(SHARED, { title: fields.title, color: fields.color });
    if (first) {
      table.map(tab.id, first.id);
      table.setSeen(tab.id, { title: first.title, badge: first.badge, url: first.url || null });
      table.lastOrder = [first.id];
    } else {
      table.ignore(tab.id);
      table.lastOrder = [];
    }
    table.lastActive = null;
  }

  /**
   * After a browser restart, an update or Reopen matched the window: the bound group is the one
   * holding most of the mapped tabs (its id is new); none grouped: they become the group again.
   */
  async findBoundGroup() {
    const all = (await windowTabs(this.b.windowId)) ?? [];
    let g = restoredGroupId(all, this.table);
    const mapped = all.filter((t) => this.table.wsOf(t.id) !== undefined);
    if (g === null && mapped.length > 0) {
      g = await chrome.tabs.group({ tabIds: mapped.map((t) => t.id), createProperties: { windowId: this.b.windowId } });
      const fields = this.table.groups.fields.get(SHARED) ?? sharedFields(this.client.state, this.b.workspace);
      await chrome.tabGroups.update(g, { title: fields.title, color: fields.color });
    }
    this.b.groupId = g;
  }
}
