#!/usr/bin/env python3
"""The checker of scripts/nemesis: reads every client's history and the final store, and says whether
anything a client was told was lost, doubled, reordered or contradicted.

  nemesis_check.py RUN_DIR
      reads RUN_DIR/history/*.jsonl (one file per client), RUN_DIR/store.json (the store after the
      run), and, when present, RUN_DIR/nemesis.jsonl (the faults) and RUN_DIR/placement.json (which
      node served each session); prints the report; exits 1 on any violation.

A history is JSON lines, each with `t` (seconds since the run started), `type` and `ws` (the
workspace). Types: `connect`; `welcome` {recovered, version, epoch, lastSeq}; `submit` {seq, op,
resubmit}; `ack` {seq, version} (an `Applied` of this client's own op, live, from a resume's
`missed`, or repeated for a resubmission); `applied` {version, client, seq, op} (every `Applied`
the client saw, its own included); `reject` {seq, code, held} (held: a refusal that passes,
UNAVAILABLE or RATE_LIMITED, whose op the client keeps and sends again); `retry` {seq, first} (a
held op sent again as a new op under `seq`, first submitted as `first`); `settled` {seq} (a pending op dropped
because `Welcome.lastSeq` covers it, its outcome not told); `disconnect` {code, reason, final};
`resync` {reason} (the client closed to resume or ask for a snapshot); `final` {version, epoch,
tabs, activeTabId, pending} (the client's state at the end).

The store (store.json): {"workspaces": {ID: {"version", "epoch", "tabs", "activeTabId"}}, "ops":
[{"ws", "version", "client", "seq"}]} (the op log rows, server-made rekeys with client "" and seq 0).

Checks (each a violation count in the report):
- lost: an acknowledged (workspace, client, seq) missing from the op log (only versions the log
  still holds are checked; older ones are counted as compacted);
- doubled: a (workspace, client, seq) logged twice, or acknowledged at two versions;
- misplaced: acknowledged at version v, logged at another version;
- versionReused: one (workspace, version) seen with two different (client, seq, op) by the clients,
  or seen with one that the log holds another op at;
- gaps: a version missing between the log's first and the workspace's version;
- outOfOrder: a client's acknowledged seqs not at increasing versions;
- rejectedYetStored: a seq the client was refused is in the log;
- phantom: a logged (client, seq) its client never submitted;
- diverged: a client found an `Applied` op that does not fit its replica at the version before it,
  or a resume in another epoch (`resync` events; a version gap is counted, not a violation);
- (reported, not a violation) per fault: the longest time without a new acknowledgement anywhere
  in its window, and the acknowledgements per second in it against the run's mean;
- notConverged: a client's final state (version, epoch, tabs with keys, fields and groups, active
  tab, the tab groups) is not the store's; unsettled: a client still holds pending ops at the end.

With the change feed's records (RUN_DIR/feed/*.jsonl, one file per workspace: a reader of
`GET /v1/workspaces/{id}/events` from version 0 through the faults, resuming by itself; each line
{t, kind: op|snapshot, version, client, seq}, {t, error}, or last {t, resumes}):
- feedBroken: the reader failed (a gap or repeat the client library refused, a final refusal, no
  server for its give-up time), or its events skipped or repeated a version (a `snapshot` after the
  first event counts only when it skips a version);
- feedMissing: a version of the store's log, or an acknowledged op, that the feed never delivered;
- feedWrong: the feed named another (client, seq) at a version than the log holds.

With the webhook receiver's record (RUN_DIR/hooks.jsonl: every request the nemesis's receiver got,
in arrival order, each {n, t, id, ws, version, kind: op|snapshot, client, seq, status, valid,
error}; `status` what it answered, 2xx taken, else a failure it made on purpose; `valid` whether the
Standard Webhooks signature checked out with the hook's secret). Delivery is at least once, so a
version may come several times (a retry, a node killed after the receiver's 2xx, on several nodes
each node sending): duplicates are counted, not violations. Only requests answered 2xx count as
delivered, since a sender goes on to the next version only after one:
- hookBadSignature: a request whose signature, timestamp or body did not verify;
- hookMissing: a version of the store's log, or an acknowledged op, of a workspace the hook follows
  that no request answered 2xx delivered as an op, below a version that was (a version skipped). A `snapshot` delivery does not stand for a
  version the log holds: the design sends one only when the log no longer holds what follows the
  cursor, and a version in the final log was in it then too (the log only loses its oldest ops);
  versions below the log's first that a snapshot stands for are counted apart (a gap marked);
- hookBehind: the same past the workspace's highest version delivered: when the run stopped waiting
  the senders had not got that far (slow or stuck, not seen to skip);
- hookOrder: per workspace, the first 2xx arrival of a version came after the first of a higher one
  (the sender sends V+1 only after V was answered 2xx, so first arrivals are in version order
  however many copies each node sends);
- hookWrong: a delivery whose body names another workspace or version than its `webhook-id`, or
  another (client, seq) than the log holds at its version.
"""
import json
import math
import os
import sys
from collections import defaultdict

