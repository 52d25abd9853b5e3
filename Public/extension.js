// Gives the Keyfob browser extension a session of this account, after a passkey confirmation
// (extension.connect). The token never passes through this page: the extension keeps it and puts
// only its SHA-256 here (data-keyfob-claim); Keyfob stores the session under that hash, and the
// page then tells the extension (an event its content script hears) that it may use its token.
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

/** The extension's claim on this page: the SHA-256 of a token only the extension keeps, put here
 *  by its content script. Waits a moment for it; "" when no Keyfob extension is here. */
async function extensionClaim() {
  for (let waited = 0; waited < 1500; waited += 100) {
    const claim = document.documentElement.dataset.keyfobClaim || "";
    if (/^[A-Za-z0-9_-]{43}$/.test(claim)) return claim;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return "";
}

/** Tells the extension Keyfob took its claim; its answer ("ok" or "failed: …"), or null if it said
 *  nothing within 5 seconds. */
function claimed() {
  delete document.documentElement.dataset.keyfobConnected;
  window.dispatchEvent(new Event("keyfob-extension-claimed"));
  return new Promise((resolve) => {
    const started = Date.now();
    const timer = setInterval(() => {
      const answer = document.documentElement.dataset.keyfobConnected;
      if (answer || Date.now() - started > 5000) { clearInterval(timer); resolve(answer || null); }
    }, 50);
  });
}

$("connect").addEventListener("click", async () => {
  const button = $("connect");
  button.disabled = true;
  try {
    const claim = await extensionClaim();
    if (!claim) {
      showStatus("error", "The Keyfob extension is not installed in this browser (or is off). Install it, then open its popup and press Sign in.");
      return;
    }
    const confirmation = await confirmAction("extension.connect");
    const reply = await api("/api/extension/session", { method: "POST", body: { confirmation, claim } });
    const answer = await claimed();
    if (answer === "ok") {
      showStatus("ok", `Connected: the extension signs as ${reply.username}, each request approved by you in a Keyfob window. You can close this tab.`);
      $("connect-card").hidden = true;
    } else {
      showStatus("error", answer ? `The extension refused the session: ${answer.slice("failed: ".length)}.` : "The extension did not answer; reload this page and try again.");
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
