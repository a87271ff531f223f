"""scripts/nemesis_check.py on small handmade histories: what must pass passes, and a lost ack, a
doubled op, a reused version, a reordering, a refused-yet-stored op and an unconverged client fail."""
import copy
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import nemesis_check as nc  # noqa: E402

T1 = {"id": "t1", "title": "one", "key": "a0"}
T2 = {"id": "t2", "title": "two", "key": "a1"}
ADD1 = {"add": {"tab": T1, "activate": True}}
ADD2 = {"add": {"tab": T2}}


def good():
    """Two clients of workspace w: c1 adds t1 (v1), loses its connection while adding t2, resumes
    and gets t2 acknowledged (v2) from the resume; c2 sees both and has one op refused."""
    c1 = [
        {"t": 0.0, "type": "connect", "ws": "w"},
        {"t": 0.1, "type": "welcome", "ws": "w", "recovered": False, "version": 0, "epoch": "e", "lastSeq": 0},
        {"t": 0.2, "type": "submit", "ws": "w", "seq": 1, "op": ADD1},
        {"t": 0.3, "type": "applied", "ws": "w", "version": 1, "client": "c1", "seq": 1, "op": ADD1},
        {"t": 0.3, "type": "ack", "ws": "w", "seq": 1, "version": 1},
        {"t": 0.4, "type": "submit", "ws": "w", "seq": 2, "op": ADD2},
        {"t": 0.5, "type": "disconnect", "ws": "w", "code": 1006},
        {"t": 1.0, "type": "welcome", "ws": "w", "recovered": True, "version": 1, "epoch": "e", "lastSeq": 2},
        {"t": 1.0, "type": "applied", "ws": "w", "version": 2, "client": "c1", "seq": 2, "op": ADD2},
        {"t": 1.0, "type": "ack", "ws": "w", "seq": 2, "version": 2},
        {"t": 2.0, "type": "final", "ws": "w", "version": 2, "epoch": "e", "tabs": [T1, T2], "activeTabId": "t1", "pending": 0},
    ]
    c2 = [
        {"t": 0.0, "type": "welcome", "ws": "w", "recovered": False, "version": 0, "epoch": "e", "lastSeq": 0},
        {"t": 0.3, "type": "applied", "ws": "w", "version": 1, "client": "c1", "seq": 1, "op": ADD1},
        {"t": 0.4, "type": "submit", "ws": "w", "seq": 1, "op": {"remove": {"tabId": "zz"}}},
        {"t": 0.5, "type": "reject", "ws": "w", "seq": 1, "code": "TAB_GONE"},
        {"t": 0.9, "type": "applied", "ws": "w", "version": 2, "client": "c1", "seq": 2, "op": ADD2},
        {"t": 2.0, "type": "final", "ws": "w", "version": 2, "epoch": "e", "tabs": [T1, T2], "activeTabId": "t1", "pending": 0},
    ]
    store = {
        "workspaces": {"w": {"version": 2, "epoch": "e", "tabs": [T1, T2], "activeTabId": "t1"}},
        "ops": [{"ws": "w", "version": 1, "client": "c1", "seq": 1}, {"ws": "w", "version": 2, "client": "c1", "seq": 2}],
    }
    return {"c1": c1, "c2": c2}, store


def violations(histories, store, **kw):
    report = nc.check(histories, store, **kw)
    return {k: n for k, n in report["violations"].items() if n}, report


def test_a_correct_history_passes_with_its_counts():
    h, s = good()
    bad, r = violations(h, s, faults=[{"kind": "kill", "start": 0.4, "end": 0.8}])
    assert bad == {}
    assert nc.ok(r)
    assert (r["submitted"], r["acked"], r["rejected"], r["checked"], r["converged"]) == (3, 2, 1, 2, 2)
    assert r["perFault"]["kill"]["disconnects"] == 1
    assert abs(r["perFault"]["kill"]["firstAckP99"] - 0.5) < 1e-9
    assert "PASS" in nc.format_report(r)


def test_a_lost_ack_fails():
    h, s = good()
    s["ops"] = s["ops"][:1]
    s["workspaces"]["w"]["version"] = 1
    bad, r = violations(h, s)
    assert bad.get("lost") == 1
    assert "FAIL" in nc.format_report(r)


def test_a_doubled_op_fails_in_the_log_and_in_the_acks():
    h, s = good()
    s["ops"].append({"ws": "w", "version": 3, "client": "c1", "seq": 2})
    s["workspaces"]["w"]["version"] = 3
    bad, _ = violations(h, s)
    assert bad.get("doubled") == 1
    h, s = good()
    h["c1"].insert(-1, {"t": 1.5, "type": "ack", "ws": "w", "seq": 2, "version": 3})
    bad, _ = violations(h, s)
    assert bad.get("doubled") == 1


