// Runs in every page's own world: window.nostr (NIP-07) and window.injectedWeb3.keyfob (the
// polkadot-js extension interface). It holds nothing: each call goes, as a message, to Keyfob's
// extension, which learns the page's origin from the browser (never from this script or the page)
// and asks your Keyfob server; signatures are approved in a Keyfob window with your passkey.
"use strict";
(() => {
  if (window.injectedWeb3 && window.injectedWeb3.keyfob) return;
  let counter = 0;
  const waiting = new Map();

  window.addEventListener("message", (event) => {
    const data = event.data;
    if (event.source !== window || !data || data.keyfobExtension !== "reply" || !waiting.has(data.id)) return;
    const { resolve, reject } = waiting.get(data.id);
    waiting.delete(data.id);
    if (data.error) {
      const error = new Error(data.error.message || data.error.code);
      error.code = data.error.code;
      reject(error);
    } else {
      resolve(data.result);
    }
  });

  /** One call to the extension: {kind, method, params} out, its result or error back. */
  function call(kind, method, params) {
    const id = `${Date.now().toString(36)}-${++counter}`;
    return new Promise((resolve, reject) => {
      waiting.set(id, { resolve, reject });
      window.postMessage({ keyfobExtension: "request", id, kind, method, params }, window.location.origin);
    });
  }

  const nostr = (method, ...params) => call("nostr", method, params);
  window.nostr = {
    getPublicKey: () => nostr("getPublicKey"),
    signEvent: (event) => nostr("signEvent", event),
    getRelays: () => nostr("getRelays"),
    nip04: {
      encrypt: (pubkey, plaintext) => nostr("nip04.encrypt", pubkey, plaintext),
      decrypt: (pubkey, ciphertext) => nostr("nip04.decrypt", pubkey, ciphertext),
    },
    nip44: {
      encrypt: (pubkey, plaintext) => nostr("nip44.encrypt", pubkey, plaintext),
      decrypt: (pubkey, ciphertext) => nostr("nip44.decrypt", pubkey, ciphertext),
    },
  };

  const polkadot = (method, params) => call("polkadot", method, params);
  async function enable(originName) {
    let accounts = await polkadot("enable", { originName: String(originName || "") });
    const listeners = new Set();
    return {
      accounts: {
        get: async () => (accounts = await polkadot("accounts", {})),
        subscribe(callback) {
          listeners.add(callback);
          callback(accounts);
          return () => listeners.delete(callback);
        },
      },
      signer: {
        signPayload: (payload) => polkadot("signPayload", payload),
        signRaw: (raw) => polkadot("signRaw", raw),
      },
      metadata: {
        get: () => polkadot("metadataList", {}),
        provide: (def) => polkadot("metadataProvide", def),
      },
    };
  }
  window.injectedWeb3 = window.injectedWeb3 || {};
  window.injectedWeb3.keyfob = { version: "1.0.0", enable };
})();
