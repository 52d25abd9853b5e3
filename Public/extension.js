// Gives the Keyfob browser extension a session of this account, after a passkey confirmation
// (extension.connect). The token goes to the extension's content script on this page only (a
// message to this page's own origin); the extension accepts it only from this server's origin.
"use strict";
const $ = (id) => document.getElementById(id);

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

function handOver(reply) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => { window.removeEventListener("message", onMessage); resolve(null); }, 3000);
    function onMessage(event) {
      if (event.source !== window || !event.data || event.data.type !== "keyfob-extension-connected") return;
      clearTimeout(timer);
      window.removeEventListener("message", onMessage);
      resolve(event.data);
    }
    window.addEventListener("message", onMessage);
    window.postMessage({ type: "keyfob-extension-session", token: reply.token }, location.origin);
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
