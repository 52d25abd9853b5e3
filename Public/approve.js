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

/** The one-line summary of what the request does, and the fields it replaces (kind 0). */
function describe(r) {
  const e = r.event;
  const quote = (text) => `“${text.length > 140 ? text.slice(0, 140) + "…" : text}”`;
  if (r.method === "get_public_key") return { what: "See your public key (npub)" };
  if (r.method === "nip04_encrypt" || r.method === "nip44_encrypt") return { what: `Encrypt a message for ${shortKey(r.peerNpub)}`, line: quote(r.plaintext || "") };
  if (r.method === "nip04_decrypt" || r.method === "nip44_decrypt") return { what: `Read a message from ${shortKey(r.peerNpub)}`, line: "It will see the decrypted text." };
  if (r.method === "decrypt_zap_event") return { what: "Read a private zap" };
  if (!e) return { what: methodText[r.method] || r.method };
  const tags = e.tags || [];
  const hashtags = tags.filter((t) => t[0] === "t" && t[1]).map((t) => "#" + t[1]);
  switch (e.kind) {
    case 0: {
      let profile = {};
      try { profile = JSON.parse(e.content || "{}") || {}; } catch { profile = {}; }
      const fields = Object.entries(profile).filter(([, v]) => typeof v === "string" || typeof v === "number")
        .map(([k, v]) => `${k}: ${String(v).length > 60 ? String(v).slice(0, 60) + "…" : v}`);
      return { what: "Replace your profile", line: "Your whole profile becomes exactly this:", fields: fields.length ? fields : ["(an empty profile)"] };
    }
    case 1: return { what: "Sign a note", line: [quote(e.content || ""), ...hashtags].join(" · ") };
    case 3: {
      const follows = tags.filter((t) => t[0] === "p").length;
      return { what: "Replace your follow list", line: `With ${counted(follows, "account")}: whoever you follow now and is not among them is unfollowed.` };
    }
    case 5: return { what: "Delete events", line: `${tags.filter((t) => t[0] === "e" || t[0] === "a").length} of your events.` };
    case 6: case 16: return { what: "Repost" };
    case 7: return { what: "React", line: quote(e.content || "+") };
    case 22242: return { what: "Log in to a relay", line: (tags.find((t) => t[0] === "relay") || [])[1] || "" };
    default: return { what: `Sign ${/^[aeiou]/i.test(r.kindName || "") ? "an" : "a"} ${r.kindName || "event"} (kind ${e.kind})`, line: e.content ? quote(e.content) : "" };
  }
}

function render(r) {
  current = r;
  $("signin-card").hidden = true;
  $("request-card").hidden = false;
  $("choices-card").hidden = false;
  // The result line moves into the sticky decision bar: after Approve on a long request it is seen
  // at once, not below the bar at the end of the page.
  $("choices-card").append($("status"));
  $("who").textContent = `Signed in as ${r.account.username}.`;
  $("account-name").textContent = r.account.username;
  // A bunker client has one name on every page (bunkerClientName), its key beside it; a web
  // client is its origin, with what it calls itself beside it.
  if (r.client.startsWith("nip46:")) {
    $("client").textContent = bunkerClientName(r.clientName, r.client.slice(6));
    $("client-claimed").hidden = false;
    $("client-claimed").textContent = r.clientName ? `${bunkerClientKey(r.client.slice(6))}; the name is what the app calls itself` : "";
    $("client-claimed").hidden = !r.clientName;
  } else {
    $("client").textContent = r.client;
    if (r.clientName) {
      $("client-claimed").hidden = false;
      $("client-claimed").textContent = `calls itself “${r.clientName}” (not verified)`;
    }
  }
  const summary = describe(r);
  $("title").textContent = "Approve this?";
  $("what").textContent = summary.what;
  $("summary").hidden = !summary.line;
  $("summary").textContent = summary.line || "";
  $("fields").hidden = !summary.fields;
  $("fields").replaceChildren(...(summary.fields || []).map((text) => {
    const li = document.createElement("li");
    li.textContent = text;
    return li;
  }));
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
  if (r.peerNpub) row(details, "With", r.peerNpub, true);
  if (r.client.startsWith("nip46:")) row(details, "Client key", r.clientNpub || r.client.slice(6), true);
  row(details, "Expires", new Date(r.expiresAt).toLocaleTimeString());
  $("presets-card").hidden = !r.firstFromClient;
  const requested = r.requestedPerms || [];
  $("preset-requested").hidden = requested.length === 0;
  $("requested-perms").textContent = requested.join(", ");
  const remember = $("remember");
  for (const option of remember.options) option.disabled = !r.remember.includes(option.value);
  if (!r.remember.includes(remember.value)) remember.value = "once";
  // Before the click, what it will ask: the passkey for a receipt, the passkey to unlock first, or
  // nothing (an unlocked signer, an ordinary request).
  $("passkey-note").hidden = !r.needsPasskey && !r.signerLocked;
  $("passkey-note").textContent = r.needsPasskey
    ? "Asked every time: your passkey signs a receipt of exactly this request."
    : "Your signer is locked: approving asks for your passkey first, which unlocks it.";
  $("approve").textContent = r.needsPasskey || r.signerLocked ? "Approve with passkey" : "Approve";
  presetChanged();
}

