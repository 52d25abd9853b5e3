// The approval page: shows exactly what an app asks, then approves or rejects it.
"use strict";
const $ = (id) => document.getElementById(id);
const requestID = decodeURIComponent(location.pathname.split("/").pop());
let current = null;

const methodText = {
  get_public_key: "see your public key (npub)",
  sign_event: "sign an event with your key",
  nip04_encrypt: "encrypt a message (NIP-04)",
  nip44_encrypt: "encrypt a message (NIP-44)",
  nip04_decrypt: "decrypt a message (NIP-04)",
  nip44_decrypt: "decrypt a message (NIP-44)",
  decrypt_zap_event: "decrypt a private zap",
};

function row(list, name, value, isCode) {
  const dt = document.createElement("dt");
  dt.textContent = name;
  const dd = document.createElement("dd");
  const inner = document.createElement(isCode ? "pre" : "span");
  inner.textContent = value;
  dd.append(inner);
  list.append(dt, dd);
}

function render(r) {
  current = r;
  $("signin-card").hidden = true;
  $("request-card").hidden = false;
  $("choices-card").hidden = false;
  $("who").textContent = `Signed in as ${r.account.username}.`;
  // A bunker client is its key (nip46:<hex>): its start is enough to tell it apart.
  $("client").textContent = r.client.startsWith("nip46:") ? `Bunker client ${r.client.slice(6, 22)}…` : r.client;
  if (r.clientName) {
    $("client-claimed").hidden = false;
    $("client-claimed").textContent = `calls itself “${r.clientName}” (not verified)`;
  }
  let what = methodText[r.method] || r.method;
  if (r.method === "sign_event") what = `sign a ${r.kindName} (kind ${r.kind})`;
  $("what").textContent = `It wants to ${what}.`;
  $("npub").textContent = r.account.npub;
  $("warnings").replaceChildren(...(r.warnings || []).map((w) => {
    const li = document.createElement("li");
    li.textContent = w;
    return li;
  }));
  const details = $("details");
  details.replaceChildren();
  if (r.event) {
    row(details, "Content", r.event.content || "(empty)", true);
    if (r.event.tags && r.event.tags.length) row(details, "Tags", JSON.stringify(r.event.tags, null, 1), true);
    if (r.event.created_at !== undefined) row(details, "Dated", new Date(r.event.created_at * 1000).toLocaleString());
    if (r.event.id) row(details, "Event id", r.event.id, true);
  }
  if (r.plaintext !== undefined) row(details, "Message it will encrypt", r.plaintext, true);
  if (r.ciphertext !== undefined) row(details, "It will read the decrypted message", r.ciphertext.slice(0, 120) + (r.ciphertext.length > 120 ? "…" : ""), true);
  if (r.peer) row(details, "With", r.peer, true);
  row(details, "Expires", new Date(r.expiresAt).toLocaleTimeString());
  $("presets").hidden = !r.firstFromClient;
  const requested = r.requestedPerms || [];
  $("preset-requested").hidden = requested.length === 0;
  $("requested-perms").textContent = requested.join(", ");
  const remember = $("remember");
  for (const option of remember.options) option.disabled = !r.remember.includes(option.value);
  if (!r.remember.includes(remember.value)) remember.value = "once";
  $("passkey-note").hidden = !r.needsPasskey;
}

async function load() {
  try {
    render(await api(`/api/requests/${encodeURIComponent(requestID)}`));
  } catch (error) {
    if (error.code === "unauthorized") {
      $("who").textContent = "Sign in first.";
      $("signin-card").hidden = false;
    } else if (error.code === "signer_locked") {
      // Your key is sealed by your passkeys, and so is what this app asked: unlock to read it.
      $("who").textContent = "Unlock first.";
      $("signin-title").textContent = "Unlock to see this request";
      $("signin-text").textContent = "Your key is sealed by your passkeys, and so is this request: only one of those passkeys opens it.";
      $("signin").textContent = "Unlock with a passkey";
      $("signin-card").hidden = false;
    } else {
      $("who").textContent = "";
      $("title").textContent = "This request is gone";
      showStatus("error", error.code === "request_not_found"
        ? "It was decided already, it expired (requests last 5 minutes), or it belongs to another account. Ask the app again."
        : describeError(error));
    }
  }
}

function go(reply) {
  if (reply.redirect) {
    showStatus("ok", "Done. Returning to the app…");
    location.assign(reply.redirect);
  } else {
    showStatus("ok", current && current.transport === "nip46"
      ? "Done. Keyfob has answered the app through its relay; you can go back to it."
      : "Done. The app asked for no answer; you can close this window.");
  }
  $("approve").disabled = $("reject").disabled = true;
}

async function approve() {
  const body = { remember: $("remember").value };
  if (current.firstFromClient) body.preset = document.querySelector("input[name=preset]:checked").value;
  // A locked signer opens first, unless the passkey confirmation below opens it anyway (its
  // options carry the sealing passkeys' PRF inputs): one prompt, not two.
  if (current.signerLocked && !current.needsPasskey) {
    showStatus("", "Unlock your signer with your passkey…");
    await unlockSigner();
    current.signerLocked = false;
  }
  if (body.preset === "trusted") {
    // "Trusted" lets this app sign most things unattended from now on: your passkey confirms it.
    showStatus("", "Confirm “trusted” with your passkey…");
    body.confirmation = await confirmAction("grant.trusted", current.client);
  }
  if (current.needsPasskey) {
    showStatus("", "Confirm with your passkey…");
    const options = await api(`/api/requests/${encodeURIComponent(requestID)}/challenge`, { method: "POST", body: {} });
    const credential = await navigator.credentials.get({ publicKey: requestOptionsFromJSON(options) });
    body.assertion = assertionToJSON(credential);
  }
  go(await api(`/api/requests/${encodeURIComponent(requestID)}/approve`, { method: "POST", body }));
}

$("approve").addEventListener("click", async () => {
  try { await approve(); } catch (error) {
    if (error.code === "signer_locked") { current.signerLocked = true; }
    showStatus("error", describeError(error));
  }
});

$("reject").addEventListener("click", async () => {
  try {
    go(await api(`/api/requests/${encodeURIComponent(requestID)}/reject`, { method: "POST", body: { remember: $("remember").value } }));
  } catch (error) { showStatus("error", describeError(error)); }
});

$("signin").addEventListener("click", async () => {
  try {
    await unlockSigner();
    $("signin-card").hidden = true;
    load();
  } catch (error) { showStatus("error", describeError(error)); }
});

load();
