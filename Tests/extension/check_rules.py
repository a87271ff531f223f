"""Each rule of the extension's contract taken out in turn (its code replaced by a no-op), its test in
test_safety.py run, a failure expected, the code put back: how docs/extension.md's table was checked.

Usage: TABSYNC_BIN_DIR=... python3 Tests/extension/check_rules.py [CASE ...]
       python3 Tests/extension/check_rules.py --node [CASE ...]   (the planner's rules against the node tests)
It edits extension/, web/ and mirror.js in place while a case runs: run nothing else from this
tree meanwhile (scripts/extension-chaos and the tests package those files).
"""
import subprocess, sys, os
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BG = "extension/background.js"; CL = "web/tabsync-client.js"; MI = "extension/mirror.js"
PL = "extension/plan.js"; TT = "extension/tab-table.js"
GP = "extension/group-plan.js"; GM = "extension/group-moves.js"
SG = "extension/shared-group.js"; GB = "extension/group-bound.js"; SHARED_TEST = "Tests/extension/test_shared_group.py"
cases = [
  ("view_only_token", [(BG, "      } else if (this.readOnly) {\n        // A view-only binding never adopts: the workspace opens in a window of its own.\n        await this.openWindow(state);\n", ""),
                       (BG, "    } else if (kind === \"replace\") {", "    } else if (false) {")]),
  ("read_only_workspace", [(PL, "    if (ctx.readOnly) {\n      table.unmap(t.id);", "    if (false) {\n      table.unmap(t.id);"),
                           (BG, "    if ((kind === \"add\" || kind === \"open\") && code !== \"TAB_EXISTS\") {", "    if (false) {")]),
  ("workspace_is_full", [(BG, "    if ((kind === \"add\" || kind === \"open\") && code !== \"TAB_EXISTS\") {", "    if (false) {")]),
  # lost_its_data: since the JS client reports a new history's snapshot with nothing removed
  # (newHistory), taking the extension's own rule out (welcome.js) no longer closes a tab in the
  # browser: two layers guard it. The node case backup_is_a_new_history checks the extension's alone.
  ("lost_its_data", [("extension/welcome.js", "  if (newHistory) return true;\n  if (previousEpoch && epoch !== previousEpoch) return true;", "")]),
  ("new_history_with_other_tabs", [("extension/welcome.js", "  if (newHistory) return true;\n  if (previousEpoch && epoch !== previousEpoch) return true;", "")]),
  ("gone_from_a_snapshot", [(MI, "  return count > 5 && count > windowTabs / 2;", "  return false;")]),
  ("closed_bound_window_stays_closed", [(BG, "    if (this.b.closed) return;\n    this.phase = \"detached\";\n    this.b.closed = true;", "    this.phase = \"claimed\";\n    this.b.attach = \"reattach\"; saveBinding(this.b); this.publish(); return;"), (BG, "(this.phase === \"new\" || this.phase === \"claimed\") && !this.b.closed) {", "(this.phase === \"new\" || this.phase === \"claimed\")) {")]),
  ("two_browser_restarts", [(MI, "      if (!sameTitle && !blankAtPlace) continue;", "      if (true) continue;")]),
  ("never_bound_is_never_published", [(MI, "  return match.byUrl >= 2 && match.byUrl >= 0.8 * urls;", "  return match.byUrl >= Math.max(1, Math.ceil(urls / 2));")]),
  ("offline_edits_survive", [(BG, "  return binding.incognito ? chrome.storage.session : chrome.storage.local;", "  return chrome.storage.session;")]),
  ("rate_limited_removes", [(CL, "if (entry && TRANSIENT.has(code)) {", "if (false) {")]),
  ("navigation_follows", [(PL, "    if (!placeholder && current !== prev.url) continue;", "    if (true) continue;")]),
  ("flashing_page", [(PL, "export const UPDATE_EVERY_MS = 5_000;", "export const UPDATE_EVERY_MS = 0;")]),
  ("pinning_a_tab", [(PL, "    if (t && !t.pinned) continue;", "    if (t) continue;")]),
  ("plain_ws_to_another_host", [(BG, "  if (token && /^ws:/i.test(server) && !isLoopback(server)) {", "  if (false) {")]),
  ("replaced_tab", [(BG, "  for (const m of mirrors.values()) m.table.replaceTab(removedId, added);", "")]),
  ("token_not_remembered", [(BG, "    bindings[binding.id] = binding.remember ? binding : { ...binding, token: \"\" };", "    bindings[binding.id] = binding;")]),
  ("two_bind_requests", [(BG, "  if (mirrorOfWindow(win.id) || bindingWindows.has(win.id))", "  if (mirrorOfWindow(win.id))")]),
  ("reopening_claims_once", [(BG, "  return new Set([...mirrors.values()].filter(", "  return new Set([].filter(")], "reopening_two_bindings"),
  ("reopening_only_a_matching_window", [(MI, "  return match.byUrl >= 2 && match.byUrl >= 0.8 * urls;", "  return match.byUrl >= Math.max(1, Math.ceil(urls / 2));")], "reopening_two_bindings"),
  ("private_window", [(BG, "    if (binding.incognito) {\n      const priv", "    if (false) {\n      const priv")]),
  ("try_again_with_a_new_token", [(BG, "    for (const [tid, v] of m.table.localOnlyEntries()) fresh.table.setLocalOnly(tid, v);\n    fresh.table.localIds = m.table.localIds;\n", "")]),
  ("try_again_keeps_the_window", [(BG, "  const keep = m.ready && !m.b.closed && ", "  const keep = false && ")]),
  ("remote_restore", [(BG, "      this.onRemoved(e.detail.removed);", "      this.onRemoved(e.detail.applied.op?.restore ? [] : e.detail.removed);")]),
  ("one_tab_window_after_restart", [(MI, "  if (urls > 0 && match.byUrl === urls && match.map.size === records.length && windowTabs === records.length) return true;\n", "")],
   "window_of_one_tab"),
  # A drag between a pass's two reads of the window was put back by the arrange (binding-mirror.js reconcile).
  ("drag_during_a_pass_sent_first", [("extension/binding-mirror.js", "    if (!changes.pause && movedTabs(first.map((t) => t.id), real.map((t) => t.id)).length > 0) {",
                                     "    if (false) {")], "test_groups.py::drag_during_a_pass"),
  ("share_sends", [(BG, "    this.table.setLocalOnly(tabId, null);\n", "")]),
  # The shared group (docs/extension.md, "The shared group"): test_shared_group.py, two Chromium profiles.
  ("shared_group_is_the_groups_tabs", [(GB, "    const scope = boundTabs(all, this.b.groupId);", "    const scope = { tabs: all, offset: 0 };")], SHARED_TEST),
  ("shared_group_opens_in_the_current_window", [("extension/attach.js", "    return this.b.group ? this.openGroup(state) : this.openWindow(state);", "    return this.openWindow(state);")], SHARED_TEST),
  ("shared_group_remote_open_joins", [("extension/executor.js", "        await join(made.id); // before the map", "        // before the map")], SHARED_TEST),
  ("shared_group_rename_goes_out", [(GB, "    if (local) { for (const op of localSharedOps(ctx)) this.client.submit(op); return; }", "    if (local) return;")], SHARED_TEST),
  ("shared_group_follows_the_workspace", [(GB, "    if (update) await chrome.tabGroups.update", "    if (false) await chrome.tabGroups.update")], SHARED_TEST),
  ("shared_group_add_asks_a_neighbours_group", [(BG, "      isPlaceholder, askGroup: this.askGroupHook(),", "      isPlaceholder,")], SHARED_TEST),
  ("shared_group_restart_finds_its_group", [("extension/attach.js", "        if (this.b.group && !this.b.closed) await this.findBoundGroup();", "")], SHARED_TEST),
  ("shared_group_closed_is_a_closed_window", [(GB, "    if (!scope) return null;", "    if (!scope) return [];")], SHARED_TEST),
  # A restart of a group binding (Firefox's, Chromium's), a private tab showing the same page as a tab of the group.
  ("shared_group_restart_matched_in_its_group", [("extension/attach.js", "      const tabs = mirror.b.group ? restoredScope(all, mirror.b.groupId, matched, await lastBound(mirror, w.id)) : all;", "      const tabs = all;")],
   "test_shared_group.py::firefox_group_binding_survives or sends_nothing"),
  # A group bound in a private window: its binding in storage.session only, Reopen in a private window.
  # A viewer's group binding: its rename kept while the workspace's is the one last synced, then the workspace's shown.
  ("shared_group_viewers_rename_gives_way", [(SG, " && (!ctx.readOnly || same(want, last))) return null;", ") return null;")],
   "test_shared_group.py::viewers_group_binding"),
  ("shared_group_viewers_rename_kept", [(SG, " && (!ctx.readOnly || same(want, last))) return null;", " && !ctx.readOnly) return null;")],
   "test_shared_group.py::viewers_group_binding"),
  # Two layers keep a viewer's tab local (the planner never sends it; a refused add is kept local only): both out.
  ("shared_group_viewers_tab_stays_local", [(PL, "    if (ctx.readOnly) {\n      table.unmap(t.id);", "    if (false) {\n      table.unmap(t.id);"),
                                            (BG, "    if ((kind === \"add\" || kind === \"open\") && code !== \"TAB_EXISTS\") {", "    if (false) {")],
   "test_shared_group.py::viewers_group_binding"),
  ("shared_group_private_binding_in_session", [(BG, "    if (binding.incognito) {\n      const priv", "    if (false) {\n      const priv")],
   "test_shared_group.py::private_window"),
  ("shared_group_private_reopens_private", [(GB, "      win = await chrome.windows.create({ url, focused: true, incognito: this.b.incognito });",
                                             "      win = await chrome.windows.create({ url, focused: true });")], "test_shared_group.py::private_window"),
]
# The node mode (--node): each rule taken out of the planner (extension/plan.js), the tab table or
# mirror.js, in a copy of the tree, and the node tests run there: a test must fail, fast.
node_cases = [
  ("local_close_is_a_remove", [(PL, "else submit(plan, work, { remove: { tabId: wid } });", "else {}")]),
  ("pinning_a_tab", [(PL, "    if (t && !t.pinned) continue;", "    if (t) continue;")]),
  ("read_only_closes_here_only", [(PL, "      if (ctx.readOnly) table.dismissed.add(wid);", "      if (false) table.dismissed.add(wid);")]),
  ("local_move_is_a_move", [(PL, "  for (const m of moves) {", "  for (const m of []) {")]),
  ("ours_from_before_a_restart", [(PL, "    if (!mapped && work.has(id)) { table.map(t.id, id); left = id; continue; }", "")]),
  ("local_only_never_published", [(PL, "  return !table.ignored(t.id) && !table.localOnly(t.id) && !t.pinned;", "  return !table.ignored(t.id) && !t.pinned;")]),
  ("read_only_keeps_local", [(PL, "    if (ctx.readOnly) {\n      table.unmap(t.id);", "    if (false) {\n      table.unmap(t.id);")]),
  ("blank_tab_waits_for_its_url", [(PL, "if (!mapped && ctx.urlPending?.(t))", "if (false)")]),
  ("remote_open_opens_once", [(PL, "state.tabs.filter((w) => !mapped.has(w.id) && !table.dismissed.has(w.id));", "state.tabs.filter((w) => !table.dismissed.has(w.id));")]),
  ("dismissed_not_reopened", [(PL, "state.tabs.filter((w) => !mapped.has(w.id) && !table.dismissed.has(w.id));", "state.tabs.filter((w) => !mapped.has(w.id));")]),
  ("lazy_past_the_threshold", [(PL, "const lazy = missing.length > LAZY_THRESHOLD && opened >= LAZY_THRESHOLD;", "const lazy = false;")]),
  ("only_an_applied_remove_closes", [(PL, "return w !== undefined && table.removed.has(w) && !inWorkspace.has(w);", "return w !== undefined && !inWorkspace.has(w);")]),
  ("removed_but_back_stays", [(PL, "return w !== undefined && table.removed.has(w) && !inWorkspace.has(w);", "return w !== undefined && table.removed.has(w);")]),
  ("the_brake", [(MI, "  return count > 5 && count > windowTabs / 2;", "  return false;")]),
  ("epoch_pause_ends", [(PL, "  if (epochPauseEnds(table, state)) table.paused = null;", "")]),
  ("paused_plans_nothing", [(PL, "  if (table.paused) { plan.pause = table.paused; return plan; }", "")]),
  ("active_shown_before_closing", [(PL, "if (ctx.mode === \"follow\" && gone.some((t) => t.active) && shown) {", "if (false) {")]),
  ("emptied_window_keeps_a_placeholder", [(PL, "if (real.length === gone.length && state.tabs.length === 0) plan.actions.push({ filler: {} });", "")]),
  ("remote_moves", [(PL, "  for (const m of movesToOrder(", "  for (const m of [] || movesToOrder(")]),
  ("browse_keeps_the_active_tab", [(PL, "  if (ctx.mode !== \"follow\" || ctx.deferred) return;", "  if (ctx.deferred) return;")]),
  ("navigation_never_over_the_user", [(PL, "    if (!placeholder && current !== prev.url) continue;", "")]),
  ("titles_rest_first", [(PL, "if (quietFor < TITLE_DEBOUNCE_MS)", "if (false)")]),
  ("one_update_per_5s", [(PL, "if (since < UPDATE_EVERY_MS)", "if (false)")]),
  ("navigating_says_nothing", [(PL, "if (r.navigating && r.navigating.url !== f.url && now < r.navigating.until) continue;", "")]),
  ("placeholder_title_never_published", [(PL, " || ctx.viewer || ctx.isPlaceholder(t)) continue;", " || ctx.viewer) continue;")]),
  ("pacing_budget", [(PL, "  if (plan.used >= plan.budget) return false;", "")]),
  ("replaced_tab_keeps_its_id", [(TT, "    if (r.wsId !== null) this.byWs.set(r.wsId, added);", "")]),
  ("one_to_one_map", [(TT, "    if (other !== undefined && other !== tid) this.unmap(other);", "")]),
  ("backup_is_a_new_history", [("extension/welcome.js", "  return Boolean(previousEpoch) && epoch === previousEpoch && version < seenVersion;", "  return false;")]),
  ("new_history_closes_nothing", [("extension/welcome.js", "  if (welcome.newHistory) {", "  if (false) {")]),
  ("deleted_workspace_is_final", [("extension/welcome.js", "  if (code === 4410) {", "  if (false) {")]),
  ("replaced_tab_keeps_its_navigation", [(TT, "    this.records.set(added, r);", "    this.records.set(added, { ...r, navigating: null });")]),
  ("try_again_waits_for_the_pass", [("extension/binding-mirror.js", "    this.stop();\n    await this.passing;", "    this.stop();")]),
  ("retired_mirror_never_passes", [("extension/binding-mirror.js", "    if (this.phase === \"retired\") return;\n    this.dirty = true;", "    this.dirty = true;")]),
  ("new_history_matches_by_page", [("extension/welcome.js", "    if (ids?.length) table.map(tid, ids.shift());", "")]),
  ("deleted_binding_offers_no_way_back", [("extension/welcome.js", "  if (b?.deleted) return", "  if (false) return")]),
  # Tab groups (docs/extension.md, "Tab groups"): group-plan.js and group-moves.js.
  ("group_matched_by_its_tabs", [(GP, "    if (g !== \"\" && groups.browserOf(g) === undefined) groups.map(b.id, g);", "")]),
  ("local_regroup_is_a_group_op", [(GP, "    if (now === (groups.member.get(wsId) ?? \"\")) continue;", "    continue;")]),
  ("local_rename_is_an_update", [(GP, "    if ((b.title ?? \"\") !== last.title) update.title = b.title ?? \"\";", "")]),
  ("remote_move_never_ungroups", [(GP, "&& !ctx.moved?.has(t.id)) continue; // the user's", "&& true) continue; // the user's")]),
  ("users_group_change_not_overwritten", [(GP, "&& !ctx.moved?.has(t.id)) continue; // the user's", "&& false) continue; // the user's")]),
  ("a_group_moves_whole", [(GM, "    if (g && !keep.has(`\\0${g}`)) {", "    if (false) {")]),
  # The shared group's rules (shared-group.js) and the planner's hook for it.
  ("shared_group_is_the_groups_tabs", [(SG, "  const tabs = real.filter((t) => t.groupId === groupId);", "  const tabs = real.slice();")]),
  ("shared_group_at_the_groups_place", [(SG, "index: a.open.index + offset", "index: a.open.index"), (SG, "index: a.move.index + offset", "index: a.move.index")]),
  ("shared_group_filler_in_its_place", [(SG, "    if (a.filler) return { filler: { index: offset } };", "")]),
  ("shared_group_add_asks_a_neighbours_group", [(SG, "  const g = (neighbour && groupOf.get(neighbour)) || \"\";", "  const g = \"\";")]),
  ("shared_group_add_hook", [(PL, "group: ctx.askGroup?.(id, left, work) || undefined", "group: undefined")]),
  ("shared_group_fields_are_the_first_groups", [(SG, "  if (g) return { groupId: g.id,", "  if (false) return { groupId: g.id,")]),
  ("shared_group_rename_goes_out", [(SG, "  if (same(bound, last) || ctx.readOnly) return [];", "  return [];")]),
  ("shared_group_read_only_rename_stays", [(SG, "  if (same(bound, last) || ctx.readOnly) return [];", "  if (same(bound, last)) return [];")]),
  ("shared_group_rename_without_a_group", [(SG, "  if (state.tabs.length === 0) return [];\n", "  return [];\n")]),
  ("shared_group_follows_the_workspace", [(SG, "  return same(bound, want) ? null :", "  return true ? null :")]),
  ("shared_group_viewers_rename_gives_way", [(SG, " && (!ctx.readOnly || same(want, last))) return null;", ") return null;")]),
  ("shared_group_viewers_rename_kept", [(SG, " && (!ctx.readOnly || same(want, last))) return null;", " && !ctx.readOnly) return null;")]),
  ("shared_group_users_rename_not_overwritten", [(SG, "  if (last && !same(bound, last) && (!ctx.readOnly || same(want, last))) return null;\n", "")]),
  ("shared_group_restart_matched_in_its_group", [(SG, "  return best ? best.list : tabs;", "  return tabs;")]),
  ("shared_group_restart_tie_to_the_bound_group", [(SG, "(s === best.s && bound && !best.bound)", "false")]),
  ("shared_group_matched_by_its_tabs", [(SG, "  for (const [g, n] of count) if (best === null || n > count.get(best)) best = g;", "")]),
  ("one_tab_window_after_restart", [(MI, "  if (urls > 0 && match.byUrl === urls && match.map.size === records.length && windowTabs === records.length) return true;\n", "")]),
  ("restored_window_matched_against_its_table", [(MI, "    return had.size > 0 ? restored.tabs.filter((t) => had.has(t.id)) : restored.tabs.slice();",
                                                  "    return [...restored.tabs, ...stateTabs.filter((t) => !restored.tabs.some((r) => r.id === t.id))];")]),
]
NODE_TESTS = ["Tests/extension/mirror.test.mjs", "Tests/extension/plan.test.mjs", "Tests/extension/tab-table.test.mjs", "Tests/extension/welcome.test.mjs",
              "Tests/extension/try-again.test.mjs", "Tests/extension/shared-group.test.mjs", "Tests/extension/group-plan.test.mjs", "Tests/extension/group-moves.test.mjs",
              "Tests/extension/shared-group.property.test.mjs", "Tests/extension/plan.property.test.mjs"]


