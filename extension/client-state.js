// The JS client's state as the extension stores and hands it over: through the client's own
// `exportState()`/`importState()` (web/tabsync-client.js), so nothing here writes its fields. A
// client without them (before that API) is read and written as it always was, in one place.

import { TabsyncClient } from "./tabsync-client.js";

/**
 * A copy of the client's state as the extension's resume record holds it: its confirmed state,
 * outbox, next seq and rekeys at the top level (the record's shape since 0.1), the versions it
 * saw per epoch as `clientSeen` (the record's `seen` is the tab table's).
 */
export function exportClient(client) {
  if (typeof client.exportState !== "function") {
    return structuredClone({ confirmed: client.confirmed, pending: client.pending, nextSeq: client.nextSeq });
  }
  const { seen, ...rest } = client.exportState();
  return { ...rest, clientSeen: seen };
}

/**
 * The client takes saved record `r` (as exportClient gives, or an older one). A record the client
 * refuses (importState's TypeError) is reported and left out: the client starts empty and the
 * server's Welcome brings the workspace; the window's tabs stay as they are.
 */
export function importClient(client, r) {
  if (typeof client.importState === "function") {
    try {
      client.importState({ confirmed: r.confirmed, pending: r.pending, nextSeq: r.nextSeq, rekeys: r.rekeys, seen: r.clientSeen });
    } catch (error) {
      console.warn("tabsync: the saved client state was refused; starting from the server's", error);
    }
    return;
  }
  client.confirmed = r.confirmed;
  client.pending = r.pending ?? [];
  client.nextSeq = r.nextSeq ?? 1;
  client.rebuild();
}

/**
 * The JS client as the extension runs it: the same client, which also keeps the code and reason
 * of the last close of its connection (`lastClose`), so a final close (welcome.js finalClose) ends
 * the binding with its reason shown.
 */
export class ExtensionClient extends TabsyncClient {
  open() {
    this.lastClose = null;
    super.open();
    const ws = this.ws;
    if (!ws) return;
    const inner = ws.onclose;
    ws.onclose = (event) => {
      this.lastClose = { code: event.code, reason: event.reason };
      inner.call(ws, event);
    };
  }
}
