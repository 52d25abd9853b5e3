// The bridge between a page and Keyfob's extension: the page's requests go to the background
// (which the browser tells the page's origin), its answers come back. On the Keyfob server's own
// pages it says which extension this is; on /extension.html it also puts the extension's claim on
// the page (the SHA-256 of a token only the extension keeps) and, when the page says Keyfob took
// it, tells the extension: no token ever passes through a page.
"use strict";
if (location.origin === new URL(KEYFOB_DEFAULT_SERVER).origin) {
  const root = () => document.documentElement;
  const mark = () => root() && (root().dataset.keyfobExtension = ext.runtime.id);
  if (!mark()) document.addEventListener("readystatechange", mark, { once: true });
  if (location.pathname === "/extension.html") {
    ext.runtime.sendMessage({ kind: "claim" }).then((answer) => {
      if (answer && typeof answer.claim === "string" && root()) root().dataset.keyfobClaim = answer.claim;
    }).catch(() => {});
    window.addEventListener("keyfob-extension-claimed", async () => {
      const claim = root().dataset.keyfobClaim;
      let answer;
      try { answer = await ext.runtime.sendMessage({ kind: "claimed", claim }); } catch { answer = null; }
      root().dataset.keyfobConnected = answer && answer.ok ? "ok" : `failed: ${(answer && answer.error && answer.error.message) || "the extension did not answer"}`;
    });
  }
}
window.addEventListener("message", async (event) => {
  const data = event.data;
  if (event.source !== window || !data) return;
  // A page asks only what sites ask: nostr and Polkadot calls (connecting is this script's alone).
  if (data.keyfobExtension !== "request" || typeof data.id !== "string" || !["nostr", "polkadot"].includes(data.kind)) return;
  let answer;
  try {
    answer = await ext.runtime.sendMessage({ kind: data.kind, method: data.method, params: data.params });
  } catch (error) {
    answer = { error: { code: "unavailable", message: "Keyfob's extension did not answer; reload the page" } };
  }
  window.postMessage({ keyfobExtension: "reply", id: data.id, ...(answer || {}) }, window.location.origin);
});
