// The window /polkadot.js opens. It takes one request from the page that opened it, trusting
// only the origin the browser reports for that page (event.origin), never a URL. Connecting asks
// the user here; a signature continues on the approval page, which answers the same page.
"use strict";
const $ = (id) => document.getElementById(id);
const rid = new URLSearchParams(location.search).get("rid") || "";
let origin = null;
let asked = null;

function reply(outcome) {
  if (window.opener && origin) window.opener.postMessage({ type: "keyfob-polkadot-reply", rid, outcome }, origin);
  window.close();
}

async function session() {
  const current = await api("/session").catch(() => null);
  if (current) return current;
  $("signin-card").hidden = false;
  $("title").textContent = "Sign in to continue";
  await new Promise((resolve) => {
    $("signin").addEventListener("click", async () => {
      try { await signInWithPasskey(); $("signin-card").hidden = true; resolve(); } catch (error) { showError(error); }
    }, { once: false });
  });
  return api("/session");
}

function send(msgType, request) {
  return api("/api/polkadot/message", { method: "POST", body: { id: rid, msgType, origin: "dapp-request", request, url: origin } });
}

async function handle() {
  const who = await session();
  $("account-name").textContent = who.username || "";
  const host = new URL(origin).host;
  if (asked.msgType === "pub(authorize.tab)") {
    $("title").textContent = `Connect ${host} to your Polkadot accounts?`;
    $("who").textContent = asked.request && asked.request.origin
      ? `${origin} (it calls itself “${String(asked.request.origin).slice(0, 64)}”)` : origin;
    const { accounts } = await api("/api/polkadot/accounts");
    $("no-accounts").hidden = accounts.length > 0;
    $("authorize-card").hidden = false;
    $("allow").addEventListener("click", async () => {
      try {
        $("allow").disabled = true;
        await send("pub(authorize.tab)", asked.request);
        const list = await send("pub(accounts.list)", null);
        reply({ type: asked.msgType, result: true, accounts: list.result });
      } catch (error) { $("allow").disabled = false; showError(error); }
    });
    $("deny").addEventListener("click", () => reply({ type: asked.msgType, error: "Rejected", code: "user_rejected" }));
    return;
  }
  $("title").textContent = "Preparing the request…";
  $("who").textContent = origin;
  if (asked.metadata) await send("pub(metadata.provide)", asked.metadata).catch(() => {});
  try {
    const answer = await send(asked.msgType, asked.request);
    if (answer.pending) {
      location.href = `${answer.pending.approvalUrl}&rid=${encodeURIComponent(rid)}`;
      return;
    }
    reply(answer);
  } catch (error) {
    // Refused before anything was shown (an unknown extension, an address that is not yours…):
    // the page gets the reason, the person sees it too.
    showError(error);
    if (window.opener && origin) {
      window.opener.postMessage({ type: "keyfob-polkadot-reply", rid, outcome: { type: asked.msgType, error: error.message, code: error.code } }, origin);
    }
  }
}

window.addEventListener("message", (event) => {
  if (asked || event.source !== window.opener || !event.data || event.data.type !== "keyfob-polkadot-request" || event.data.rid !== rid) return;
  origin = event.origin;
  asked = event.data;
  handle().catch(showError);
});

if (window.opener) {
  // Only a rid in this message: the page learns nothing, and answers to this window alone.
  window.opener.postMessage({ type: "keyfob-polkadot-ready", rid }, "*");
} else {
  $("title").textContent = "Nothing to do here";
  $("who").textContent = "This window is opened by a site's “Connect Keyfob”. You can close it.";
}
