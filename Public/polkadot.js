// A polkadot-js extension backed by Keyfob: registers window.injectedWeb3["keyfob"] with the
// enable(originName) → {accounts, signer, metadata} interface of @polkadot/extension-inject.
// Each call that needs the user opens a Keyfob window: connecting asks once which site may see
// your addresses; every signature is confirmed there with your passkey. Your page's origin is the
// one the browser reports to that window, never one this script states.
// Include it from your Keyfob server: <script src="https://keyfob.example/polkadot.js"></script>
"use strict";
(() => {
  const keyfob = new URL(document.currentScript.src).origin;
  let counter = 0;
  let accounts = [];
  const listeners = new Set();
  const provided = new Map();  // genesisHash → MetadataDef this page offered

  function failure(message, code) {
    const error = new Error(message);
    error.code = code;
    return error;
  }

  /** Opens Keyfob's window, hands it {msgType, request} once it is ready, and resolves with its answer. */
  function ask(msgType, request, extra = {}) {
    const rid = `${Date.now().toString(36)}${++counter}`;
    return new Promise((resolve, reject) => {
      const popup = window.open(`${keyfob}/polkadot-connect.html?rid=${rid}`, `keyfob-polkadot-${rid}`, "popup,width=440,height=760");
      if (!popup) { reject(failure("the browser blocked Keyfob's window; allow pop-ups for this site", "popup_blocked")); return; }
      // Keyfob's window posts its answer and closes itself: a message already on its way still wins
      // for a moment after the window is seen closed, so an approval is never read as a rejection.
      let grace = null;
      const timer = setInterval(() => {
        if (!popup.closed || grace) return;
        grace = setTimeout(() => { finish(); reject(failure("Rejected", "user_rejected")); }, 1000);
      }, 500);
      function finish() { clearInterval(timer); clearTimeout(grace); window.removeEventListener("message", onMessage); }
      function onMessage(event) {
        if (event.origin !== keyfob || event.source !== popup || !event.data || event.data.rid !== rid) return;
        if (event.data.type === "keyfob-polkadot-ready") {
          popup.postMessage({ type: "keyfob-polkadot-request", rid, msgType, request, ...extra }, keyfob);
          return;
        }
        if (event.data.type !== "keyfob-polkadot-reply") return;
        finish();
        const outcome = event.data.outcome || {};
        if (outcome.error) reject(failure(outcome.error, outcome.code)); else resolve(outcome);
      }
      window.addEventListener("message", onMessage);
    });
  }

  function setAccounts(list) {
    accounts = Array.isArray(list) ? list : [];
    for (const listener of listeners) { try { listener(accounts); } catch { /* the page's own error */ } }
  }

  let connecting = null;
  async function enable(originName) {
    connecting ??= ask("pub(authorize.tab)", { origin: String(originName || "") })
      .then((outcome) => { setAccounts(outcome.accounts); })
      .finally(() => { connecting = null; });
    await connecting;
    return {
      accounts: {
        get: async () => accounts,
        subscribe(callback) {
          listeners.add(callback);
          callback(accounts);
          return () => listeners.delete(callback);
        },
      },
      signer: {
        // When Keyfob set the metadata check itself (the payload came with mode 0), the result
        // carries `signedTransaction`: submit that (polkadot-js api: sign with
        // `withSignedTransaction: true`), since the payload as sent is not what was signed.
        async signPayload(payload) {
          const outcome = await ask("pub(extrinsic.sign)", payload, { metadata: provided.get(payload.genesisHash) || null });
          return outcome.result;
        },
        async signRaw(raw) {
          return (await ask("pub(bytes.sign)", raw)).result;
        },
      },
      metadata: {
        get: async () => [...provided.values()].map((def) => ({ genesisHash: def.genesisHash, specVersion: def.specVersion })),
        // Kept in this page and sent along with the next signature on that chain. A MetadataDef
        // with `rawMetadata` (the runtime's V15 metadata, 0x-hex) lets Keyfob check a payload's
        // CheckMetadataHash itself (RFC-0078): docs/api.md, "A checked transaction".
        async provide(def) {
          if (!def || typeof def.genesisHash !== "string") return false;
          provided.set(def.genesisHash, def);
          return true;
        },
      },
    };
  }

  window.injectedWeb3 = window.injectedWeb3 || {};
  window.injectedWeb3.keyfob = { version: "1.0.0", enable };
})();