VIOLATIONS = ("lost", "doubled", "misplaced", "versionReused", "gaps", "outOfOrder", "rejectedYetStored",
              "phantom", "diverged", "notConverged", "unsettled", "historyNotALog", "feedBroken", "feedMissing",
              "feedWrong", "hookBadSignature", "hookMissing", "hookBehind", "hookOrder", "hookWrong")

TAB_FIELDS = ("id", "title", "url", "icon", "badge", "locked", "key", "group")


def norm_tab(tab):
    """A tab as a comparable tuple (absent fields are their defaults, as protobuf JSON omits them)."""
    return tuple(tab.get(f, False if f == "locked" else "") for f in TAB_FIELDS)


def norm_group(group):
    """A tab group as a comparable tuple (protobuf JSON omits an empty title)."""
    return (group.get("id", ""), group.get("title", ""), group.get("color") or "grey")


def canon(op):
    return json.dumps(op, sort_keys=True, separators=(",", ":"))


def percentile(values, p):
    """The p-th percentile (nearest rank) of values; None when empty."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def fault_at(faults, t, grace=1.0):
    """The kind of the fault whose window [start, end + grace] holds t, or "none"."""
    for f in faults:
        if f["start"] <= t <= f["end"] + grace:
            return f["kind"]
    return "none"


def longest_gap(times, start, end):
    """The longest interval inside [start, end] holding none of the sorted times (the window's
    edges count as bounds)."""
    inside = [t for t in times if start < t < end]
    bounds = [start] + inside + [end]
    return max(b - a for a, b in zip(bounds, bounds[1:]))


def split_merge(placement):
    """Counts, per workspace, how often its live sessions went from one node (or none) to several
    (a split) and back to one (a merge); and how many workspace-seconds were split."""
    events = defaultdict(list)
    for p in placement:
        if p.get("node") is None:
            continue
        events[p["ws"]].append((p["start"], 1, p["node"]))
        events[p["ws"]].append((p["end"], -1, p["node"]))
    splits = merges = 0
    split_seconds = 0.0
    for ws, evs in events.items():
        evs.sort(key=lambda e: (e[0], e[1]))  # ends before starts at one instant
        live = defaultdict(int)
        was_split = False
        since = None
        for t, delta, node in evs:
            live[node] += delta
            if live[node] == 0:
                del live[node]
            now_split = len(live) > 1
            if now_split and not was_split:
                splits += 1
                since = t
            elif was_split and not now_split:
                merges += 1
                split_seconds += t - since
            was_split = now_split
    return {"splits": splits, "merges": merges, "splitSeconds": round(split_seconds, 1)}


def check_feeds(feeds, store, acked, problem):
    """The feed checks (see the header); `acked` {(ws, client, seq): version}. Returns the counts
    for the report: versions delivered, and the readers' reconnections."""
    logged = {(o["ws"], int(o["version"])): (o.get("client", ""), int(o.get("seq", 0))) for o in store.get("ops", [])}
    delivered = resumes = 0
    for ws, events in sorted(feeds.items()):
        got = {}
        last = None
        for e in events:
            if "resumes" in e:
                resumes += int(e["resumes"])
                continue
            if "error" in e:
                problem("feedBroken", f"{ws}: the reader failed at t={e['t']}: {e['error']}")
                continue
            ver = int(e["version"])
            if e["kind"] == "snapshot":
                if last is not None and ver != last:
                    problem("feedBroken", f"{ws}: a snapshot at {ver} after version {last}: versions skipped")
                last = ver
                continue
            if last is not None and ver != last + 1:
                problem("feedBroken", f"{ws}: op {ver} after version {last}")
            if ver in got:
                problem("feedBroken", f"{ws}: version {ver} delivered twice")
            got[ver] = (e.get("client", ""), int(e.get("seq", 0)))
            last = ver
        delivered += len(got)
        top = int(store.get("workspaces", {}).get(ws, {}).get("version", 0))
        for ver in range(1, top + 1):
            if (ws, ver) in logged and ver not in got:
                problem("feedMissing", f"{ws}: logged version {ver} never came in the feed")
            elif (ws, ver) in logged and got[ver] != logged[(ws, ver)]:
                problem("feedWrong", f"{ws}: version {ver} is {got[ver]} in the feed, {logged[(ws, ver)]} in the log")
    for (ws, client, seq), ver in sorted(acked.items()):
        if ws in feeds and feeds[ws] and ver not in {int(e["version"]) for e in feeds[ws] if e.get("kind") == "op"}:
            problem("feedMissing", f"{ws}: {client} seq {seq}, acknowledged at {ver}, never came in the feed")
    return delivered, resumes


