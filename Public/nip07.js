// window.nostr (NIP-07) backed by Keyfob: each call opens a Keyfob popup where the user approves
// it with a passkey; the result comes back from Keyfob's /callback.html by postMessage.
// getPublicKey asks once per site: web clients call it on every page load, and the public key is
// public, so it is remembered in this site's localStorage (and refreshed by every signed event).
// Include it from your Keyfob server: <script src="https://keyfob.example/nip07.js"></script>
"use strict";
(() => {
  const keyfob = new URL(document.currentScript.src).origin;
  let counter = 0;

  function b64url(text) {
    const bytes = new TextEncoder().encode(text);
    let binary = "";
    for (const b of bytes) binary += String.fromCharCode(b);
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function failure(code, message) {
    const error = new Error(message || code);
    error.code = code;
    return error;
  }

  /** Opens `path?query` in a popup and resolves with the callback's parameters. */
  function ask(path, query, rid) {
    return new Promise((resolve, reject) => {
      const popup = window.open(`${keyfob}${path}?${new URLSearchParams(query)}`, `keyfob-${rid}`, "popup,width=440,height=760");
      if (!popup) { reject(failure("popup_blocked", "the browser blocked Keyfob's window; allow pop-ups for this site")); return; }
      // The callback posts its answer and closes itself: a message already on its way still wins
      // for a moment after the window is seen closed, so an approval is never read as a rejection.
      let grace = null;
      const timer = setInterval(() => {
        if (!popup.closed || grace) return;
        grace = setTimeout(() => { finish(); reject(failure("user_rejected", "the Keyfob window was closed")); }, 1000);
      }, 500);
      function finish() { clearInterval(timer); clearTimeout(grace); window.removeEventListener("message", onMessage); }
      function onMessage(event) {
        if (event.origin !== keyfob || !event.data || event.data.type !== "keyfob-nip07" || event.data.params.rid !== rid) return;
        finish();
        resolve(event.data.params);
      }
      window.addEventListener("message", onMessage);
    });
  }

  function callback(rid, extra = "") {
    return `${keyfob}/callback.html?origin=${encodeURIComponent(location.origin)}&rid=${rid}${extra}`;
  }

  async function keyfobLink(action, query) {
    const rid = `${Date.now().toString(36)}${++counter}`;
    const params = await ask(`/app/${action}`, { ...query, cb: callback(rid), origin: location.origin }, rid);
    if (params.ok !== "1") throw failure(params.code || "user_rejected", params.msg);
    return params;
  }

  async function nip155(type, payloadName, payload, pubkey) {
    const rid = `${Date.now().toString(36)}${++counter}`;
    const params = await ask("/nostrsigner", {
      type, [payloadName]: payload, pubkey, id: rid, client_url: location.origin,
      "x-success": callback(rid), "x-error": callback(rid, "&failed=1"), "x-cancel": callback(rid, "&cancelled=1"),
    }, rid);
    if (params.cancelled) throw failure("user_rejected", "the request was rejected");
    if (params.failed) throw failure(params.code || "internal_error", params.reason);
    return params.result;
  }

  const remembered = `keyfob-nip07-pubkey:${keyfob}`;
  function remember(pubkey) {
    try { if (/^[0-9a-f]{64}$/.test(pubkey)) localStorage.setItem(remembered, pubkey); } catch { /* storage off: ask again next time */ }
  }
  function recall() {
    try { return localStorage.getItem(remembered); } catch { return null; }
  }
  let asking = null;  // calls made while the popup is open share it

  window.nostr = {
    async getPublicKey() {
      const known = recall();
      if (known) return known;
      asking ??= keyfobLink("pubkey", {}).then((p) => { remember(p.pubkey); return p.pubkey; }).finally(() => { asking = null; });
      return asking;
    },
    async signEvent(event) {
      const unsigned = {
        kind: event.kind, content: event.content ?? "", tags: event.tags ?? [],
        created_at: event.created_at ?? Math.floor(Date.now() / 1000),
      };
      const params = await keyfobLink("sign", { payload: b64url(JSON.stringify(unsigned)) });
      remember(params.pubkey);
      return { ...unsigned, id: params.id, pubkey: params.pubkey, sig: params.sig };
    },
    nip04: {
      encrypt: (pubkey, plaintext) => nip155("nip04_encrypt", "plaintext", plaintext, pubkey),
      decrypt: (pubkey, ciphertext) => nip155("nip04_decrypt", "encryptedText", ciphertext, pubkey),
    },
    nip44: {
      encrypt: (pubkey, plaintext) => nip155("nip44_encrypt", "plaintext", plaintext, pubkey),
      decrypt: (pubkey, ciphertext) => nip155("nip44_decrypt", "encryptedText", ciphertext, pubkey),
    },
  };
})();
