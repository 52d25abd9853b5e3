// Approving one Polkadot signature: what is signed, by which account, for which site; the
// passkey confirms a challenge bound to the payload's hash. Opened from a site's Keyfob window
// (the answer goes back to that site's page) or from a native app's sheet (the app polls).
"use strict";
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const requestID = params.get("id") || "";
const rid = params.get("rid");
let current = null;

function item(list, label, value) {
  const li = document.createElement("li");
  const name = document.createElement("span");
  name.className = "meta";
  name.textContent = `${label}: `;
  li.append(name, value);
  list.append(li);
}

function detail(term, value) {
  const dt = document.createElement("dt");
  dt.textContent = term;
  const dd = document.createElement("dd");
  dd.textContent = value;
  dd.className = "wrap";
  $("details").append(dt, dd);
}

/** The outcome to the site's page, when this window is the one its Keyfob window turned into. */
function answer(outcome) {
  if (rid && window.opener && current && current.verifiedOrigin) {
    window.opener.postMessage({ type: "keyfob-polkadot-reply", rid, outcome }, current.origin);
    setTimeout(() => window.close(), 600);
  }
}

/** The summary with its recipient as start…end: a tap shows the whole address (it is also whole under "To"). */
function sentence(x) {
  const at = x.recipient ? x.summary?.indexOf(x.recipient) ?? -1 : -1;
  if (!x.summary) return [x.decodedCall ? "This call" : "A call"];
  if (at < 0) return [x.summary];
  const short = `${x.recipient.slice(0, 6)}…${x.recipient.slice(-6)}`;
  const address = document.createElement("button");
  address.type = "button";
  address.className = "address";
  address.textContent = short;
  address.title = "Show the whole address";
  address.setAttribute("aria-label", `recipient ${x.recipient}, show the whole address`);
  address.addEventListener("click", () => {
    const whole = address.textContent === short;
    address.textContent = whole ? x.recipient : short;
    address.classList.toggle("whole", whole);
  });
  return [x.summary.slice(0, at), address, x.summary.slice(at + x.recipient.length)];
}

/** A batch's calls, every one (nested batches as nested lists): each call's sentence, else its text. */
function callList(calls) {
  const list = document.createElement("ol");
  list.className = "calls";
  for (const c of calls) {
    const li = document.createElement("li");
    li.textContent = c.summary || c.text;
    if (c.summary) li.title = c.text;
    if (c.calls && c.calls.length) li.append(callList(c.calls));
    list.append(li);
  }
  return list;
}