def node_mode(only):
    """Each node case in a copy of the tree (this checkout is not touched): a node test must fail."""
    import shutil, tempfile, time
    bad = 0
    for name, edits in node_cases:
        if only and name not in only: continue
        with tempfile.TemporaryDirectory() as tmp:
            for d in ("extension", "web", "Tests/extension"):
                shutil.copytree(os.path.join(ROOT, d), os.path.join(tmp, d), ignore=shutil.ignore_patterns("*.py", "__pycache__"))
            os.makedirs(os.path.join(tmp, "scripts"))  # try-again.test.mjs loads the packaged extension
            shutil.copy(os.path.join(ROOT, "scripts", "package-extension"), os.path.join(tmp, "scripts"))
            for path, old, new in edits:
                p = os.path.join(tmp, path)
                text = open(p).read()
                if old not in text:
                    sys.exit(f"{name}: PATTERN MISSING in {path}: {old[:60]!r}")
                open(p, "w").write(text.replace(old, new, 1))
            # The rule tests first; the group tests and the generated cases only if none of them failed.
            for stage in (NODE_TESTS[:-4], NODE_TESTS[-4:]):
                start = time.monotonic()
                try:
                    r = subprocess.run(["node", "--test", "--test-reporter=dot", *stage], cwd=tmp, capture_output=True, text=True,
                                       env={**os.environ, "TABSYNC_PLAN_CASES": "1000", "TABSYNC_PLAN_SEED": "1"}, timeout=120)
                    failed = r.returncode != 0
                except subprocess.TimeoutExpired:  # a rule out may make a test wait forever (try-again's pass loop): that fails too
                    failed = True
                took = time.monotonic() - start
                if failed: break
            bad += not failed
            by = "rule tests" if stage == NODE_TESTS[:-4] else "group tests or generated cases"
            print(f"{name}: rule out -> {'FAILS (good)' if failed else 'PASSES (bad)'}{f' ({by})' if failed else ''} in {took:.2f} s", flush=True)
    sys.exit(1 if bad else 0)


