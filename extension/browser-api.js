// The one place the extension picks its browser's API: Firefox's `browser` (promises), else
// Chromium's `chrome` (promises too, in Manifest V3). The modules import `api as chrome`, so the
// code reads the same in both browsers; what differs is in small functions below.

export const api = globalThis.browser ?? globalThis.chrome;

/** True in Firefox (its extension pages are `moz-extension://UUID/`). */
export const firefox = api.runtime.getURL("").startsWith("moz-extension:");

/** With each keepalive tick. Firefox runs the background as an event page that it stops about 30 s
 * after the last extension event or API call; socket traffic does not count. Any API call resets
 * that timer, so one cheap call per tick keeps the page, and its connections, alive. (Chromium's
 * service worker stays alive on the WebSocket's data messages; the call costs it nothing.) */
export function keepAwake() {
  api.runtime.getPlatformInfo().catch(() => {});
}