def test_a_version_reused_fails():
    h, s = good()
    # c2 was told version 2 is its own op; c1 was told it is c1's.
    other = {"update": {"tabId": "t1", "title": "x"}}
    h["c2"][4] = {"t": 0.9, "type": "applied", "ws": "w", "version": 2, "client": "c2", "seq": 2, "op": other}
    h["c2"].insert(5, {"t": 0.9, "type": "ack", "ws": "w", "seq": 2, "version": 2})
    h["c2"].insert(2, {"t": 0.8, "type": "submit", "ws": "w", "seq": 2, "op": other})
    bad, _ = violations(h, s)
    assert bad.get("versionReused", 0) >= 1
    assert bad.get("lost") == 1  # c2's acknowledged op is not in the log


def test_acks_out_of_seq_order_fail():
    h, s = good()
    s["ops"] = [{"ws": "w", "version": 1, "client": "c1", "seq": 2}, {"ws": "w", "version": 2, "client": "c1", "seq": 1}]
    for e in h["c1"]:
        if e["type"] in ("ack", "applied") and e.get("client", "c1") == "c1":
            e["version"] = 3 - e["version"]
    for e in h["c2"]:
        if e["type"] == "applied":
            e["version"] = 3 - e["version"]
    bad, _ = violations(h, s)
    assert bad.get("outOfOrder") == 1


def test_a_refused_op_in_the_log_and_a_phantom_fail():
    h, s = good()
    s["ops"].append({"ws": "w", "version": 3, "client": "c2", "seq": 1})
    s["ops"].append({"ws": "w", "version": 4, "client": "c2", "seq": 9})
    s["workspaces"]["w"]["version"] = 4
    bad, _ = violations(h, s)
    assert bad.get("rejectedYetStored") == 1
    assert bad.get("phantom") == 1
    assert bad.get("notConverged") == 2  # both clients stopped at version 2


def test_a_gap_in_the_log_and_a_client_left_behind_fail():
    h, s = good()
    s["ops"] = s["ops"][1:]
    bad, _ = violations(h, s)
    assert bad == {}  # version 1 compacted away: not a gap, its ack is not checked
    s2 = copy.deepcopy(s)
    s2["ops"].append({"ws": "w", "version": 4, "client": "", "seq": 0})
    s2["workspaces"]["w"]["version"] = 4
    bad, _ = violations(h, s2)
    assert bad.get("gaps") == 1
    h, s = good()
    h["c2"][-1]["tabs"] = [T2, T1]
    h["c2"][-1]["pending"] = 1
    bad, _ = violations(h, s)
    assert bad == {"notConverged": 1, "unsettled": 1}


def test_a_divergence_fails_and_a_version_gap_is_only_counted():
    h, s = good()
    h["c2"].insert(2, {"t": 0.35, "type": "resync", "ws": "w", "reason": "version gap: expected 2, got 3"})
    bad, r = violations(h, s)
    assert bad == {} and r["resyncs"] == {"version gap": 1}
    h["c2"].insert(2, {"t": 0.36, "type": "resync", "ws": "w", "reason": "an applied op does not fit: 't9'"})
    bad, _ = violations(h, s)
    assert bad == {"diverged": 1}


def test_the_longest_time_without_an_ack_in_a_window():
    assert nc.longest_gap([1.0, 2.0, 6.0, 7.0], 0.5, 7.5) == 4.0
    assert nc.longest_gap([], 3.0, 5.0) == 2.0
    h, s = good()
    r = nc.check(h, s, faults=[{"kind": "pause", "start": 0.0, "end": 2.0}])
    assert r["perFault"]["pause"]["ackStalls"] == [2.0]  # from t=1.0 to the window's end, 3.0


def test_split_and_merge_counts():
    placement = [
        {"ws": "w", "node": "node1", "start": 0, "end": 10},
        {"ws": "w", "node": "node2", "start": 2, "end": 5},
        {"ws": "w", "node": "node2", "start": 7, "end": 8},
        {"ws": "v", "node": "node3", "start": 0, "end": 10},
        {"ws": "v", "node": "node3", "start": 1, "end": 4},
    ]
    assert nc.split_merge(placement) == {"splits": 2, "merges": 2, "splitSeconds": 4.0}


