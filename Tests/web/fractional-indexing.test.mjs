// node --test Tests/web/: web/fractional-indexing.js gives what core's PositionKey gives, on the
// vectors of Tests/TabsyncCoreTests/PositionKeyCompatibilityTests.swift (read from that file, so
// the two suites cannot drift apart), plus a seeded property check.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { generateKeyBetween, isValidKey } from "../../web/fractional-indexing.js";

const swift = readFileSync(
  new URL("../TabsyncCoreTests/PositionKeyCompatibilityTests.swift", import.meta.url), "utf8");
const arg = (s) => (s === "nil" ? null : JSON.parse(s));
const vectors = [...swift.matchAll(
  /Vector\(a: (nil|"[^"]*"), b: (nil|"[^"]*"), expected: ("[^"]*")\)/g)]
  .map((m) => ({ a: arg(m[1]), b: arg(m[2]), expected: JSON.parse(m[3]) }));
const invalidLine = swift.match(/@Test\(arguments: (\[[^\]]*\])\)\s*func keysThatFractionalIndexingRefusesAreInvalid/);

test("the vectors are read from core's tests", () => {
  assert.ok(vectors.length >= 20, `only ${vectors.length} vectors found`);
  assert.ok(invalidLine, "the invalid-key list was not found");
});

for (const v of vectors) {
  test(`between(${v.a}, ${v.b}) = ${v.expected}`, () => {
    assert.equal(generateKeyBetween(v.a, v.b), v.expected);
  });
}

test("keys core refuses are invalid here too", () => {
  for (const key of JSON.parse(invalidLine[1])) {
    assert.equal(isValidKey(key), false, key);
    assert.throws(() => generateKeyBetween(key, null));
  }
});

test("appending 63 times gives a0 … az, b00 (generateNKeysBetween)", () => {
  const keys = [];
  let last = null;
  for (let i = 0; i < 63; i++) keys.push(last = generateKeyBetween(last, null));
  assert.deepEqual(keys.slice(0, 3), ["a0", "a1", "a2"]);
  assert.equal(keys[61], "az");
  assert.equal(keys[62], "b00");
});

test("a key between two keys sorts strictly between them (seeded random drops)", () => {
  let seed = 42;
  const random = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  const keys = [generateKeyBetween(null, null)];
  for (let i = 0; i < 2000; i++) {
    const at = random(keys.length + 1);
    const key = generateKeyBetween(keys[at - 1] ?? null, keys[at] ?? null);
    assert.ok(isValidKey(key), key);
    if (at > 0) assert.ok(keys[at - 1] < key, `${keys[at - 1]} < ${key}`);
    if (at < keys.length) assert.ok(key < keys[at], `${key} < ${keys[at]}`);
    keys.splice(at, 0, key);
  }
});

test("a >= b is refused", () => {
  assert.throws(() => generateKeyBetween("a1", "a0"));
  assert.throws(() => generateKeyBetween("a1", "a1"));
});
