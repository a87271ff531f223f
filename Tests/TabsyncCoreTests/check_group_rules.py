"""Breaks each tab-group rule of TabsyncCore on purpose, one at a time, and names the tests that fail
(docs/design.md, "Tab groups"). Every rule must fail at least one; run by hand (it rebuilds the
tests once per rule, minutes): python3 Tests/TabsyncCoreTests/check_group_rules.py. The source is
put back afterwards."""
import subprocess, sys
f='Sources/TabsyncCore/Workspace+Groups.swift'
orig=open(f).read()
muts = {
 "R1 between two of G joins G": ("if let leftGroup, !leftGroup.isEmpty, leftGroup == rightGroup { return leftGroup }", "if false, let leftGroup, !leftGroup.isEmpty, leftGroup == rightGroup { return leftGroup }"),
 "R2 a neighbour in its group keeps it": ("if leftGroup == asked || rightGroup == asked { return asked }", "if false { return asked }"),
 "R3 a group's only tab keeps it": ("if let moving, !tabs.indices.contains(where: { $0 != moving && tabs[$0].group == asked }) { return asked }", ""),
 "R4 otherwise none": ("        return \"\"\n    }\n\n    // MARK: - resolving", "        return asked\n    }\n\n    // MARK: - resolving"),
 "R5 existing group: after its last tab": ("let last = w.tabs.lastIndex(where: { $0.group == op.groupId })!\n            w.insert(taken, after: last, group: op.groupId)", "let last = w.tabs.firstIndex(where: { $0.group == op.groupId })!\n            w.insert(taken, after: last, group: op.groupId)"),
 "R6 new group inside a span goes after it": ("if !old.isEmpty, f > 0, f + 1 < w.tabs.count, w.tabs[f - 1].group == old, w.tabs[f + 1].group == old {", "if false {"),
 "R7 ungroup inside a span moves after it": ("if i > 0, i + 1 < w.tabs.count, w.tabs[i - 1].group == old, w.tabs[i + 1].group == old {", "if false {"),
 "R8 an empty group is gone": ("        groups = ordered\n", "        groups = ordered + byId.values.sorted { $0.id < $1.id }\n"),
}
for name,(a,b) in muts.items():
    if a not in orig: print(name, "PATTERN NOT FOUND"); continue
    open(f,'w').write(orig.replace(a,b,1))
    r=subprocess.run("swift build --build-tests 2>&1 | grep -c error: ; swift test --skip-build --filter 'GroupWorkedExampleTests|GroupPropertyTests' 2>&1 | grep -E '✘ Test [a-zA-Z]+\\(' | sed -E 's/.*Test ([a-zA-Z]+)\\(.*/\\1/' | sort -u | tr '\\n' ' '", shell=True, capture_output=True, text=True)
    print(name, "->", r.stdout.replace("\n"," | "), flush=True)
open(f,'w').write(orig)
