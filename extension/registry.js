// The bound windows' mirrors of this worker, and what they share: the test switches, the attach
// queue (two bindings never claim one window) and the retry alarm.

import { api as chrome } from "./browser-api.js";

/** bindingId -> Mirror */
export const mirrors = new Map();

/** Test switches in storage.session, followed by background.js: "offline" (every connection cut,
 * as a lost network), "pacing" (false: ops are not paced), "keepalive" (false: the worker may stop). */
export const switches = { offline: false, pacingOff: false, keepalive: true };

export const RETRY_ALARM = "tabsync-retry";

// Attaching a window (adopt, open, re-attach) is serialized across bindings: two bindings never
// claim one window.
let attachChain = Promise.resolve();
export function attachSerially(fn) {
  const run = attachChain.then(fn, fn);
  attachChain = run.catch(() => {});
  return run;
}

export function claimedWindows(except) {
  return new Set([...mirrors.values()].filter((m) => m !== except && !m.b.closed && ["claimed", "attaching", "ready"].includes(m.phase)).map((m) => m.b.windowId));
}

/** The live mirror of window `windowId`, or null. */
export function mirrorOfWindow(windowId) {
  for (const m of mirrors.values()) if (m.b.windowId === windowId && !m.b.closed) return m;
  return null;
}

/**
 * An alarm every minute while any binding is live: it wakes a worker the browser stopped (the
 * keepalive failed, or the browser chose to), which resumes, reconnects and catches up; while the
 * worker lives, the client retries a lost connection itself (backoff up to 5 s). A period longer
 * than the 30 s idle limit lets an idle worker stop between alarms instead of being held up by
 * them. A binding stopped for a reason (a refused token) or closed has none.
 */
export async function updateRetryAlarm() {
  const live = [...mirrors.values()].some((m) => !m.b.stopped && !m.b.closed);
  const existing = await chrome.alarms.get(RETRY_ALARM);
  if (live && !existing) chrome.alarms.create(RETRY_ALARM, { periodInMinutes: 1 });
  if (!live && existing) chrome.alarms.clear(RETRY_ALARM);
}

