// The bridge between a page and Keyfob's extension: the page's requests go to the service worker
// (which the browser tells the page's origin), its answers come back. On the Keyfob server's own
// pages it only says which extension this is, so /extension.html can hand it a session directly
// (chrome.runtime.sendMessage to this id): no token ever passes through a page's messages.
"use strict";
if (location.origin === new URL(KEYFOB_DEFAULT_SERVER).origin) {
  const mark = () => document.documentElement && (document.documentElement.dataset.keyfobExtension = chrome.runtime.id);
  if (!mark()) document.addEventListener("readystatechange", mark, { once: true });
}
window.addEventListener("message", async (event) => {
  const data = event.data;
  if (event.source !== window || !data) return;
  if (data.keyfobExtension !== "request" || typeof data.id !== "string") return;
  let answer;
  try {
    answer = await chrome.runtime.sendMessage({ kind: data.kind, method: data.method, params: data.params });
  } catch (error) {
    answer = { error: { code: "unavailable", message: "Keyfob's extension did not answer; reload the page" } };
  }
  window.postMessage({ keyfobExtension: "reply", id: data.id, ...(answer || {}) }, window.location.origin);
});
