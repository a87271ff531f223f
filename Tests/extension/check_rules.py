"""Each rule of the extension's contract taken out in turn (its code replaced by a no-op), its test in
test_safety.py run, a failure expected, the code put back: how docs/extension.md's table was checked.

Usage: TABSYNC_BIN_DIR=... python3 Tests/extension/check_rules.py [CASE ...]
It edits extension/, web/ and mirror.js in place while a case runs: run nothing else from this
tree meanwhile (scripts/extension-chaos and the tests package those files).
"""
import subprocess, sys, os
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BG = "extension/background.js"; CL = "web/tabsync-client.js"; MI = "extension/mirror.js"
cases = [
  ("view_only_token", [(BG, "      } else if (this.readOnly) {\n        // A view-only binding never adopts: the workspace opens in a window of its own.\n        await this.openWindow(state);\n", ""),
                       (BG, "    } else if (kind === \"replace\") {", "    } else if (false) {")]),
  ("read_only_workspace", [(BG, "        if (readOnly) {\n          this.map.delete(t.id);", "        if (false) {\n          this.map.delete(t.id);"),
                           (BG, "    if ((kind === \"add\" || kind === \"open\") && code !== \"TAB_EXISTS\") {", "    if (false) {")]),
  ("workspace_is_full", [(BG, "    if ((kind === \"add\" || kind === \"open\") && code !== \"TAB_EXISTS\") {", "    if (false) {")]),
  ("lost_its_data", [(BG, "    if (previousEpoch && epoch !== previousEpoch) {", "    if (false) {")]),
  ("new_history_with_other_tabs", [(BG, "    if (previousEpoch && epoch !== previousEpoch) {", "    if (false) {")]),
  ("gone_from_a_snapshot", [(MI, "  return count > 5 && count > windowTabs / 2;", "  return false;")]),
  ("closed_bound_window_stays_closed", [(BG, "    if (this.b.closed) return;\n    this.ready = false;\n    this.b.closed = true;", "    this.ready = false;\n    this.b.attach = \"reattach\"; saveBinding(this.b); this.publish(); return;"), (BG, "    if (status === \"connected\" && !this.ready && !this.attaching && !this.b.closed) {", "    if (status === \"connected\" && !this.ready && !this.attaching) {")]),
  ("two_browser_restarts", [(MI, "      if (!sameTitle && !blankAtPlace) continue;", "      if (true) continue;")]),
  ("never_bound_is_never_published", [(MI, "  return match.byUrl >= 2 && match.byUrl >= 0.8 * urls;", "  return match.byUrl >= Math.max(1, Math.ceil(urls / 2));")]),
  ("offline_edits_survive", [(BG, "  return binding.incognito ? chrome.storage.session : chrome.storage.local;", "  return chrome.storage.session;")]),
  ("rate_limited_removes", [(CL, "if (entry && TRANSIENT.has(code)) {", "if (false) {")]),
  ("navigation_follows", [(BG, "      if (!isPlaceholder(t) && current !== prev.url) continue;", "      if (true) continue;")]),
  ("flashing_page", [(BG, "const UPDATE_EVERY_MS = 5_000;", "const UPDATE_EVERY_MS = 0;")]),
  ("pinning_a_tab", [(BG, "      if (t && !t.pinned) continue;", "      if (t) continue;")]),
  ("plain_ws_to_another_host", [(BG, "  if (token && /^ws:/i.test(server) && !isLoopback(server)) {", "  if (false) {")]),
  ("replaced_tab", [(BG, "      if (table.has(removedId)) { table.set(added, table.get(removedId)); table.delete(removedId); }", "")]),
  ("token_not_remembered", [(BG, "    bindings[binding.id] = binding.remember ? binding : { ...binding, token: \"\" };", "    bindings[binding.id] = binding;")]),
  ("two_bind_requests", [(BG, "  if (mirrorOfWindow(win.id) || bindingWindows.has(win.id))", "  if (mirrorOfWindow(win.id))")]),
  ("reopening_claims_once", [(BG, "  return new Set([...mirrors.values()].filter(", "  return new Set([].filter(")], "reopening_two_bindings"),
  ("reopening_only_a_matching_window", [(MI, "  return match.byUrl >= 2 && match.byUrl >= 0.8 * urls;", "  return match.byUrl >= Math.max(1, Math.ceil(urls / 2));")], "reopening_two_bindings"),
  ("private_window", [(BG, "    if (binding.incognito) {\n      const priv", "    if (false) {\n      const priv")]),
  ("try_again_with_a_new_token", [(BG, "  fresh.localOnly = m.localOnly;\n  fresh.localIds = m.localIds;\n", "")]),
  ("try_again_keeps_the_window", [(BG, "  const keep = m.ready && !m.b.closed && ", "  const keep = false && ")]),
  ("remote_restore", [(BG, "(e) => this.onRemoved(e.detail.removed));", "(e) => this.onRemoved(e.detail.applied.op?.restore ? [] : e.detail.removed));")]),
  ("share_sends", [(BG, "    this.localOnly.delete(tabId);\n    if (v.wsId) this.localIds", "    if (v.wsId) this.localIds")]),
]
only = sys.argv[1:]
for name, edits, *test in cases:
    if only and name not in only: continue
    originals = {}
    ok = True
    for path, old, new in edits:
        p = os.path.join(ROOT, path)
        text = originals.setdefault(path, open(p).read()) if path not in originals else open(p).read()
        if old not in text:
            print(f"{name}: PATTERN MISSING in {path}: {old[:60]!r}", flush=True); ok = False; break
        open(p, "w").write(text.replace(old, new, 1))
    try:
        if ok:
            r = subprocess.run(["python3", "-m", "pytest", "-p", "no:cacheprovider", "-q", "Tests/extension/test_safety.py", "-k", (test or [name])[0]],
                               cwd=ROOT, env=os.environ, capture_output=True, text=True, timeout=600)
            last = [l for l in r.stdout.splitlines() if l.startswith("E  ")][:1]
            summary = r.stdout.strip().splitlines()[-1]
            print(f"{name}: rule out -> {'FAILS (good)' if r.returncode != 0 else 'PASSES (bad)'}: {summary} {last[0][:200] if last else ''}", flush=True)
    finally:
        for path, text in originals.items():
            open(os.path.join(ROOT, path), "w").write(text)
