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

function send(msgType, request) {
  return api("/api/polkadot/message", { method: "POST", body: { id: rid, msgType, origin: "dapp-request", request, url: origin } });
}

async function handle() {
  const who = await sessionOrSignIn(() => { $("title").textContent = "Sign in to continue"; });
  $("account-name").textContent = who.username || "";
  const host = new URL(origin).host;
  if (asked.msgType === "pub(authorize.tab)") {
    const named = document.createElement("span");
    setBreakable(named, host);
    $("title").replaceChildren("Connect ", named, " to your Polkadot accounts?");
    $("who").textContent = asked.request && asked.request.origin
      ? `${origin} (it calls itself “${String(asked.request.origin).slice(0, 64)}”)` : origin;
    const { accounts, chosen } = await polkadotAccountChoice();
    $("authorize-card").hidden = false;
    $("allow").addEventListener("click", async () => {
      try {
        $("allow").disabled = true;
        // The site's own name for itself, and the accounts ticked here: nothing else of what it sent.
        const name = asked.request && typeof asked.request.origin === "string" ? asked.request.origin.slice(0, 128) : "";
        await send("pub(authorize.tab)", accounts.length ? { origin: name, accounts: chosen() } : { origin: name });
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
    // Refused before anything was shown (an unchecked transaction, an unknown extension…): the
    // person reads what happened in plain words, the site gets the developer's reason.
    refused(host, error.code);
    if (window.opener && origin) {
      window.opener.postMessage({ type: "keyfob-polkadot-reply", rid, outcome: { type: asked.msgType, error: error.message, code: error.code } }, origin);
    }
  }
}

/** A request Keyfob refused before showing it, in plain words: nothing was signed, why, what to do. */
function refused(host, code) {
  $("title").textContent = "Nothing was signed";
  $("who").textContent = `${host} asked for a Polkadot signature, and Keyfob refused it before showing it to you.`;
  const unchecked = code === "unverified_transaction";
  $("refused-why").textContent = unchecked
    ? "Keyfob could not check this transaction against the chain's own description of it (its metadata), so it cannot show you truthfully what it does — who gets what, on which chain. Your accounts sign only transactions Keyfob checked."
    : "It is not a request Keyfob can show you truthfully (for example, a transaction for a chain Keyfob cannot read, or for an account you did not share with this site).";
  $("refused-next").textContent = unchecked
    ? "The site can make its transactions checkable (it must send its runtime's metadata and use CheckMetadataHash). If you trust the site and check each transaction there, you can allow unchecked transactions for one account in your settings."
    : "The site was told why. You need not do anything.";
  $("refused-setting").hidden = !unchecked;
  $("refused-card").hidden = false;
}

$("refused-close").addEventListener("click", () => window.close());

/** The messages a page may send through this window; anything else (another type, or not a plain
 *  string) is refused here, so only the connect card ever connects a site. */
const SIGNING = ["pub(extrinsic.sign)", "pub(bytes.sign)"];

window.addEventListener("message", (event) => {
  if (asked || event.source !== window.opener || !event.data || event.data.type !== "keyfob-polkadot-request" || event.data.rid !== rid) return;
  const type = event.data.msgType;
  if (typeof type !== "string" || (type !== "pub(authorize.tab)" && !SIGNING.includes(type))) {
    window.opener.postMessage({ type: "keyfob-polkadot-reply", rid, outcome: { error: "this window answers connecting and signing only", code: "unsupported_type" } }, event.origin);
    return;
  }
  origin = event.origin;
  asked = event.data;
  handle().catch(showError);
});

const refusal = new URLSearchParams(location.search).get("refused");
if (refusal) {
  // The browser extension opens this window for a refusal, naming the site its browser reported.
  let host = "A site";
  try { host = new URL(new URLSearchParams(location.search).get("site") || "").host || host; } catch { /* not a URL */ }
  refused(host, refusal);
} else if (window.opener) {
  // Only a rid in this message: the page learns nothing, and answers to this window alone.
  window.opener.postMessage({ type: "keyfob-polkadot-ready", rid }, "*");
} else {
  $("title").textContent = "Nothing to do here";
  $("who").textContent = "This window is opened by a site's “Connect Keyfob”. You can close it.";
}
