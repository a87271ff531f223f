// The local-move step with groups (docs/extension.md, "Tab groups", a whole-group drag): which
// tabs a user moved and the ops that say so, keeping every group whole under the placement rule
// (shared/DESIGN.md, "Tab groups"). Pure: node tests it (Tests/extension/group-moves.test.mjs).

import { lcsSet } from "./mirror.js";

/**
 * The groups that are one block: their tabs (of `before`, the order last synced, and `now`, the
 * real order, both restricted to the same ids) are contiguous in both, the same ones. Map id → group.
 */
function blocksOf(before, now, groupOf) {
  const spans = (xs) => {
    const m = new Map();
    xs.forEach((id, i) => { const g = groupOf(id); if (g) m.set(g, [...(m.get(g) ?? []), i]); });
    return m;
  };
  const contiguous = (is) => is[is.length - 1] - is[0] === is.length - 1;
  const sb = spans(before);
  const sn = spans(now);
  const out = new Map();
  for (const [g, is] of sn) {
    if (!contiguous(is) || !sb.has(g) || !contiguous(sb.get(g)) || sb.get(g).length !== is.length) continue;
    for (const i of is) out.set(now[i], g);
  }
  return out;
}

/** `xs` as tokens: a block is one token (`\0` + its group), any other tab its own id. */
function tokens(xs, blocks) {
  const out = [];
  for (const id of xs) {
    const t = blocks.has(id) ? `\0${blocks.get(id)}` : id;
    if (out[out.length - 1] !== t) out.push(t);
  }
  return out;
}

/** The tokens of a common subsequence of `a` and `b` of the greatest total `weight`. */
function heaviestCommon(a, b, weight) {
  const n = a.length;
  const m = b.length;
  const table = Array.from({ length: n + 1 }, () => new Float64Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      const skip = Math.max(table[i + 1][j], table[i][j + 1]);
      table[i][j] = a[i] === b[j] ? Math.max(skip, table[i + 1][j + 1] + weight(a[i])) : skip;
    }
  }
  const keep = new Set();
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j] && table[i][j] === table[i + 1][j + 1] + weight(a[i])) { keep.add(a[i]); i++; j++; } else if (table[i + 1][j] >= table[i][j + 1]) i++; else j++;
  }
  return keep;
}

/**
 * A tab moved inside its block: right after the nearest tab of the block to its left that stayed,
 * else right before the nearest one to its right, so it lands beside its group whatever the other
 * moves around the block did so far.
 */
function inBlock(n, i, stayed) {
  for (let j = i - 1; j >= 0; j--) if (stayed(n[j])) return { id: n[i], left: n[j] };
  for (let j = i + 1; j < n.length; j++) if (stayed(n[j])) return { id: n[i], before: n[j] };
  return { id: n[i], left: null };
}

/**
 * Rule "a local move is a move, and a group moves whole": the moves that take the workspace from
 * `before` to `now` (workspace ids; `groupOf(id)` the group last synced, "" none), as
 * { moves: [{ id, left } | { id, before }] in the order to send (each placed right after `left`,
 * null: first, or right before `before`, as the workspace is once the earlier moves applied), regroup: [{ groupId, tabIds }] to send after
 * them }. A group that stayed one block moves as one (a weight of its size plus one in the common
 * subsequence, as moving it costs one op more): its tabs are sent last to first, each right after
 * the tab left of the block, so all but the first lose the group by the placement rule (none of
 * their new neighbours holds it) and the first keeps it (its only tab); the `regroup` then puts
 * the others back after it, in order. Tabs reordered inside a block that stayed are moved alone:
 * they land beside a tab of their group and keep it.
 */
export function planMoves(before, now, groupOf = () => "") {
  const common = new Set(before.filter((id) => now.includes(id)));
  const b = before.filter((id) => common.has(id));
  const n = now.filter((id) => common.has(id));
  const blocks = blocksOf(b, n, groupOf);
  const size = new Map();
  for (const g of blocks.values()) size.set(`\0${g}`, (size.get(`\0${g}`) ?? 0) + 1);
  const keep = heaviestCommon(tokens(b, blocks), tokens(n, blocks), (t) => (size.has(t) ? size.get(t) + 1 : 1));
  const settled = new Set();
  for (const g of new Set(blocks.values())) {
    if (!keep.has(`\0${g}`)) continue;
    const bi = b.filter((id) => blocks.get(id) === g);
    const ni = n.filter((id) => blocks.get(id) === g);
    const inside = lcsSet(bi, ni);
    for (const id of ni) if (inside.has(id)) settled.add(id);
  }
  for (const id of n) if (!blocks.has(id) && keep.has(id)) settled.add(id);
  const leftOf = (i) => { for (let j = i - 1; j >= 0; j--) if (settled.has(n[j])) return n[j]; return null; };
  const moves = [];
  const regroup = [];
  for (let i = 0; i < n.length; i++) {
    const id = n[i];
    if (settled.has(id)) continue;
    const g = blocks.get(id);
    if (g && !keep.has(`\0${g}`)) {
      const members = n.filter((x) => blocks.get(x) === g);
      const left = leftOf(i);
      for (const x of [...members].reverse()) moves.push({ id: x, left });
      for (const x of members) settled.add(x);
      if (members.length > 1) regroup.push({ groupId: g, tabIds: members.slice(1) });
      continue;
    }
    moves.push(g ? inBlock(n, i, (x) => settled.has(x) && blocks.get(x) === g) : { id, left: leftOf(i) });
    settled.add(id);
  }
  return { moves, regroup };
}