def module_of(path, old):
    """`path`, or for BG (the extension's code, background.js before it was split into modules)
    the extension module that holds `old`."""
    if path != BG or old in open(os.path.join(ROOT, path)).read():
        return path
    for name in sorted(os.listdir(os.path.join(ROOT, "extension"))):
        if name.endswith(".js") and old in open(os.path.join(ROOT, "extension", name)).read():
            return f"extension/{name}"
    return path


only = sys.argv[1:]
if only[:1] == ["--node"]:
    node_mode(only[1:])
for name, edits, *test in cases:
    if only and name not in only: continue
    originals = {}
    ok = True
    for path, old, new in edits:
        path = module_of(path, old)
        p = os.path.join(ROOT, path)
        text = originals.setdefault(path, open(p).read()) if path not in originals else open(p).read()
        if old not in text:
            print(f"{name}: PATTERN MISSING in {path}: {old[:60]!r}", flush=True); ok = False; break
        open(p, "w").write(text.replace(old, new, 1))
    try:
        if ok:
            # A case's test: a -k pattern of test_safety.py, FILE::PATTERN in another file, or a whole test file (.py).
            spec = (test or [name])[0]
            file, _, pattern = spec.rpartition("::")
            target = ([spec] if spec.endswith(".py") else
                      [f"Tests/extension/{file or 'test_safety.py'}", "-k", pattern])
            r = subprocess.run(["python3", "-m", "pytest", "-p", "no:cacheprovider", "-q", *target],
                               cwd=ROOT, env=os.environ, capture_output=True, text=True, timeout=600)
            last = [l for l in r.stdout.splitlines() if l.startswith("E  ")][:1]
            summary = r.stdout.strip().splitlines()[-1]
            print(f"{name}: rule out -> {'FAILS (good)' if r.returncode != 0 else 'PASSES (bad)'}: {summary} {last[0][:200] if last else ''}", flush=True)
    finally:
        for path, text in originals.items():
            open(os.path.join(ROOT, path), "w").write(text)