def check_hooks(hooks, store, acked, problem):
    """The webhook checks (see the header); `hooks` the receiver's requests in arrival order, `acked`
    {(ws, client, seq): version}. Returns the counts for the report."""
    logged = {(o["ws"], int(o["version"])): (o.get("client", ""), int(o.get("seq", 0))) for o in store.get("ops", [])}
    first = defaultdict(dict)           # ws -> {version: (arrival n, kind)} of the first 2xx arrival
    as_op = defaultdict(set)            # ws -> versions taken 2xx as an op at least once
    taken = failed = bad = 0
    for h in sorted(hooks, key=lambda h: h["n"]):
        if not h.get("valid"):
            bad += 1
            problem("hookBadSignature", f"request {h['n']} ({h.get('id')}) at t={h['t']}: {h.get('error', 'invalid')}")
            continue
        if not 200 <= int(h.get("status", 0)) < 300:
            failed += 1
            continue
        taken += 1
        ws, ver = h["ws"], int(h["version"])
        if h.get("id") != f"{ws}:{ver}":
            problem("hookWrong", f"request {h['n']}: webhook-id {h.get('id')} with a body of {ws} version {ver}")
            continue
        if h["kind"] == "op" and (ws, ver) in logged and logged[(ws, ver)] != (h.get("client", ""), int(h.get("seq", 0))):
            problem("hookWrong", f"{ws}: version {ver} is {(h.get('client'), h.get('seq'))} in a delivery, "
                                 f"{logged[(ws, ver)]} in the log")
        first[ws].setdefault(ver, (h["n"], h["kind"]))
        if h["kind"] == "op":
            as_op[ws].add(ver)
    duplicates = taken - sum(len(v) for v in first.values())
    snapshotted = behind = 0
    for ws, got in sorted(first.items()):
        by_arrival = sorted((n, ver, kind) for ver, (n, kind) in got.items())
        top = None
        for n, ver, kind in by_arrival:
            if top is not None and ver < top[0]:
                problem("hookOrder", f"{ws}: version {ver} first arrived (request {n}) after version {top[0]}"
                                     + (" (a snapshot delivery)" if top[1] == "snapshot" else ""))
            top = (ver, kind) if top is None or ver > top[0] else top
    # The workspaces the hook follows: every one the store holds (the nemesis's glob matches them all).
    followed = set(store.get("workspaces", {})) | set(first)
    covered = {ws: max((ver for ver, (_, kind) in got.items() if kind == "snapshot"), default=0)
               for ws, got in first.items()}
    for ws in sorted(followed):
        got = first.get(ws, {})
        behind_from = None
        top = int(store.get("workspaces", {}).get(ws, {}).get("version", 0))
        for ver in range(1, top + 1):
            if ver in as_op.get(ws, ()):
                continue
            if (ws, ver) in logged and ver > max(got, default=0):
                behind += 1
                if behind_from is None:
                    behind_from = ver
                    problem("hookBehind", f"{ws}: versions {ver}..{top} were not delivered when the wait ended")
            elif (ws, ver) in logged:
                why = (f"; a snapshot delivery at {covered[ws]} stood for it, though the log holds it"
                       if ver <= covered.get(ws, 0) else "")
                problem("hookMissing", f"{ws}: logged version {ver} was never delivered (answered 2xx){why}")
            elif ver <= covered.get(ws, 0):
                snapshotted += 1
    for (ws, client, seq), ver in sorted(acked.items()):
        # (A logged version was checked above; this catches an acknowledged op the log lost.)
        if (ws, ver) not in logged and ver not in first.get(ws, {}) and ver > covered.get(ws, 0):
            problem("hookMissing", f"{ws}: {client} seq {seq}, acknowledged at {ver}, was never delivered")
    return {"hookRequests": len(hooks), "hookTaken": taken, "hookFailed": failed, "hookBad": bad,
            "hookVersions": sum(len(v) for v in first.values()), "hookDuplicates": duplicates,
            "hookSnapshots": sum(1 for got in first.values() for _, kind in got.values() if kind == "snapshot"),
            "hookSnapshotted": snapshotted, "hookBehindVersions": behind}