/** One control decides what is remembered: a preset other than "ask" replaces the "Allow" choice. */
function presetChanged() {
  const preset = document.querySelector("input[name=preset]:checked");
  const decides = current && current.firstFromClient && preset && preset.value !== "ask";
  // A kind asked every time has nothing to remember: no control for it.
  const onlyOnce = current && current.remember.length <= 1;
  $("remember-row").hidden = Boolean(decides) || Boolean(onlyOnce);
  $("preset-decides").hidden = !decides;
}

for (const input of document.querySelectorAll("input[name=preset]")) input.addEventListener("change", presetChanged);

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
      gone(error);
    }
  }
}

/** The request can no longer be decided (expired, decided, cancelled): the page says so in place
 *  of the request, with no button left to press but the way back, which tells the app. */
function gone(error) {
  $("who").textContent = "";
  $("title").textContent = error.data && error.data.state === "approved" ? "Approved already"
    : error.data && error.data.state === "rejected" ? "Rejected already" : "This request is gone";
  $("request-card").hidden = true;
  $("choices-card").hidden = true;
  $("presets-card").hidden = true;
  $("back-to-app").parentElement.before($("status"));
  // Decided already is an answer, not a failure: only expired, cancelled or unknown is an error.
  const decided = error.data && (error.data.state === "approved" || error.data.state === "rejected");
  showStatus(decided ? "" : "error", error.code === "request_not_found" ? error.message : `${describeError(error)} Nothing was signed.`,
    decided ? undefined : error.code);
  // An app that waits for the browser: the way back tells it the request is over.
  const back = error.data && error.data.back;
  if (back) {
    $("back-to-app").href = back;
    $("back-to-app").hidden = false;
  }
}

/** A decision the server no longer takes (the page stayed open past the request's life): the
 *  page reads the request again, which shows why and the way back. */
async function decisionFailed(error) {
  if (error.code !== "request_not_found") return false;
  await load();
  return true;
}

function go(reply, rejected = false) {
  // The question is answered: the title says so, not "Approve this?".
  $("title").textContent = rejected ? "Rejected" : "Done";
  if (reply.redirect) {
    showStatus("ok", rejected ? "Rejected. Nothing was signed; returning to the app…" : "Done. Returning to the app…");
    location.assign(reply.redirect);
  } else {
    const done = rejected ? "Rejected. Nothing was signed." : "Done.";
    showStatus("ok", current && current.transport === "nip46"
      ? `${done} Keyfob has answered the app through its relay; you can go back to it.`
      : `${done} The app asked for no answer; you can close this window.`);
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
    if (await decisionFailed(error)) return;
    if (error.code === "signer_locked") { current.signerLocked = true; }
    showStatus("error", `${describeError(error)} Nothing was signed.`, error.code);
  }
});

$("reject").addEventListener("click", async () => {
  try {
    go(await api(`/api/requests/${encodeURIComponent(requestID)}/reject`, { method: "POST", body: { remember: $("remember").value } }), true);
  } catch (error) { if (!(await decisionFailed(error))) showError(error); }
});

$("signin").addEventListener("click", async () => {
  try {
    await unlockSigner();
    $("signin-card").hidden = true;
    load();
  } catch (error) { showError(error); }
});

load();
