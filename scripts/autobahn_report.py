#!/usr/bin/env python3
"""scripts/autobahn's two Python steps (it runs them with the python3 on PATH, not the suite's 2.7).

  autobahn_report.py spec SPEC.json URL OUTDIR CASE...
      writes the fuzzing client's spec: one server, `tabsync` at URL/ with subprotocol tabsync.echo.
  autobahn_report.py report INDEX.json SECONDS [JUNIT.xml]
      reads the suite's reports/index.json: a line per case that is not OK, a summary, the counts
      line scripts/test once read (`autobahn counts: PASSED FAILED ALLOWED`) and, given JUNIT.xml,
      each case as a JUnit test case (an allowed failure as skipped). Exits 1 when a case failed
      that is not allowed to, or there is no report.
  autobahn_report.py skipped JUNIT.xml MESSAGE
      JUnit with one skipped case (no Python 2.7 here).
"""
import json
import sys
from collections import Counter

from lib import write_junit

# libwebsockets keeps one pending pong per connection: 10 pings in a row get fewer pongs.
ALLOWED = {"2.10": "libwebsockets coalesces pending pongs", "2.11": "libwebsockets coalesces pending pongs"}
PASSING = {"OK", "NON-STRICT", "INFORMATIONAL"}


def key(case):
    return [int(p) for p in case.split(".")]


def spec(path, url, outdir, cases):
    with open(path, "w") as f:
        json.dump({
            "outdir": outdir,
            "servers": [{"agent": "tabsync", "url": url + "/", "protocols": ["tabsync.echo"]}],
            "cases": cases,
            "exclude-cases": [],
            "exclude-agent-cases": {},
        }, f, indent=2)


def report(index_path, elapsed, junit=None):
    try:
        with open(index_path) as f:
            index = json.load(f)
    except (OSError, ValueError) as error:
        print(f"autobahn: no report: {error}")
        return 1
    results = index.get("tabsync", {})
    counts = Counter()
    failed = allowed = 0
    cases = []
    for case in sorted(results, key=key):
        r = results[case]
        behavior = r.get("behavior", "?")
        counts[behavior] += 1
        seconds = (r.get("duration") or 0) / 1000
        if behavior == "OK":
            cases.append((case, "passed", "", seconds))
            continue
        if behavior in PASSING:
            note = ""
            cases.append((case, "passed", "", seconds))
        elif case in ALLOWED:
            allowed += 1
            note = f"  (allowed: {ALLOWED[case]})"
            cases.append((case, "skipped", f"{behavior}, allowed: {ALLOWED[case]}", seconds))
        else:
            failed += 1
            note = "  <- not allowed"
            cases.append((case, "failed", f"{behavior}, close {r.get('behaviorClose', '?')}", seconds))
        print("autobahn: %-8s %-13s close %-13s code %s%s" % (
            case, behavior, r.get("behaviorClose", "?"), r.get("remoteCloseCode"), note))
    total = len(results)
    summary = ", ".join(f"{b} {counts[b]}" for b in sorted(counts))
    print(f"autobahn summary: {total} cases in {elapsed} s: {summary or 'none'}; {failed} failed, "
          f"{allowed} allowed failures")
    print(f"autobahn counts: {total - failed - allowed} {failed} {allowed}")
    if junit:
        write_junit(junit, "autobahn", cases)
    return 1 if failed or total == 0 else 0


def main():
    args = sys.argv[1:]
    if len(args) >= 4 and args[0] == "spec":
        spec(args[1], args[2], args[3], args[4:])
    elif len(args) in (3, 4) and args[0] == "report":
        sys.exit(report(args[1], args[2], args[3] if len(args) == 4 else None))
    elif len(args) == 3 and args[0] == "skipped":
        write_junit(args[1], "autobahn", [("autobahn", "skipped", args[2], 0)])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
