// Bindings storage: what survives what (see background.js), every read-modify-write serialized.

import { api as chrome } from "./browser-api.js";

/** `n` random characters of a-z0-9. */
export function randomTag(n = 8) {
  const bytes = new Uint8Array(n);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => "abcdefghijklmnopqrstuvwxyz0123456789"[b % 36]).join("");
}

let storageChain = Promise.resolve();
/** Runs `fn` after every storage write queued before it: read-modify-writes never interleave. */
function serialized(fn) {
  const run = storageChain.then(fn, fn);
  storageChain = run.catch(() => {});
  return run;
}

export async function loadBindings() {
  const local = (await chrome.storage.local.get("bindings")).bindings ?? {};
  const priv = (await chrome.storage.session.get("privateBindings")).privateBindings ?? {};
  const tokens = await chrome.storage.session.get(null);
  const all = { ...local, ...priv };
  for (const b of Object.values(all)) if (!b.token) b.token = tokens[`token:${b.id}`] ?? "";
  return all;
}

export function saveBinding(binding) {
  return serialized(async () => {
    if (binding.incognito) {
      const priv = (await chrome.storage.session.get("privateBindings")).privateBindings ?? {};
      priv[binding.id] = binding;
      await chrome.storage.session.set({ privateBindings: priv });
      return;
    }
    const bindings = (await chrome.storage.local.get("bindings")).bindings ?? {};
    bindings[binding.id] = binding.remember ? binding : { ...binding, token: "" };
    await chrome.storage.local.set({ bindings });
    if (!binding.remember && binding.token) await chrome.storage.session.set({ [`token:${binding.id}`]: binding.token });
  });
}

export function deleteBinding(id) {
  return serialized(async () => {
    const bindings = (await chrome.storage.local.get("bindings")).bindings ?? {};
    delete bindings[id];
    await chrome.storage.local.set({ bindings });
    const priv = (await chrome.storage.session.get("privateBindings")).privateBindings ?? {};
    delete priv[id];
    await chrome.storage.session.set({ privateBindings: priv });
    await chrome.storage.local.remove([`resume:${id}`]);
    await chrome.storage.session.remove([`resume:${id}`, `status:${id}`, `token:${id}`]);
  });
}

export function resumeArea(binding) {
  return binding.incognito ? chrome.storage.session : chrome.storage.local;
}

/** This browser session's nonce (part of workspace tab ids made from Chrome tab ids). */
export async function sessionNonce() {
  const { nonce } = await chrome.storage.session.get("nonce");
  if (nonce) return nonce;
  const fresh = randomTag(4);
  await chrome.storage.session.set({ nonce: fresh });
  return fresh;
}