def check(histories, store, faults=(), placement=None, feeds=None, hooks=None):
    """histories: {client: [event, ...]}; store: as store.json; feeds: {ws: [line, ...]} or None
    (no feed was read); hooks: the webhook receiver's requests, or None (no hook). Returns the report (a dict) with `violations` {name: count} and `problems`
    (lines, the first few of each kind)."""
    faults = list(faults)
    v = {name: 0 for name in VIOLATIONS}
    problems = []

    def problem(kind, line):
        v[kind] += 1
        if sum(1 for p in problems if p.startswith(kind + ":")) < 10:
            problems.append(f"{kind}: {line}")

    # --- the store's log
    logged = defaultdict(list)          # (ws, client, seq) -> [version]
    at_version = {}                     # (ws, version) -> (client, seq)
    first_logged = {}                   # ws -> lowest version the log holds
    for row in store.get("ops", []):
        ws, ver = row["ws"], int(row["version"])
        at_version[(ws, ver)] = (row["client"], int(row["seq"]))
        first_logged[ws] = min(first_logged.get(ws, ver), ver)
        if row["client"]:
            logged[(ws, row["client"], int(row["seq"]))].append(ver)
    for (ws, client, seq), versions in sorted(logged.items()):
        if len(versions) > 1:
            problem("doubled", f"{ws} {client} seq {seq} is logged at versions {sorted(versions)}")
    for ws, info in sorted(store.get("workspaces", {}).items()):
        top = int(info.get("version", 0))
        lo = first_logged.get(ws, top + 1)
        for ver in range(lo, top + 1):
            if (ws, ver) not in at_version:
                problem("gaps", f"{ws} version {ver} is not in the log (log {lo}..{top})")

    # --- the histories
    submitted = set()
    acked = {}                          # (ws, client, seq) -> version (first ack)
    ack_time = {}
    rejected = {}                       # (ws, client, seq) -> code
    settled = set()
    seen = defaultdict(set)             # (ws, version) -> {(client, seq, op)}
    latencies = defaultdict(list)       # fault kind -> [seconds]
    disconnects = defaultdict(int)
    close_codes = defaultdict(lambda: defaultdict(int))
    resyncs = defaultdict(int)
    rejects_by_kind = defaultdict(lambda: defaultdict(int))
    reject_codes = defaultdict(int)
    submits = resubmits = acks = 0
    retry_of = {}                       # (ws, client, seq of a retry) -> the first seq of its op
    held = set()                        # (ws, client, first seq) of every op held at least once
    held_again = set()                  # (ws, client, seq) of each refusal that held its op
    converged = 0
    finals = 0
    history_reads = 0
    history_ops = []                    # (ws, version, client, seq) of every op a history answer named
    for client, events in sorted(histories.items()):
        pending_disconnect = None
        for e in events:
            kind = e["type"]
            ws = e.get("ws")
            if kind == "submit":
                submits += 1
                if e.get("resubmit"):
                    resubmits += 1
                submitted.add((ws, client, int(e["seq"])))
            elif kind == "ack":
                acks += 1
                key = (ws, client, int(e["seq"]))
                ver = int(e["version"])
                if key in acked and acked[key] != ver:
                    problem("doubled", f"{ws} {client} seq {e['seq']} acknowledged at versions {acked[key]} and {ver}")
                acked.setdefault(key, ver)
                ack_time.setdefault(key, e["t"])
                if pending_disconnect is not None and e["t"] >= pending_disconnect:
                    latencies[fault_at(faults, pending_disconnect)].append(e["t"] - pending_disconnect)
                    pending_disconnect = None
            elif kind == "history":
                history_reads += 1
                for ver, hclient, hseq in e.get("ops", []):
                    history_ops.append((ws, int(ver), hclient, int(hseq)))
            elif kind == "applied":
                seen[(ws, int(e["version"]))].add((e.get("client", ""), int(e.get("seq", 0)), canon(e.get("op"))))
            elif kind == "reject":
                key = (ws, client, int(e["seq"]))
                rejected[key] = e.get("code", "")
                reject_codes[e.get("code", "")] += 1
                rejects_by_kind[fault_at(faults, e["t"])][e.get("code", "")] += 1
                if e.get("held"):
                    held.add((ws, client, retry_of.get(key, key[2])))
                    held_again.add(key)
            elif kind == "retry":
                first = (ws, client, int(e["first"]))
                retry_of[(ws, client, int(e["seq"]))] = retry_of.get(first, first[2])
            elif kind == "settled":
                settled.add((ws, client, int(e["seq"])))
            elif kind == "disconnect":
                if e.get("final"):
                    continue
                disconnects[fault_at(faults, e["t"])] += 1
                close_codes[fault_at(faults, e["t"])][str(e.get("code"))] += 1
                if pending_disconnect is None:
                    pending_disconnect = e["t"]
            elif kind == "resync":
                reason = e.get("reason", "")
                resyncs[reason.split(":")[0]] += 1
                if not reason.startswith("version gap"):
                    problem("diverged", f"{client} in {ws} at t={e['t']:.2f}: {reason}")
            elif kind == "final":
                finals += 1
                info = store.get("workspaces", {}).get(ws)
                if e.get("pending", 0):
                    problem("unsettled", f"{client} ends with {e['pending']} pending ops in {ws}")
                if info is None:
                    if int(e.get("version", 0)) != 0:
                        problem("notConverged", f"{client}: {ws} is at version {e['version']}, the store has no such workspace")
                    else:
                        converged += 1
                    continue
                mine = (int(e.get("version", 0)), e.get("epoch", ""), [norm_tab(t) for t in e.get("tabs", [])],
                        e.get("activeTabId", ""), [norm_group(g) for g in e.get("groups", [])])
                theirs = (int(info.get("version", 0)), info.get("epoch", ""),
                          [norm_tab(t) for t in info.get("tabs", [])], info.get("activeTabId", ""),
                          [norm_group(g) for g in info.get("groups", [])])
                if mine == theirs:
                    converged += 1
                else:
                    what = [name for name, a, b in zip(("version", "epoch", "tabs", "activeTabId", "groups"), mine, theirs)
                            if a != b]
                    problem("notConverged", f"{client}: {ws} differs from the store in {', '.join(what)} "
                                            f"(client version {mine[0]}, store {theirs[0]})")

    # --- acknowledged ops against the log
    checked = compacted = 0
    for (ws, client, seq), ver in sorted(acked.items()):
        versions = logged.get((ws, client, seq), [])
        if ver < first_logged.get(ws, 1):
            compacted += 1
            continue
        if not versions:
            problem("lost", f"{ws} {client} seq {seq} acknowledged at version {ver} (t={ack_time[(ws, client, seq)]:.2f}) "
                            f"is not in the log; the log holds {at_version.get((ws, ver))} at {ver}")
            continue
        checked += 1
        if len(versions) == 1 and versions[0] != ver:
            problem("misplaced", f"{ws} {client} seq {seq} acknowledged at version {ver}, logged at {versions[0]}")

    # --- one op per version
    for (ws, ver), ops in sorted(seen.items()):
        ids = {(c, s) for c, s, _ in ops}
        if len(ops) > 1:
            problem("versionReused", f"{ws} version {ver} was seen as {len(ops)} different ops: {sorted(ids)[:3]}")
        stored = at_version.get((ws, ver))
        if stored is not None and any((c, s) != stored for c, s in ids):
            problem("versionReused", f"{ws} version {ver} was seen as {sorted(ids)[:3]}, the log holds {stored}")

    # --- per-client order
    by_client = defaultdict(list)
    for (ws, client, seq), ver in acked.items():
        by_client[(ws, client)].append((seq, ver))
    for (ws, client), pairs in sorted(by_client.items()):
        pairs.sort()
        for (s1, v1), (s2, v2) in zip(pairs, pairs[1:]):
            if v2 <= v1:
                problem("outOfOrder", f"{ws} {client}: seq {s1} at version {v1}, seq {s2} at version {v2}")

    # --- refused, yet stored; stored, never submitted
    for key, code in sorted(rejected.items()):
        if key in logged:
            problem("rejectedYetStored", f"{key[0]} {key[1]} seq {key[2]} was refused {code}, the log holds it at {logged[key]}")
    for key in sorted(logged):
        if key[1] in histories and key not in submitted:
            problem("phantom", f"{key[0]} {key[1]} seq {key[2]} is logged, its client never submitted it")

    # --- availability: the longest time without any acknowledgement, cluster-wide, in each fault
    ack_times = sorted(ack_time.values())
    stalls = defaultdict(list)
    rates = defaultdict(list)
    span = (ack_times[-1] - ack_times[0]) if len(ack_times) > 1 else 0
    mean_rate = len(ack_times) / span if span > 0 else 0
    for f in faults:
        stalls[f["kind"]].append(longest_gap(ack_times, f["start"], f["end"] + 1.0))
        # Over the fault itself: the burst of acks its end releases is not counted.
        inside = sum(1 for t in ack_times if f["start"] <= t < f["end"])
        if mean_rate and f["end"] > f["start"]:
            rates[f["kind"]].append(round(100 * inside / (f["end"] - f["start"]) / mean_rate))

    # Held ops that landed: an op first submitted as s, refused for a reason that passes, then
    # acknowledged under a retry's seq.
    landed = {(k[0], k[1], first) for k, first in retry_of.items() if k in acked}
    held_landed = len(held & landed)
    refused_later = {(k[0], k[1], first) for k, first in retry_of.items() if k in rejected and k not in held_again}
    held_refused = len((held & refused_later) - landed)
    settled_unknown = len(settled - set(acked) - set(rejected))
    settled_stored = len({k for k in settled - set(acked) - set(rejected) if k in logged})
    fault_counts = defaultdict(int)
    for f in faults:
        fault_counts[f["kind"]] += 1
    per_kind = {}
    for kind in sorted(set(fault_counts) | set(disconnects) | set(latencies) | set(rejects_by_kind)):
        lat = latencies.get(kind, [])
        per_kind[kind] = {
            "faults": fault_counts.get(kind, 0),
            "disconnects": disconnects.get(kind, 0),
            "closeCodes": dict(sorted(close_codes.get(kind, {}).items())),
            "rejects": dict(sorted(rejects_by_kind.get(kind, {}).items())),
            "reacked": len(lat),
            "firstAckP50": percentile(lat, 50),
            "firstAckP99": percentile(lat, 99),
            "firstAckMax": max(lat) if lat else None,
            "ackStalls": [round(x, 2) for x in stalls.get(kind, [])],
            "ackRatePercent": rates.get(kind, []),
        }
    all_lat = [x for lat in latencies.values() for x in lat]
    # History answers are a prefix of the acknowledged log: each op they name is the log's op at
    # that version (while the log holds it), never past the store's version.
    for ws, ver, hclient, hseq in history_ops:
        top = int(store.get("workspaces", {}).get(ws, {}).get("version", 0))
        if ver > top:
            problem("historyNotALog", f"{ws} history named version {ver}, past the store's {top}")
        elif (ws, ver) in at_version and at_version[(ws, ver)] != (hclient, hseq):
            problem("historyNotALog", f"{ws} history has {hclient} seq {hseq} at version {ver}; the log {at_version[(ws, ver)]}")
    report = {
        "clients": len(histories),
        "workspaces": len(store.get("workspaces", {})),
        "submitted": len(submitted),
        "submits": submits,
        "resubmits": resubmits,
        "acks": acks,
        "acked": len(acked),
        "rejected": len(rejected),
        "rejectCodes": dict(sorted(reject_codes.items())),
        "held": len(held),
        "heldLanded": held_landed,
        "heldRefused": held_refused,
        "settledUnknown": settled_unknown,
        "settledUnknownStored": settled_stored,
        "checked": checked,
        "compacted": compacted,
        "logRows": len(store.get("ops", [])),
        "versionsSeen": len(seen),
        "resyncs": dict(resyncs),
        "converged": converged,
        "finals": finals,
        "perFault": per_kind,
        "firstAckP50": percentile(all_lat, 50),
        "firstAckP99": percentile(all_lat, 99),
        "historyReads": history_reads,
        "historyOps": len(history_ops),
        "violations": v,
        "problems": problems,
    }
    if placement is not None:
        report["placement"] = split_merge(placement)
    if feeds is not None:
        report["feedVersions"], report["feedResumes"] = check_feeds(feeds, store, acked, problem)
        report["feeds"] = len(feeds)
    if hooks is not None:
        report.update(check_hooks(hooks, store, acked, problem))
    return report


