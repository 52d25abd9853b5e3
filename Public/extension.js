// Gives the Keyfob browser extension a session of this account, after a passkey confirmation
// (extension.connect). The token goes straight to the extension (chrome.runtime.sendMessage to the
// id its content script marks this page with), which the browser allows from this server's pages
// only: never through window.postMessage, which other scripts on the page could read.
"use strict";
const $ = (id) => document.getElementById(id);

// Opened by the extension for a site's call while it was not connected: say which, and that the
// call goes on once connected (the site's address as the browser reported it to the extension).
const askedBy = new URLSearchParams(location.search).get("for");
if (askedBy && /^https?:\/\/[^\s]+$/.test(askedBy)) {
  $("asked-by").textContent = `${askedBy.slice(0, 200)} asked Keyfob through the extension, which is not connected. Sign in and connect it, and that request goes on; close this window to refuse it.`;
  $("asked-by").hidden = false;
}

async function load() {
  const session = await api("/session").catch(() => null);
  if (!session) {
    $("signin-card").hidden = false;
    $("connect-card").hidden = true;
    return;
  }
  $("account-name").textContent = $("username").textContent = session.username;
  $("signin-card").hidden = true;
  $("connect-card").hidden = false;
}

/** The extension's answer, or null when no Keyfob extension is here to take the session. */
function handOver(reply) {
  const id = document.documentElement.dataset.keyfobExtension || "";
  const runtime = window.chrome && window.chrome.runtime;
  if (!/^[a-p]{32}$/.test(id) || !runtime || typeof runtime.sendMessage !== "function") return Promise.resolve(null);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(null), 3000);
    try {
      runtime.sendMessage(id, { kind: "session", token: reply.token }, (answer) => {
        clearTimeout(timer);
        resolve(runtime.lastError ? null : answer || null);
      });
    } catch {
      clearTimeout(timer);
      resolve(null);
    }
  });
}

$("connect").addEventListener("click", async () => {
  const button = $("connect");
  button.disabled = true;
  try {
    const confirmation = await confirmAction("extension.connect");
    const reply = await api("/api/extension/session", { method: "POST", body: { confirmation } });
    const answer = await handOver(reply);
    if (!answer) {
      // No extension took it: end the session at once rather than leave it unused.
      await fetch("/logout", { method: "POST", headers: { Authorization: `Bearer ${reply.token}` }, credentials: "omit" }).catch(() => {});
      showStatus("error", "The Keyfob extension is not installed in this browser (or is off). Install it, then open its popup and press Sign in.");
    } else if (!answer.ok) {
      showStatus("error", `The extension refused the session: ${answer.error ? answer.error.message : "unknown reason"}.`);
    } else {
      showStatus("ok", `Connected: the extension signs as ${reply.username}, each request approved by you in a Keyfob window. You can close this tab.`);
      $("connect-card").hidden = true;
    }
  } catch (error) {
    showError(error);
  } finally {
    button.disabled = false;
  }
});

$("signin").addEventListener("click", async () => {
  try { await signInWithPasskey(); await load(); } catch (error) { showError(error); }
});

load();
