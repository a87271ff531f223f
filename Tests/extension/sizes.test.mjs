// node --test: the extension's size limits (issue 39): background.js at most 300 lines, every
// other extension file at most 400, every function at most 80. A function is counted from the
// line that opens it (a `function`, a method, or an arrow function whose body opens a block) to
// the line that closes it at the same indentation (the code's formatting, which this relies on).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";

const DIR = new URL("../../extension/", import.meta.url);
const files = readdirSync(DIR).filter((n) => n.endsWith(".js"));
const OPENS = /^(\s*)(?:export\s+)?(?:(?:async\s+)?function\b|(?:static\s+|async\s+|get\s+|set\s+)*[A-Za-z_$][\w$]*\s*\([^)]*\)\s*\{$|.*=>\s*\{$)/;

/** [{ name, line, length }] of every function of `text`, by the rule above. */
export function functions(text) {
  const lines = text.split("\n");
  const out = [];
  for (let i = 0; i < lines.length; i++) {
    const m = OPENS.exec(lines[i]);
    if (!m || !lines[i].trimEnd().endsWith("{") || /^\s*(if|for|while|switch|catch|else)\b/.test(lines[i])) continue;
    const indent = m[1];
    let j = i + 1;
    while (j < lines.length && !lines[j].startsWith(`${indent}}`)) j++;
    out.push({ name: lines[i].trim().slice(0, 60), line: i + 1, length: j - i + 1 });
  }
  return out;
}

test("the counter sees a long function", () => {
  const body = Array.from({ length: 90 }, () => "  x();").join("\n");
  assert.deepEqual(functions(`function f() {\n${body}\n}\n`).map((f) => f.length), [92]);
  assert.deepEqual(functions(`class A {\n  m(a) {\n    y();\n  }\n}\n`).map((f) => f.length), [3]);
});

test("background.js keeps listeners and boot: at most 300 lines", () => {
  const n = readFileSync(new URL("background.js", DIR), "utf8").split("\n").length - 1;
  assert.ok(n <= 300, `background.js has ${n} lines`);
});

test("no extension file over 400 lines, no function over 80", () => {
  const over = [];
  for (const name of files) {
    const text = readFileSync(new URL(name, DIR), "utf8");
    const n = text.split("\n").length - 1;
    if (n > 400) over.push(`${name}: ${n} lines`);
    for (const f of functions(text)) if (f.length > 80) over.push(`${name}:${f.line} ${f.name}: ${f.length} lines`);
  }
  assert.deepEqual(over, []);
});
