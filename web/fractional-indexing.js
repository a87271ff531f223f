// Position keys in the format of Rocicorp's fractional-indexing (base 62, compared bytewise),
// the algorithm of its generateKeyBetween, as the server's core (PositionKey.swift) implements it.
// Checked against the same vectors as core's tests (Tests/web/fractional-indexing.test.mjs).

export const BASE_62_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const SMALLEST_INTEGER = "A" + "0".repeat(26);

/** A key strictly between two fraction parts `a` < `b` (`b` null: no upper bound). */
function midpoint(a, b, digits) {
  const zero = digits[0];
  if (b !== null && a >= b) throw new Error(`${a} >= ${b}`);
  if (a.slice(-1) === zero || (b && b.slice(-1) === zero)) throw new Error("trailing zero");
  if (b) {
    let n = 0;
    while ((a[n] || zero) === b[n]) n++;
    if (n > 0) return b.slice(0, n) + midpoint(a.slice(n), b.slice(n), digits);
  }
  const digitA = a ? digits.indexOf(a[0]) : 0;
  const digitB = b !== null ? digits.indexOf(b[0]) : digits.length;
  if (digitB - digitA > 1) return digits[Math.round(0.5 * (digitA + digitB))];
  if (b && b.length > 1) return b.slice(0, 1);
  return digits[digitA] + midpoint(a.slice(1), null, digits);
}

function integerLength(head) {
  if (head >= "a" && head <= "z") return head.charCodeAt(0) - 97 + 2;
  if (head >= "A" && head <= "Z") return 90 - head.charCodeAt(0) + 2;
  throw new Error(`invalid order key head: ${head}`);
}

function integerPart(key) {
  const length = integerLength(key[0]);
  if (length > key.length) throw new Error(`invalid order key: ${key}`);
  return key.slice(0, length);
}

function validateOrderKey(key, digits) {
  if (key === SMALLEST_INTEGER) throw new Error(`invalid order key: ${key}`);
  const integer = integerPart(key);
  for (const c of key) if (!digits.includes(c)) throw new Error(`invalid order key: ${key}`);
  if (key.slice(integer.length).slice(-1) === digits[0]) throw new Error(`invalid order key: ${key}`);
}

/** True when `key` is a valid position key. */
export function isValidKey(key, digits = BASE_62_DIGITS) {
  if (typeof key !== "string" || key.length === 0) return false;
  try { validateOrderKey(key, digits); return true; } catch { return false; }
}

function incrementInteger(x, digits) {
  const [head, ...digs] = x.split("");
  let carry = true;
  for (let i = digs.length - 1; carry && i >= 0; i--) {
    const d = digits.indexOf(digs[i]) + 1;
    if (d === digits.length) digs[i] = digits[0];
    else { digs[i] = digits[d]; carry = false; }
  }
  if (!carry) return head + digs.join("");
  if (head === "Z") return "a" + digits[0];
  if (head === "z") return null;
  const h = String.fromCharCode(head.charCodeAt(0) + 1);
  if (h > "a") digs.push(digits[0]); else digs.pop();
  return h + digs.join("");
}

function decrementInteger(x, digits) {
  const [head, ...digs] = x.split("");
  let borrow = true;
  for (let i = digs.length - 1; borrow && i >= 0; i--) {
    const d = digits.indexOf(digs[i]) - 1;
    if (d === -1) digs[i] = digits.slice(-1);
    else { digs[i] = digits[d]; borrow = false; }
  }
  if (!borrow) return head + digs.join("");
  if (head === "a") return "Z" + digits.slice(-1);
  if (head === "A") return null;
  const h = String.fromCharCode(head.charCodeAt(0) - 1);
  if (h < "Z") digs.push(digits.slice(-1)); else digs.pop();
  return h + digs.join("");
}

/**
 * A key strictly between `a` and `b` (null or undefined: an open end). Throws when a key is
 * invalid or `a` >= `b`. generateKeyBetween(null, null) is "a0".
 */
export function generateKeyBetween(a, b, digits = BASE_62_DIGITS) {
  a = a ?? null;
  b = b ?? null;
  if (a !== null) validateOrderKey(a, digits);
  if (b !== null) validateOrderKey(b, digits);
  if (a !== null && b !== null && a >= b) throw new Error(`${a} >= ${b}`);
  if (a === null) {
    if (b === null) return "a" + digits[0];
    const ib = integerPart(b);
    const fb = b.slice(ib.length);
    if (ib === SMALLEST_INTEGER) return ib + midpoint("", fb, digits);
    if (ib < b) return ib;
    const res = decrementInteger(ib, digits);
    if (res === null) throw new Error("cannot decrement any more");
    return res;
  }
  if (b === null) {
    const ia = integerPart(a);
    const fa = a.slice(ia.length);
    const i = incrementInteger(ia, digits);
    return i === null ? ia + midpoint(fa, null, digits) : i;
  }
  const ia = integerPart(a);
  const fa = a.slice(ia.length);
  const ib = integerPart(b);
  const fb = b.slice(ib.length);
  if (ia === ib) return ia + midpoint(fa, fb, digits);
  const i = incrementInteger(ia, digits);
  if (i === null) throw new Error("cannot increment any more");
  if (i < b) return i;
  return ia + midpoint(fa, null, digits);
}