def ok(report):
    return not any(report["violations"].values())


def fmt_s(x):
    return "-" if x is None else f"{x:.2f}s"


def format_report(r):
    lines = [
        f"clients {r['clients']}, workspaces {r['workspaces']}",
        f"ops: {r['submitted']} submitted ({r['resubmits']} resubmissions), {r['acked']} acknowledged, "
        f"{r['rejected']} rejected {r['rejectCodes']}, {r['settledUnknown']} settled by Welcome.lastSeq without an answer "
        f"({r['settledUnknownStored']} of them stored); {r.get('held', 0)} ops refused for a reason that passes were "
        f"sent again: {r.get('heldLanded', 0)} landed, {r.get('heldRefused', 0)} refused for good when tried again",
        f"checked: {r['checked']} acknowledged ops found once in the log at their version ({r['compacted']} compacted away); "
        f"{r['logRows']} log rows; {r['versionsSeen']} versions seen by clients",
        f"converged: {r['converged']} of {r['finals']} clients hold the store's workspace",
        f"history: {r.get('historyReads', 0)} reads over sessions named {r.get('historyOps', 0)} ops, each checked against the log",
    ]
    if "feeds" in r:
        lines.append(f"feed: {r['feedVersions']} versions delivered by {r['feeds']} readers of the change feed "
                     f"({r['feedResumes']} resumes), each checked against the log and the acknowledgements")
    if "hookRequests" in r:
        lines.append(f"webhooks: {r['hookRequests']} requests, {r['hookTaken']} answered 2xx ({r['hookFailed']} failed on "
                     f"purpose, {r['hookBad']} not verified): {r['hookVersions']} versions delivered, "
                     f"{r['hookDuplicates']} duplicates, {r.get('hookSnapshots', 0)} snapshot deliveries (standing for "
                     f"{r['hookSnapshotted']} versions the log no longer holds), {r.get('hookBehindVersions', 0)} "
                     f"versions not delivered yet when the wait ended; each checked "
                     f"against the log, the acknowledgements and the order per workspace")
    if "placement" in r:
        p = r["placement"]
        lines.append(f"placement: {p['splits']} splits, {p['merges']} merges ({p['splitSeconds']} workspace-seconds split over nodes)")
    if r["resyncs"]:
        lines.append(f"client resyncs: {r['resyncs']}")
    lines.append("per fault kind (\"none\": outside every fault's window): faults, disconnects (close codes), "
                 "refusals, first ack after the disconnect p50 / p99 / max:")
    for kind, f in r["perFault"].items():
        lines.append(f"  {kind:10} {f['faults']:3} faults, {f['disconnects']:4} disconnects {f['closeCodes']}, "
                     f"refused {f['rejects']}, first ack {fmt_s(f['firstAckP50'])} / {fmt_s(f['firstAckP99'])} / "
                     f"{fmt_s(f['firstAckMax'])} ({f['reacked']} reacked)"
                     + (f"; per fault: longest time without a new ack anywhere {f['ackStalls']} s, "
                        f"acks per second as % of the run's mean {f['ackRatePercent']}" if f["ackStalls"] else ""))
    lines.append(f"first ack after a disconnect, all: p50 {fmt_s(r['firstAckP50'])}, p99 {fmt_s(r['firstAckP99'])}")
    v = r["violations"]
    lines.append("violations: " + ", ".join(f"{k} {n}" for k, n in v.items()))
    lines += ["  " + p for p in r["problems"]]
    lines.append("nemesis check: " + ("PASS" if ok(r) else "FAIL"))
    return "\n".join(lines)


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def load_run(run_dir):
    """(histories, store, faults, placement, feeds, hooks) from a run directory of scripts/nemesis."""
    hist_dir = os.path.join(run_dir, "history")
    histories = {}
    for name in sorted(os.listdir(hist_dir)):
        if name.endswith(".jsonl"):
            histories[name[:-len(".jsonl")]] = read_jsonl(os.path.join(hist_dir, name))
    with open(os.path.join(run_dir, "store.json")) as f:
        store = json.load(f)
    faults = []
    path = os.path.join(run_dir, "nemesis.jsonl")
    if os.path.exists(path):
        faults = [e for e in read_jsonl(path) if "end" in e]
    placement = None
    path = os.path.join(run_dir, "placement.json")
    if os.path.exists(path):
        with open(path) as f:
            placement = json.load(f)
    return histories, store, faults, placement, load_feeds(run_dir), load_hooks(run_dir)


def load_hooks(run_dir):
    """The webhook receiver's requests (RUN_DIR/hooks.jsonl), or None when no hook was registered."""
    path = os.path.join(run_dir, "hooks.jsonl")
    return read_jsonl(path) if os.path.exists(path) else None


def load_feeds(run_dir):
    """{ws: [line, ...]} from RUN_DIR/feed/, or None when no feed was read."""
    feed_dir = os.path.join(run_dir, "feed")
    if not os.path.isdir(feed_dir):
        return None
    return {name[:-len(".jsonl")]: read_jsonl(os.path.join(feed_dir, name))
            for name in sorted(os.listdir(feed_dir)) if name.endswith(".jsonl")}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    report = check(*load_run(sys.argv[1]))
    with open(os.path.join(sys.argv[1], "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(format_report(report), flush=True)
    sys.exit(0 if ok(report) else 1)


if __name__ == "__main__":
    main()
