// The bridge between a page and Keyfob's extension: the page's requests go to the service worker
// (which the browser tells the page's origin), its answers come back. On Keyfob's own
// /extension.html, the page hands the extension its session (the service worker accepts it only
// from the Keyfob server's origin).
"use strict";
window.addEventListener("message", async (event) => {
  const data = event.data;
  if (event.source !== window || !data) return;
  if (data.type === "keyfob-extension-session" && typeof data.token === "string") {
    const answer = await chrome.runtime.sendMessage({ kind: "session", token: data.token });
    window.postMessage({ type: "keyfob-extension-connected", ok: Boolean(answer && answer.ok), error: answer && answer.error }, window.location.origin);
    return;
  }
  if (data.keyfobExtension !== "request" || typeof data.id !== "string") return;
  let answer;
  try {
    answer = await chrome.runtime.sendMessage({ kind: data.kind, method: data.method, params: data.params });
  } catch (error) {
    answer = { error: { code: "unavailable", message: "Keyfob's extension did not answer; reload the page" } };
  }
  window.postMessage({ keyfobExtension: "reply", id: data.id, ...(answer || {}) }, window.location.origin);
});