def test_an_op_held_after_unavailable_and_retried_under_a_new_seq_is_counted_as_landed():
    """c1's second add is refused UNAVAILABLE (a PostgreSQL restart), held, and sent again as seq 3:
    the retry is acknowledged at v2; the refused seq 2 is not in the log (nothing to contradict)."""
    h, s = good()
    c1 = h["c1"][:6] + [
        {"t": 0.5, "type": "reject", "ws": "w", "seq": 2, "code": "UNAVAILABLE", "held": True},
        {"t": 0.9, "type": "retry", "ws": "w", "seq": 3, "first": 2},
        {"t": 0.9, "type": "submit", "ws": "w", "seq": 3, "op": ADD2},
        {"t": 1.0, "type": "applied", "ws": "w", "version": 2, "client": "c1", "seq": 3, "op": ADD2},
        {"t": 1.0, "type": "ack", "ws": "w", "seq": 3, "version": 2},
        h["c1"][-1],
    ]
    h["c1"] = c1
    h["c2"][4]["seq"] = 3
    s["ops"][1]["seq"] = 3
    bad, r = violations(h, s)
    assert bad == {}
    assert (r["held"], r["heldLanded"]) == (1, 1)
    assert "1 landed, 0 refused for good" in nc.format_report(r)
    # Held and never sent again: still pending at the end, unsettled.
    h["c1"][-1] = dict(h["c1"][-1], pending=1)
    bad, _ = violations(h, s)
    assert bad.get("unsettled") == 1


def test_a_history_answer_must_be_the_logs_ops_and_never_past_the_store():
    h, s = good()
    h["c2"].insert(3, {"t": 0.45, "type": "history", "ws": "w", "id": 1, "ops": [[1, "c1", 1]]})
    bad, r = violations(h, s)
    assert bad == {} and (r["historyReads"], r["historyOps"]) == (1, 1)
    wrong = copy.deepcopy(h)
    wrong["c2"][3]["ops"] = [[2, "c1", 1]]
    assert violations(wrong, s)[0] == {"historyNotALog": 1}
    ahead = copy.deepcopy(h)
    ahead["c2"][3]["ops"] = [[3, "c2", 9]]
    assert violations(ahead, s)[0] == {"historyNotALog": 1}


def feed_of_good():
    """The change feed of `good()`'s workspace read from version 0: both ops, once, in order."""
    return {"w": [{"t": 0.3, "kind": "op", "version": 1, "client": "c1", "seq": 1},
                  {"t": 1.0, "kind": "op", "version": 2, "client": "c1", "seq": 2}]}


def test_a_feed_with_every_version_once_passes():
    h, s = good()
    bad, r = violations(h, s, feeds=feed_of_good())
    assert bad == {}
    assert r["feedVersions"] == 2
    assert "2 versions delivered by 1 readers of the change feed (0 resumes)" in nc.format_report(r)
    resumed = feed_of_good()
    resumed["w"].append({"t": 2.0, "resumes": 3})
    bad, r = violations(h, s, feeds=resumed)
    assert bad == {} and r["feedResumes"] == 3


def test_a_feed_missing_a_version_or_repeating_one_or_naming_another_op_fails():
    h, s = good()
    missing = feed_of_good()
    del missing["w"][1]
    bad, _ = violations(h, s, feeds=missing)
    assert bad == {"feedMissing": 2}  # the logged version 2, and c1's acknowledged seq 2
    repeated = feed_of_good()
    repeated["w"].append(dict(repeated["w"][1]))
    bad, _ = violations(h, s, feeds=repeated)
    assert bad == {"feedBroken": 2}  # op 2 after version 2, and version 2 twice
    wrong = feed_of_good()
    wrong["w"][0]["client"] = "c2"
    bad, _ = violations(h, s, feeds=wrong)
    assert bad == {"feedWrong": 1}


def test_a_snapshot_that_skips_versions_and_a_failed_reader_fail():
    h, s = good()
    skipped = {"w": [{"t": 0.1, "kind": "snapshot", "version": 0},
                     {"t": 1.0, "kind": "snapshot", "version": 2}]}
    bad, _ = violations(h, s, feeds=skipped)
    assert bad["feedBroken"] == 1 and bad["feedMissing"] == 4
    resumed = {"w": [{"t": 0.1, "kind": "snapshot", "version": 0}, *feed_of_good()["w"],
                     {"t": 1.5, "kind": "snapshot", "version": 2}]}
    assert violations(h, s, feeds=resumed)[0] == {}
    failed = feed_of_good()
    failed["w"].append({"t": 1.2, "error": "FeedUnreachable: no server for 120 s"})
    assert violations(h, s, feeds=failed)[0] == {"feedBroken": 1}