function render(d) {
  current = d;
  const host = new URL(d.origin).host;
  $("client").textContent = d.origin;
  $("client-note").textContent = d.verifiedOrigin ? "verified by your browser" : "as reported by your app";
  $("account-label").textContent = d.account.name;
  $("account-address").textContent = d.account.address;
  const fields = $("fields");
  fields.replaceChildren();
  $("details").replaceChildren();
  $("unchecked").hidden = true;
  $("unchecked").replaceChildren();
  if (d.extrinsic) {
    const x = d.extrinsic;
    $("title").textContent = `Sign a transaction for ${host}`;
    const chain = !x.genesisSigned
      ? "On any chain: the payload does not sign a genesis hash"
      : x.chain ? `On ${x.chain}` : `On chain ${x.genesisHash.slice(0, 10)}…`;
    const call = document.createElement("span");
    call.className = "wrap";
    if (x.verified) {
      // Checked against the chain's metadata (RFC-0078): the sentence and the call are facts.
      $("what").replaceChildren(...sentence(x), ` · ${chain}`);
      call.textContent = x.decodedCall || x.call;
      item(fields, "Call", call);
      if (x.calls && x.calls.length) {
        const list = callList(x.calls);
        list.id = "calls";
        item(fields, `Its ${x.calls.length} call${x.calls.length === 1 ? "" : "s"}`, list);
      }
      if (x.recipient) {
        const to = document.createElement("code");
        to.className = "wrap";
        to.id = "recipient";
        to.textContent = x.recipient;
        item(fields, "To", to);
      }
      $("call-note").textContent = x.callNote;
    } else {
      // Unchecked: no sentence, the call as hex, and the site's words marked as its own.
      $("what").textContent = "A transaction Keyfob could not check";
      call.textContent = x.call;
      item(fields, "Call (hex)", call);
      const warning = $("unchecked");
      const head = document.createElement("strong");
      head.textContent = "Keyfob cannot check what this transaction does.";
      const body = document.createElement("p");
      body.textContent = "Its call, amount, recipient and chain are unchecked: sign only if you trust this site and checked the transaction there.";
      warning.append(head, body);
      if (x.siteDescription) {
        const said = document.createElement("p");
        said.className = "wrap";
        said.textContent = `The site describes it as ${x.siteDescription}`;
        warning.append(said);
      }
      const why = document.createElement("p");
      why.className = "meta";
      why.textContent = x.callNote;
      warning.append(why);
      warning.hidden = false;
      $("call-note").textContent = "";
    }
    item(fields, "Tip", x.tip);
    item(fields, "Nonce", x.nonce);
    item(fields, "Valid", x.era);
    detail("Whole call", x.call);
    detail("Genesis hash", x.genesisHash);
    detail("Runtime", `spec ${x.specVersion}, transaction version ${x.transactionVersion}`);
    detail("Signed extensions", x.signedExtensions.join(", "));
    if (x.assetId) detail("Fee paid in asset", x.assetId);
    detail("Checked against the chain's metadata (RFC-0078)", x.verified ? "yes" : "no");
    if (x.metadataHash) detail("Metadata hash signed", x.metadataHash);
    if (x.notSigned && x.notSigned.length) detail("Not signed (bound by nothing)", x.notSigned.join(", "));
  } else {
    $("title").textContent = `Sign a message for ${host}`;
    $("what").textContent = d.bytes.text !== null && d.bytes.text !== undefined ? "This text:" : "These bytes:";
    const quote = document.createElement("blockquote");
    quote.className = "wrap";
    quote.textContent = d.bytes.text ?? d.bytes.hex;
    const li = document.createElement("li");
    li.className = "quote";
    li.append(quote);
    fields.append(li);
    $("call-note").textContent = (d.bytes.escaped
      ? "It holds characters that are invisible or change how text reads; they are shown as \\u codes, exactly where they are. "
      : "") + (d.bytes.ethereum
      ? "It is an Ethereum signed message: Keyfob signs it as it is, as polkadot-js wallets do. It is not a Polkadot transaction, but only sign it if you trust this site."
      : "Keyfob signs it inside <Bytes>…</Bytes>, as every polkadot-js wallet does, so it can never be a transaction.");
    detail("As hex", d.bytes.hex);
  }
  detail("Payload hash (BLAKE2b-256)", d.payloadHash);
  detail("Request", d.id);
  $("who").textContent = d.state === "pending"
    ? `Check it, then sign with your passkey. Nothing was signed yet.`
    : d.state === "approved" ? "This request was signed already." : d.state === "rejected" ? "This request was rejected."
    : d.state === "cancelled" ? "This request was cancelled: the site's permission ended (you revoked it, or signed out everywhere). Nothing was signed."
    : "This request has expired. Nothing was signed.";
  $("request-card").hidden = false;
  if (d.state === "cancelled") $("title").textContent = "This request was cancelled";
  // Only a waiting request has anything to press: a decided, cancelled or expired one shows none.
  $("decide-card").hidden = d.state !== "pending";
  $("approve").disabled = $("reject").disabled = d.state !== "pending";
}

async function load() {
  const session = await api("/session").catch(() => null);
  if (!session) {
    $("who").textContent = "Sign in first: the request is only visible to its account.";
    $("signin-card").hidden = false;
    return;
  }
  $("account-name").textContent = session.username || "";
  try { render(await api(`/api/polkadot/requests/${encodeURIComponent(requestID)}/details`)); } catch (error) {
    $("who").textContent = "This request cannot be shown. Nothing was signed.";
    showError(error);
  }
}

$("approve").addEventListener("click", async () => {
  const button = $("approve");
  button.disabled = true;
  try {
    // One prompt: the confirmation also unlocks a locked signer (and opens a sealed key).
    showStatus("", "Confirm with your passkey…");
    const options = await api(`/api/polkadot/requests/${encodeURIComponent(requestID)}/challenge`, { method: "POST", body: {} });
    const credential = await navigator.credentials.get({ publicKey: requestOptionsFromJSON(options) });
    const outcome = await api(`/api/polkadot/requests/${encodeURIComponent(requestID)}/approve`, { method: "POST", body: { assertion: assertionToJSON(credential) } });
    showStatus("ok", rid ? "Signed. The site has its signature; this window closes." : "Signed. Go back to your app: it has the signature.");
    $("reject").disabled = true;
    $("who").textContent = "Signed with your passkey.";
    answer(outcome);
  } catch (error) {
    button.disabled = false;
    showStatus("error", `${describeError(error)} Nothing was signed.`, error.code);
  }
});

$("reject").addEventListener("click", async () => {
  try {
    const outcome = await api(`/api/polkadot/requests/${encodeURIComponent(requestID)}/reject`, { method: "POST", body: {} });
    $("approve").disabled = $("reject").disabled = true;
    showStatus("ok", "Rejected. Nothing was signed.");
    answer({ ...outcome, code: "user_rejected" });
  } catch (error) { showError(error); }
});

$("signin").addEventListener("click", async () => {
  try { await signInWithPasskey(); $("signin-card").hidden = true; load(); } catch (error) { showError(error); }
});

load();
