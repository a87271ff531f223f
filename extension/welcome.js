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
