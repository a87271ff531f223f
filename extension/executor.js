// The browser side of a plan (plan.js): the one module of the reconcile that calls chrome.tabs.*.
// It does what the plan says, in order, and records in the tab table the real tabs it made.

import { api as chrome, firefox } from "./browser-api.js";

const BASE = chrome.runtime.getURL("");

export function isWebUrl(url) {
  return /^https?:\/\//i.test(url ?? "");
}

/** Whether real tab `tab` shows the extension's placeholder page (a lazy or url-less tab). */
export function isPlaceholder(tab) {
  return (tab.url || tab.pendingUrl || "").startsWith(BASE + "placeholder.html");
}

/** The URL a real tab for workspace tab `w` opens: the page, or a placeholder (lazy or url-less)
 * that carries the workspace tab's id, so a restored placeholder is recognised. */
export function urlFor(w, lazy) {
  if (isWebUrl(w.url) && !lazy) return w.url;
  const q = new URLSearchParams({ title: w.title ?? "" });
  if (isWebUrl(w.url)) q.set("url", w.url);
  if (w.id) q.set("id", w.id);
  return chrome.runtime.getURL(`placeholder.html?${q}`);
}

/** Opens the real tab of workspace tab `w` at `index`, in the background. Lazily, Firefox makes a
 * discarded tab that keeps its real URL and shows the title until it is first shown; Chromium
 * cannot create a discarded tab, so it opens the placeholder page. */
export function openTab(windowId, index, w, lazy) {
  if (lazy && firefox && isWebUrl(w.url)) {
    return chrome.tabs.create({ windowId, index, url: w.url, active: false, discarded: true, title: w.title || w.url });
  }
  return chrome.tabs.create({ windowId, index, url: urlFor(w, lazy), active: false });
}

/** Firefox: a tab just opened to load a page shows `about:blank` (loading, or even complete) until
 * its load commits; it has no `pendingUrl` as Chromium's have. Published then, it would go out
 * without its URL and the other windows would open a placeholder. So an unpublished tab at
 * `about:blank` waits for its URL, up to plan.js URL_WAIT_MS (a tab that stays blank is published then). */
const blankSince = new Map(); // tab id -> when first seen unpublished at about:blank
export function urlNotKnownYet(tab, waitMs) {
  if (!firefox || tab.url !== "about:blank") {
    blankSince.delete(tab.id);
    return false;
  }
  if (!blankSince.has(tab.id)) blankSince.set(tab.id, Date.now());
  return Date.now() - blankSince.get(tab.id) < waitMs;
}

/** The window's tabs in strip order, or null when the window is gone. */
export async function windowTabs(windowId) {
  try {
    return (await chrome.tabs.query({ windowId })).sort((a, b) => a.index - b.index);
  } catch {
    return null;
  }
}

/** The window's tab groups, or null when the browser has none (Firefox before 138). */
export async function windowGroups(windowId) {
  if (!chrome.tabGroups?.query || !chrome.tabs.group) return null;
  return chrome.tabGroups.query({ windowId }).catch(() => null);
}

/**
 * Runs the group actions of group-plan.js in window `windowId`, recording in `groups` (the group
 * table) the browser id of each group it makes. Never `collapsed`, never a close; a failed call
 * (a tab closed meanwhile) is left to the next pass, which reads the window afresh.
 */
export async function executeGroups(actions, windowId, groups) {
  for (const a of actions) {
    if (a.ungroup) await chrome.tabs.ungroup(a.ungroup.tabIds).catch(() => {});
    else if (a.group) await chrome.tabs.group({ groupId: a.group.groupId, tabIds: a.group.tabIds }).catch(() => {});
    else if (a.updateGroup) {
      const { groupId, title, color } = a.updateGroup;
      await chrome.tabGroups.update(groupId, { title, color }).catch(() => {});
    } else if (a.create) {
      const { wsGroupId, tabIds, title, color } = a.create;
      const id = await chrome.tabs.group({ tabIds, createProperties: { windowId } }).catch(() => null);
      if (id === null) continue;
      groups.map(id, wsGroupId); // before the update's event is read
      await chrome.tabGroups.update(id, { title, color }).catch(() => {});
    }
  }
}

/**
 * Runs `actions` (plan.js) in window `windowId`, recording in `table` the tabs it opens. A tab
 * that cannot be opened stops the opens of this pass (the next pass plans them again); every
 * other call's failure (a tab closed meanwhile) is ignored: the next pass reads the window afresh.
 * `groupId`: a group-bound window's group (shared-group.js), which every tab it opens joins.
 */
export async function execute(actions, windowId, table, groupId = null) {
  const join = (id) => (groupId === null ? null : chrome.tabs.group({ groupId, tabIds: [id] }));
  let opening = true;
  for (const a of actions) {
    if (a.open) {
      if (!opening) continue;
      const { tab, index, lazy } = a.open;
      try {
        const made = await openTab(windowId, index, tab, lazy);
        await join(made.id); // before the map: a tab that could not join stays out, unmapped, never a remove
        table.map(made.id, tab.id);
        table.setSeen(made.id, { title: tab.title, badge: tab.badge, url: tab.url || null });
      } catch (error) {
        console.warn("tabsync: could not open a tab", error);
        opening = false;
      }
    } else if (a.activate) {
      const tabId = a.activate.tabId ?? table.tabOf(a.activate.wsId);
      if (tabId !== undefined) await chrome.tabs.update(tabId, { active: true }).catch(() => {});
    } else if (a.filler) {
      const at = a.filler.index === undefined ? {} : { index: a.filler.index };
      const filler = await chrome.tabs.create({ windowId, ...at, url: urlFor({ title: "(empty workspace)" }, false), active: true });
      table.ignore(filler.id);
      await join(filler.id)?.catch(() => {}); // the emptied group stays, so the binding does
    } else if (a.close) {
      await chrome.tabs.remove(a.close.tabIds).catch(() => {});
    } else if (a.move) {
      await chrome.tabs.move(a.move.tabId, { index: a.move.index }).catch(() => {});
    } else if (a.navigate) {
      const { tabId, tab, lazy } = a.navigate;
      await chrome.tabs.update(tabId, { url: lazy ? urlFor(tab, true) : tab.url }).catch(() => {});
    }
  }
}