def hooks_of_good():
    """The webhook receiver's requests for `good()`'s workspace, at least once as a sender on two
    nodes makes them: version 1 failed on purpose, then taken, and taken again from the other node;
    version 2 taken once."""
    def req(n, ver, seq, status=204, **kw):
        return {"n": n, "t": n / 10, "id": f"w:{ver}", "ws": "w", "version": ver, "kind": "op", "client": "c1",
                "seq": seq, "status": status, "valid": True, **kw}
    return [req(1, 1, 1, status=503), req(2, 1, 1), req(3, 1, 1), req(4, 2, 2), req(5, 1, 1)]


def test_webhooks_delivered_at_least_once_in_order_pass_with_their_duplicates_counted():
    h, s = good()
    bad, r = violations(h, s, hooks=hooks_of_good())
    assert bad == {}
    assert (r["hookRequests"], r["hookTaken"], r["hookFailed"], r["hookVersions"], r["hookDuplicates"]) == (5, 4, 1, 2, 2)
    assert "4 answered 2xx (1 failed on purpose, 0 not verified): 2 versions delivered, 2 duplicates" in nc.format_report(r)
    # No hook registered: no webhook check, no line.
    assert "hookRequests" not in violations(h, s)[1]


def test_a_version_never_taken_fails_as_missing():
    h, s = good()
    # Version 1 came only to be refused (503), yet version 2 was taken: version 1 was skipped.
    only_failed = [x for x in hooks_of_good() if x["status"] != 204 or x["version"] != 1]
    bad, r = violations(h, s, hooks=only_failed)
    assert bad == {"hookMissing": 1}
    # An acknowledged op the log lost is looked for in the deliveries too (besides "lost").
    s2 = copy.deepcopy(s)
    s2["ops"] = s2["ops"][:1]
    s2["workspaces"]["w"]["version"] = 1
    bad, _ = violations(h, s2, hooks=[x for x in hooks_of_good() if x["version"] == 1])
    assert bad["hookMissing"] == 1 and bad["lost"] == 1


def test_first_arrivals_out_of_version_order_fail_while_a_late_duplicate_does_not():
    h, s = good()
    swapped = hooks_of_good()
    swapped[3]["n"], swapped[1]["n"], swapped[2]["n"] = 2, 3, 4  # version 2 taken before any version 1
    bad, _ = violations(h, s, hooks=swapped)
    assert bad == {"hookOrder": 1}


def test_a_bad_signature_and_a_body_that_is_not_its_id_or_the_log_fail():
    h, s = good()
    forged = hooks_of_good() + [dict(hooks_of_good()[3], n=6, valid=False, error="no webhook-signature matches")]
    bad, r = violations(h, s, hooks=forged)
    assert bad == {"hookBadSignature": 1} and "no webhook-signature matches" in nc.format_report(r)
    other_id = hooks_of_good()
    other_id[3]["id"] = "w:7"
    assert violations(h, s, hooks=other_id)[0] == {"hookWrong": 1, "hookBehind": 1}
    other_op = hooks_of_good()
    other_op[3]["seq"] = 9
    assert violations(h, s, hooks=other_op)[0] == {"hookWrong": 1}


def test_a_snapshot_delivery_stands_only_for_versions_the_log_no_longer_holds():
    h, s = good()
    snap2 = {"n": 1, "t": 0.1, "id": "w:2", "ws": "w", "version": 2, "kind": "snapshot", "status": 204, "valid": True}
    # The log holds version 1 and 2: a snapshot at 2 in their place skips both (as a store error taken
    # for a compacted log would).
    bad, r = violations(h, s, hooks=[snap2])
    assert bad == {"hookMissing": 2} and r["hookSnapshots"] == 1
    assert "a snapshot delivery at 2 stood for it, though the log holds it" in nc.format_report(r)
    # Compacted: the log keeps version 2 only; a snapshot at 1, then op 2, is a gap marked, not missing.
    s2 = copy.deepcopy(s)
    s2["ops"] = s2["ops"][1:]
    snap1 = dict(snap2, id="w:1", version=1)
    bad, r = violations(h, s2, hooks=[snap1, hooks_of_good()[3]])
    assert bad == {} and r["hookVersions"] == 2
    # A snapshot first, then an older op from another sender: versions go back for the receiver.
    bad, r = violations(h, s, hooks=[dict(snap2, n=1), hooks_of_good()[1], dict(hooks_of_good()[3], n=9)])
    assert bad == {"hookOrder": 1}  # version 2 came as an op too (request 9): delivered
    assert "after version 2 (a snapshot delivery)" in nc.format_report(r)


def test_versions_past_the_last_delivered_are_behind_not_skipped():
    h, s = good()
    bad, r = violations(h, s, hooks=hooks_of_good()[:3])  # version 2 never came: the sender is behind
    assert bad == {"hookBehind": 1} and r["hookBehindVersions"] == 1
    assert "w: versions 2..2 were not delivered when the wait ended" in nc.format_report(r)
