#!/usr/bin/env python3
"""Checks the churn bench's ledger (tabsync bench --churn --ledger FILE) against the server.

  soak_check.py http LEDGER http://HOST:PORT
      every workspace's GET /v1/workspaces/{id}: the version is the number of acknowledged ops (plus
      the server's own), the tabs and their titles are those the acknowledged ops leave, in version
      order.
  soak_check.py store LEDGER tabsync.sqlite3
      the store's op log, read after the server stopped: each acknowledged (client, seq) is in it
      exactly once and at the version its Applied named, for every op the log still holds (it keeps
      the last --log-retention ops per workspace; older ones are covered by the snapshot check);
      no (client, seq) is logged twice in any workspace; the stored workspace version is the expected one.

Prints one line of figures; exits 1 with a line per problem (at most 20 shown).
"""
import json
import sqlite3
import sys
import urllib.request


def load(path):
    with open(path) as f:
        return json.load(f)


def check_http(ledger, base):
    problems = []
    checked = 0
    tabs = 0
    for ws in ledger["workspaces"]:
        if ws["version"] == 0:
            continue
        try:
            with urllib.request.urlopen(f"{base}/v1/workspaces/{ws['name']}", timeout=30) as r:
                snap = json.load(r)
        except Exception as e:  # noqa: BLE001 - reported as a problem
            problems.append(f"{ws['name']}: GET failed: {e}")
            continue
        version = int(snap.get("version", "0"))
        held = {t["id"]: t.get("title", "") for t in snap.get("tabs", [])}
        if version != ws["version"]:
            problems.append(f"{ws['name']}: HTTP version {version}, the acknowledged ops make {ws['version']}")
        if snap.get("epoch", "") != ws["epoch"]:
            problems.append(f"{ws['name']}: epoch {snap.get('epoch')} over HTTP, {ws['epoch']} in the bench's Welcomes")
        if held != ws["tabs"]:
            missing = [t for t in ws["tabs"] if t not in held]
            extra = [t for t in held if t not in ws["tabs"]]
            titled = [t for t in ws["tabs"] if t in held and held[t] != ws["tabs"][t]]
            problems.append(f"{ws['name']}: tabs differ: missing {missing[:3]}, extra {extra[:3]}, other titles {titled[:3]}")
        checked += 1
        tabs += len(held)
    print(f"soak-check http: {checked} workspaces, {tabs} tabs, {ledger['acknowledged']} acknowledged ops: "
          + ("match" if not problems else f"{len(problems)} problems"))
    return problems


def check_store(ledger, path):
    problems = []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    in_log = 0
    compacted = 0
    for row in db.execute("SELECT workspace, client_id, seq, COUNT(*) FROM ops WHERE client_id != '' "
                          "GROUP BY workspace, client_id, seq HAVING COUNT(*) > 1 LIMIT 20"):
        problems.append(f"{row[0]}: {row[1]} seq {row[2]} is logged {row[3]} times")
    stored_versions = dict(db.execute("SELECT workspace, version FROM snapshots"))
    for ws in ledger["workspaces"]:
        name = ws["name"]
        rows = db.execute("SELECT client_id, seq, version FROM ops WHERE workspace = ?", (name,)).fetchall()
        logged = {(c, s): v for c, s, v in rows}
        first = min((v for _, _, v in rows), default=None)
        top = max([v for _, _, v in rows] + [stored_versions.get(name, 0)], default=0)
        if top != ws["version"]:
            problems.append(f"{name}: the store is at version {top}, the acknowledged ops make {ws['version']}")
        for client, seq, version in ws["ops"]:
            if first is None or version < first:
                compacted += 1
                continue
            got = logged.get((client, seq))
            if got is None:
                problems.append(f"{name}: {client} seq {seq} (acknowledged at version {version}) is not in the op log")
            elif got != version:
                problems.append(f"{name}: {client} seq {seq} acknowledged at version {version}, logged at {got}")
            else:
                in_log += 1
    print(f"soak-check store: {in_log} acknowledged ops found once in the op log at their version, "
          f"{compacted} older ones compacted away (covered by the snapshot check): "
          + ("match" if not problems else f"{len(problems)} problems"))
    return problems


def check(kind, ledger_path, target):
    """Runs one check ("http" against a base URL, "store" against a SQLite file), prints its figures
    and at most 20 problems; True when there are none."""
    ledger = load(ledger_path)
    problems = check_http(ledger, target) if kind == "http" else check_store(ledger, target)
    for p in problems[:20]:
        print("  " + p, flush=True)
    return not problems


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("http", "store"):
        sys.exit(__doc__)
    sys.exit(0 if check(*sys.argv[1:4]) else 1)


if __name__ == "__main__":
    main()
