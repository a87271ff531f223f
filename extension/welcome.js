// The contract's rules for a Welcome and a close (pure, as plan.js: node tests them in
// Tests/extension/welcome.test.mjs): what a new history, a snapshot and a final close mean for
// the tab table. binding-mirror.js calls them from the client's events.

/**
 * Rule "a new history closes nothing": the Welcome starts another history than the one this
 * window mirrored when the client says so (`newHistory`: a server restored from a backup, or a
 * new epoch), when the epoch changed, or when it is below a version this window already saw
 * under the same epoch (a backup copy of the same epoch: shared/DESIGN.md, Durability).
 * `seenVersion`: the highest confirmed version seen before; `version`: the Welcome's.
 */
export function isNewHistory({ previousEpoch, epoch, newHistory }, seenVersion, version) {
  if (newHistory) return true;
  if (previousEpoch && epoch !== previousEpoch) return true;
  return Boolean(previousEpoch) && epoch === previousEpoch && version < seenVersion;
}

/**
 * Rule "a new history matches by page before it publishes": a real tab whose workspace id the new
 * history lacks, showing the page (its last synced URL) of a tab the new history holds that no
 * real tab of this window is mapped to, is that tab: it is mapped to it, one to one, in the
 * window's order, instead of being published again beside it (the page would then be in the
 * workspace twice and open twice in every window). So goes a tab a pin and unpin re-added under a
 * new id after the backup the server was restored from (chaos seed 3902). `tabs`: the new
 * history's tabs. Run before afterWelcome on a new history only: in the same history an id the
 * server lacks was removed, and a page twice is the user's own.
 */
export function matchNewHistoryByPage(table, tabs) {
  const held = new Set(tabs.map((t) => t.id));
  const shown = table.mappedIds();
  const free = new Map(); // url -> ids of the new history's tabs no real tab is mapped to
  for (const t of tabs) if (t.url && !shown.has(t.id)) free.set(t.url, [...(free.get(t.url) ?? []), t.id]);
  for (const [tid, wid] of table.mapped().sort((x, y) => x[0] - y[0])) {
    const url = table.seen(tid)?.url;
    const ids = !held.has(wid) && url ? free.get(url) : undefined;
    if (ids?.length) table.map(tid, ids.shift());
  }
}

/**
 * The table after a Welcome. `confirmed`: the workspace ids the server holds now; `ours`: the
 * ids this window shows (mapped, or restored to be matched); `welcome`: the client's event
 * detail, with `newHistory` as isNewHistory decided it. Ids the server holds are nothing to close.
 * A new history: nothing closes (the removed marks go); when the server holds tabs this window
 * does not know and lacks some of its own, the mirror pauses and asks, else the window's tabs
 * are published again (step 3: a union). The same history: ids a recovered Welcome's missed ops
 * removed close (applied ops); ids a snapshot left out close under the brake (step 5).
 */
export function afterWelcome(table, welcome, confirmed, ours) {
  for (const id of confirmed) table.present(id);
  if (welcome.newHistory) {
    const kept = [...ours].filter((id) => !confirmed.has(id));
    const foreign = [...confirmed].filter((id) => !ours.has(id));
    table.removed.clear();
    table.snapshotRemoved.clear();
    table.paused = foreign.length > 0 && kept.length > 0 ? {
      kind: "epoch", count: kept.length,
      reason: "the server's workspace is not the one this window mirrored (its history was lost or replaced): "
        + "nothing was closed. Publish this window's tabs again, or open the server's version in a new window.",
    } : null;
    return;
  }
  if (welcome.recovered) {
    for (const id of welcome.removed) { if (!confirmed.has(id)) table.removed.add(id); table.snapshotRemoved.delete(id); }
  } else {
    for (const id of welcome.removed) table.snapshotRemoved.add(id);
  }
}

/**
 * Rule "a deleted workspace stays deleted": the reason a close ends the binding for good (shown
 * in the popup; no reconnect, nothing made again), or "" for a close the client may retry. 4410:
 * an operator deleted the workspace (docs/design.md, close codes).
 */
export function finalClose(code, workspace) {
  if (code === 4410) {
    return `an operator deleted the workspace "${workspace}" on the server (close 4410): it is not made again from this window. `
      + "Unbind the window (its tabs stay), or bind it to another workspace.";
  }
  return "";
}

/**
 * Rule "a deleted workspace stays deleted", in the popup and its requests: what a binding offers.
 * A binding whose workspace an operator deleted (`b.deleted`, set with the 4410's reason) offers
 * only to unbind (the tabs stay) or to bind the window to another workspace: never Try again or
 * Reopen, which would connect and make the workspace again. Otherwise a stopped binding offers
 * Try again, a closed one Reopen.
 * @returns {{ retry: boolean, reopen: boolean, unbind: boolean, bindNew: boolean }}
 */
export function bindingOffers(b) {
  if (b?.deleted) return { retry: false, reopen: false, unbind: true, bindNew: true };
  return { retry: Boolean(b?.stopped), reopen: Boolean(b?.closed) && !b?.stopped, unbind: true, bindNew: false };
}
