// The action badge of a bound window.

import { api as chrome } from "./browser-api.js";
import { MAX_TITLE, cleanText } from "./mirror.js";

/**
 * The action badge: how many others are here, and "!" when the window is not fully shared (tabs
 * kept local only, a paused or read-only mirror); the tooltip says why and who views what. Set on
 * the bound window's active tab, the one whose button shows (each pass runs after an activation
 * too), so a presence change costs two calls, not two per tab.
 */
export function updateBadge(mirror, real) {
  const c = mirror.client;
  const others = c.peers.filter((p) => p.sessionId !== c.sessionId);
  const titles = new Map(c.state.tabs.map((t) => [t.id, t.title]));
  const table = mirror.table;
  const localOnly = table.localOnlyEntries().length;
  const partial = localOnly > 0 || table.paused || mirror.readOnly;
  const text = (others.length > 0 ? String(Math.min(others.length, 99)) : "") + (partial ? "!" : "");
  const notes = [];
  if (table.paused) notes.push("paused: " + table.paused.reason);
  if (mirror.readOnly) notes.push("read-only mirror: tabs opened here stay in this window");
  if (localOnly > 0) notes.push(`${localOnly} tab(s) of this window are local only (not shared)`);
  const tooltip = [`tabsync: ${mirror.b.workspace}`, ...notes, ...others.map((p) =>
    `${cleanText(p.name || p.clientId, 64)} views ${cleanText(titles.get(p.focusTabId) ?? "nothing", MAX_TITLE)}`)].join("\n");
  const active = real.find((t) => t.active);
  if (!active) return;
  // Chrome clears a tab's own badge when it navigates: a load (status, url) sets it again.
  const signature = `${text}|${tooltip}|${active.id}|${active.status}|${active.url}`;
  if (signature === mirror.badgeSignature) return;
  mirror.badgeSignature = signature;
  chrome.action.setBadgeText({ tabId: active.id, text }).catch(() => {});
  if (partial) chrome.action.setBadgeBackgroundColor({ tabId: active.id, color: "#b25b00" }).catch(() => {});
  chrome.action.setTitle({ tabId: active.id, title: tooltip }).catch(() => {});
}

