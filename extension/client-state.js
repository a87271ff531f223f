// The JS client's state as the extension stores and hands it over: through the client's own
// `exportState()`/`importState()` (web/tabsync-client.js), so nothing here writes its fields. A
// client without them (before that API) is read and written as it always was, in one place.

import { TabsyncClient } from "./tabsync-client.js";

/** A copy of the client's confirmed state, outbox and next seq: { confirmed, pending, nextSeq }. */
export function exportClient(client) {
  if (typeof client.exportState === "function") return client.exportState();
  return structuredClone({ confirmed: client.confirmed, pending: client.pending, nextSeq: client.nextSeq });
}

/** The client takes saved state `s` ({ confirmed, pending, nextSeq }, as exportClient gives). */
export function importClient(client, s) {
  if (typeof client.importState === "function") { client.importState(s); return; }
  client.confirmed = s.confirmed;
  client.pending = s.pending ?? [];
  client.nextSeq = s.nextSeq ?? 1;
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
