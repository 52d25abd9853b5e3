// Shared helpers for Keyfob's pages: base64url, JSON calls, and the two passkey ceremonies.
"use strict";

const b64url = {
  encode(buffer) {
    const bytes = new Uint8Array(buffer);
    let text = "";
    for (const b of bytes) text += String.fromCharCode(b);
    return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  },
  decode(text) {
    const base64 = text.replace(/-/g, "+").replace(/_/g, "/");
    const binary = atob(base64 + "===".slice((base64.length + 3) % 4));
    return Uint8Array.from(binary, (c) => c.charCodeAt(0)).buffer;
  },
};

/** POSTs or GETs JSON; throws an Error with the server's message and code on failure. */
async function api(path, { method = "GET", body } = {}) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error(data.message || `request failed (${response.status})`);
    error.code = data.error;
    error.data = data;
    // Rate limits and a database outage say when to come back (seconds).
    const retry = Number(response.headers.get("Retry-After"));
    if (retry > 0) error.retryAfter = retry;
    throw error;
  }
  return data;
}

/** The extensions of options in JSON form, with the PRF salt as bytes (what the browser takes). */
function extensionsFromJSON(extensions) {
  if (!extensions) return undefined;
  const out = { ...extensions };
  if (extensions.prf) {
    const prf = {};
    if (extensions.prf.eval) prf.eval = { first: b64url.decode(extensions.prf.eval.first) };
    if (extensions.prf.evalByCredential) {
      // Keys stay base64url credential ids (WebAuthn L3); the salts become bytes.
      prf.evalByCredential = Object.fromEntries(Object.entries(extensions.prf.evalByCredential)
        .map(([id, values]) => [id, { first: b64url.decode(values.first) }]));
    }
    out.prf = prf;
  }
  return out;
}

function creationOptionsFromJSON(o) {
  return {
    ...o,
    challenge: b64url.decode(o.challenge),
    user: { ...o.user, id: b64url.decode(o.user.id) },
    excludeCredentials: (o.excludeCredentials || []).map((c) => ({ ...c, id: b64url.decode(c.id) })),
    extensions: extensionsFromJSON(o.extensions),
  };
}

function requestOptionsFromJSON(o) {
  const options = {
    challenge: b64url.decode(o.challenge),
    timeout: o.timeout,
    rpId: o.rpId,
    userVerification: o.userVerification,
    allowCredentials: (o.allowCredentials || []).map((c) => ({ ...c, id: b64url.decode(c.id) })),
  };
  const extensions = extensionsFromJSON(o.extensions);
  if (extensions) options.extensions = extensions;
  return options;
}

/** The PRF part of the client extension results, base64url: the server derives the key that
 *  opens a sealed nostr key from it, and never stores it. */
function extensionResultsToJSON(credential) {
  const results = credential.getClientExtensionResults ? credential.getClientExtensionResults() : {};
  if (!results.prf) return undefined;
  const prf = {};
  if (results.prf.enabled !== undefined) prf.enabled = results.prf.enabled;
  if (results.prf.results && results.prf.results.first) prf.results = { first: b64url.encode(results.prf.results.first) };
  return { prf };
}

function registrationToJSON(credential) {
  const r = credential.response;
  return {
    id: credential.id,
    rawId: b64url.encode(credential.rawId),
    type: credential.type,
    authenticatorAttachment: credential.authenticatorAttachment || undefined,
    response: {
      clientDataJSON: b64url.encode(r.clientDataJSON),
      attestationObject: b64url.encode(r.attestationObject),
      transports: r.getTransports ? r.getTransports() : [],
    },
    clientExtensionResults: extensionResultsToJSON(credential),
  };
}

function assertionToJSON(credential) {
  const r = credential.response;
  return {
    id: credential.id,
    rawId: b64url.encode(credential.rawId),
    type: credential.type,
    response: {
      clientDataJSON: b64url.encode(r.clientDataJSON),
      authenticatorData: b64url.encode(r.authenticatorData),
      signature: b64url.encode(r.signature),
      userHandle: r.userHandle ? b64url.encode(r.userHandle) : undefined,
    },
    clientExtensionResults: extensionResultsToJSON(credential),
  };
}

/** Creates a passkey: for a new account (username optional; with `seal`, its key sealed by this
 *  passkey from the start) or, with `adding`, for the signed-in account (a passkey it already has
 *  confirms that first), named `passkeyName` when the person gave one.
 *  `hints` (WebAuthn L3: "client-device", "hybrid", "security-key") tell the browser which route to offer. */
async function registerPasskey(username, hints, adding = false, seal = false, passkeyName = "") {
  const body = username ? { username } : {};
  if (adding) body.confirmation = await confirmAction("passkey.add");
  const options = await api("/generate-registration-options", { method: "POST", body });
  const publicKey = creationOptionsFromJSON(options);
  if (hints) {
    publicKey.hints = hints;
    if (!hints.includes("client-device")) {
      publicKey.authenticatorSelection = { ...publicKey.authenticatorSelection, authenticatorAttachment: "cross-platform" };
    }
  }
  const credential = await navigator.credentials.create({ publicKey });
  rememberDeviceCredential(credential);
  return api("/verify-registration", {
    method: "POST",
    body: {
      username: username || "", challengeKey: options.challengeKey, cred: registrationToJSON(credential), seal: seal || undefined,
      passkeyName: passkeyName || undefined,
    },
  });
}

/** Passkeys of this device used in this browser (their ids), so the account page can say "This
 *  device": a security key or a phone (cross-platform) is used here but is not this device. */
function rememberDeviceCredential(credential) {
  if (credential.authenticatorAttachment === "cross-platform") return;
  const id = credential.id;
  try {
    const known = new Set(JSON.parse(localStorage.getItem("keyfob-device-credentials") || "[]"));
    known.add(id);
    localStorage.setItem("keyfob-device-credentials", JSON.stringify([...known].slice(-20)));
  } catch { /* private mode: no badge */ }
}

function deviceCredentials() {
  try { return new Set(JSON.parse(localStorage.getItem("keyfob-device-credentials") || "[]")); } catch { return new Set(); }
}

/** Signs in with a passkey; `mediation` "conditional" lets the browser offer passkeys in the username field. */
/** Signs in. In a browser that signed in to a sealed account before, the options name it
 *  (`options.account`) and carry its sealing passkeys' PRF salts: the same prompt opens the key.
 *  `anyAccount` asks for the usual options instead (any account, no PRF). */
async function signInWithPasskey({ mediation, signal, onOptions, anyAccount } = {}) {
  const options = await api("/generate-authentication-options", { method: "POST", body: anyAccount ? { anyAccount: true } : {} });
  if (onOptions) onOptions(options);
  let credential;
  try {
    credential = await navigator.credentials.get({ publicKey: requestOptionsFromJSON(options), mediation, signal });
  } catch (error) {
    // Offered only the remembered account's passkeys and none was used (another account's person,
    // or a cancel): ask again for any account, so no window is a dead end.
    if (options.account && !mediation && error && error.name === "NotAllowedError") {
      return signInWithPasskey({ signal, onOptions, anyAccount: true });
    }
    throw error;
  }
  rememberDeviceCredential(credential);
  try {
    return await api("/verify-authentication", {
      method: "POST",
      body: { challengeKey: options.challengeKey, cred: assertionToJSON(credential) },
    });
  } catch (error) {
    // Tell the passkey manager this passkey is gone, so it stops offering it (Signal API).
    // (Not for a remembered account's options: there the passkey may be another account's, valid.)
    if (error.code === "credential_not_found" && !options.account && PublicKeyCredential.signalUnknownCredential) {
      PublicKeyCredential.signalUnknownCredential({ rpId: options.rpId, credentialId: credential.id }).catch(() => {});
    }
    throw error;
  }
}

/** Unlocks the signer for this session, signing in first when there is none. One passkey prompt
 *  (two when not signed in yet, unless this browser signed in to the sealed account before: then
 *  the sign-in opens the key too). Returns the session. */
async function unlockSigner() {
  let session = await api("/session").catch(() => null);
  if (!session) {
    await signInWithPasskey();
    session = await api("/session");
  }
  if (!session.signerLocked) return session;
  const cred = await confirmAction("signer.unlock");
  await api("/api/signer/unlock", { method: "POST", body: { cred } });
  return api("/session");
}

/** Your passkey, asked for one account change (`action` on `target`): the server binds the
 *  challenge to exactly that, for two minutes, once. Only passkeys the account had before this
 *  sign-in are offered; `credentialIds` narrows them further. Returns the assertion to send as
 *  `confirmation` (or `cred` for sealing). */
async function confirmAction(action, target = "", credentialIds) {
  const reply = await api("/api/confirmations", { method: "POST", body: { action, target } });
  const publicKey = requestOptionsFromJSON(reply.options);
  if (credentialIds) {
    // The PRF inputs narrowed with the allow list: a browser refuses salts for a passkey it may not use.
    const allowed = new Set(credentialIds);
    publicKey.allowCredentials = publicKey.allowCredentials.filter((c) => allowed.has(b64url.encode(c.id)));
    const prf = publicKey.extensions && publicKey.extensions.prf;
    if (prf && prf.evalByCredential) {
      prf.evalByCredential = Object.fromEntries(Object.entries(prf.evalByCredential).filter(([id]) => allowed.has(id)));
    }
    if (!publicKey.allowCredentials.length) {
      throw Object.assign(new Error("That passkey cannot confirm this here: sign in again with it, then try once more."), { code: "passkey_not_eligible" });
    }
  }
  const credential = await navigator.credentials.get({ publicKey });
  return assertionToJSON(credential);
}

/** Messages a person can act on, by error code; the code stays visible for support. */
const friendlyErrors = {
  username_taken: "That username is taken. If it is yours, sign in instead.",
  invalid_request: null,  // the server's own sentence
  challenge_expired: "That took too long. Try again.",
  credential_not_found: "This passkey is not registered here any more. Create an account or use another passkey.",
  rate_limited: "Too many attempts from here. Wait a minute and try again.",
  signer_locked: "Your signer is locked. Unlock it with your passkey first.",
  user_verification_required: "Your device must check it is you (PIN, fingerprint or face). Try again and confirm.",
  counter_regression: "This passkey answered like an older copy of itself, which can mean it was copied. "
    + "Sign in with another passkey; if you do not recognise this, remove this one.",
  store_unavailable: "Keyfob cannot reach its database right now. Nothing was done; try again in a moment.",
  decrypt_failed: null,  // the server's own sentence says which
};

/** Shows a result in #status; tests wait on data-status. An error's code (DESIGN.md §7) is there
 *  for support, behind "Details", not in the sentence a person reads. */
function showStatus(kind, message, code) {
  const el = document.getElementById("status");
  el.textContent = message;
  if (code) el.append(codeDetails(code));
  el.dataset.status = kind;
}

/** An error, in a sentence, with its code behind "Details". */
function showError(error) {
  showStatus("error", describeError(error), error && error.code);
}

function codeDetails(code) {
  const details = document.createElement("details");
  details.className = "error-code";
  const summary = document.createElement("summary");
  summary.textContent = "Details";
  details.append(summary, `Error code: ${code}`);
  return details;
}

/** "1 passkey", "3 passkeys": a count and its noun (one that takes an s). */
/** A 32-byte hex key as its NIP-19 `npub` (bech32, BIP-173), or "" for anything else. */
function npubFromHex(hex) {
  if (!/^[0-9a-f]{64}$/.test(hex || "")) return "";
  const alphabet = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";
  const words = [];
  let acc = 0, bits = 0;
  for (let i = 0; i < 64; i += 2) {
    acc = ((acc << 8) | parseInt(hex.slice(i, i + 2), 16)) & 0xfff;
    bits += 8;
    while (bits >= 5) { bits -= 5; words.push((acc >> bits) & 31); }
  }
  if (bits) words.push((acc << (5 - bits)) & 31);
  const polymod = (values) => {
    let chk = 1;
    for (const v of values) {
      const top = chk >> 25;
      chk = ((chk & 0x1ffffff) << 5) ^ v;
      [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3].forEach((g, j) => { if ((top >> j) & 1) chk ^= g; });
    }
    return chk;
  };
  const hrp = [..."npub"].map((c) => c.charCodeAt(0));
  const mod = polymod([...hrp.map((c) => c >> 5), 0, ...hrp.map((c) => c & 31), ...words, 0, 0, 0, 0, 0, 0]) ^ 1;
  const checksum = [0, 1, 2, 3, 4, 5].map((i) => (mod >> (5 * (5 - i))) & 31);
  return "npub1" + [...words, ...checksum].map((w) => alphabet[w]).join("");
}

/** "npub1abcd…wxyz": enough of a key to tell it apart. */
function shortKey(npub) {
  return npub && npub.length > 20 ? `${npub.slice(0, 12)}…${npub.slice(-6)}` : (npub || "");
}

/** The one name of a NIP-46 (bunker) client on every page: the name it gives itself, marked as
 *  unverified, else its key. `pubkey` is its hex key. */
function bunkerClientName(name, pubkey) {
  return name ? `${name} (unverified)` : `Bunker client ${shortKey(npubFromHex(pubkey))}`;
}

/** A bunker client's key, for the line under its name: "key npub1abcd…wxyz". */
function bunkerClientKey(pubkey) {
  return `key ${shortKey(npubFromHex(pubkey))}`;
}

function counted(n, noun, plural = `${noun}s`) {
  return `${n} ${n === 1 ? noun : plural}`;
}

/** "in 5 seconds", "in a minute", "in 3 minutes": a Retry-After as people say it. */
function inAWhile(seconds) {
  if (seconds < 50) return `in ${counted(Math.ceil(seconds), "second")}`;
  if (seconds < 90) return "in a minute";
  return `in ${Math.round(seconds / 60)} minutes`;
}

function describeError(error) {
  if (error && error.name === "NotAllowedError") return "The passkey prompt was closed or timed out. Try again.";
  if (error && error.name === "InvalidStateError") return "This device already has a passkey for this account.";
  if (error && error.code === "rate_limited" && error.retryAfter) return `Too many attempts from here. Try again ${inAWhile(error.retryAfter)}.`;
  if (error && error.code) return friendlyErrors[error.code] || error.message;
  return (error && error.message) || String(error);
}

/** A first guess at a name for a passkey made on this device ("Chrome on Linux"), for the person to
 *  keep or change. Only the browser's own user agent is read; nothing is sent anywhere. */
function deviceName() {
  const ua = navigator.userAgent;
  const browser = /Edg\//.test(ua) ? "Edge" : /Firefox\//.test(ua) ? "Firefox" : /Chrome\/|CriOS/.test(ua) ? "Chrome"
    : /Safari\//.test(ua) ? "Safari" : "Browser";
  const system = /iPhone/.test(ua) ? "iPhone" : /iPad/.test(ua) ? "iPad" : /Android/.test(ua) ? "Android"
    : /Mac OS X/.test(ua) ? "Mac" : /Windows/.test(ua) ? "Windows" : /CrOS/.test(ua) ? "ChromeOS" : /Linux/.test(ua) ? "Linux" : "";
  return system ? `${browser} on ${system}` : browser;
}

/** Asks in the page, not in a browser dialog: a sentence, an optional text field, a confirm and a
 *  cancel button, appended to `into` (next to what the person pressed). Resolves with the field's
 *  value (or true) when confirmed, null when cancelled. One question at a time. */
function askInPage(into, { text, field, confirm = "OK", danger = false, extra = null }) {
  return new Promise((resolve) => {
    document.querySelectorAll(".ask-inline").forEach((open) => open.cancel());
    const box = document.createElement("div");
    box.className = "ask-inline";
    box.setAttribute("role", "group");
    const question = document.createElement("p");
    question.textContent = text;
    box.append(question);
    let input = null;
    if (field) {
      const id = `ask-${Date.now().toString(36)}`;
      const label = document.createElement("label");
      label.htmlFor = id;
      label.textContent = field.label;
      input = document.createElement("input");
      input.id = id;
      input.value = field.value || "";
      input.autocomplete = "off";
      box.append(label, input);
    }
    const ok = document.createElement("button");
    ok.type = "button";
    ok.className = danger ? "small danger" : "small";
    ok.textContent = confirm;
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.className = "secondary small";
    cancel.textContent = "Cancel";
    const actions = document.createElement("div");
    actions.className = "actions row";
    actions.append(ok);
    if (extra) {
      // A third way out, such as "Export the current key first": resolves with extra.value.
      const other = document.createElement("button");
      other.type = "button";
      other.className = "secondary small";
      other.textContent = extra.label;
      other.addEventListener("click", () => finish(extra.value));
      actions.append(other);
    }
    actions.append(cancel);
    box.append(actions);
    const finish = (value) => {
      // The status line may have moved next to these buttons: it stays in the page, outside any
      // list the answer re-renders.
      const status = document.getElementById("status");
      if (status && box.contains(status)) (box.parentElement.closest("ul") || box).after(status);
      box.remove();
      resolve(value);
    };
    box.cancel = () => finish(null);
    ok.addEventListener("click", () => finish(input ? input.value : true));
    cancel.addEventListener("click", () => finish(null));
    box.addEventListener("keydown", (event) => {
      if (event.key === "Escape") finish(null);
      if (event.key === "Enter" && input) finish(input.value);
    });
    into.append(box);
    // The question in view, on a small screen too (it opens below the button pressed).
    box.scrollIntoView({ block: "nearest" });
    (input || ok).focus({ preventScroll: true });
  });
}

/** `text` (an origin or URL) into `element`, breakable after "//", before a port and after each
 *  dot: on a narrow screen a host wraps at its parts, not mid-name. */
function setBreakable(element, text) {
  element.replaceChildren();
  for (const part of String(text).split(/(?<=\/\/)|(?=:\d)|(?<=\.)/)) {
    if (element.childNodes.length) element.append(document.createElement("wbr"));
    element.append(part);
  }
}

/** Checkboxes for the Polkadot accounts a site may see when it connects (all ticked at first), in
 *  `into`; `onChange(count)` after each change. Returns a function giving the ticked addresses. */
function accountChoice(into, accounts, onChange = () => {}) {
  for (const old of into.querySelectorAll("label.account-choice")) old.remove();
  const boxes = accounts.map((a, i) => {
    const label = document.createElement("label");
    label.className = "account-choice";
    const box = document.createElement("input");
    box.type = "checkbox";
    box.checked = true;
    box.value = a.address;
    box.id = `share-${i}`;
    const name = document.createElement("b");
    name.textContent = a.name;
    const address = document.createElement("code");
    address.className = "wrap";
    address.textContent = a.address;
    label.append(box, " ", name, " ", address);
    box.addEventListener("change", () => onChange(boxes.filter((b) => b.checked).length));
    into.append(label);
    return box;
  });
  return () => boxes.filter((b) => b.checked).map((b) => b.value);
}

/** The signed-in session; without one, shows `#signin-card` (and calls `shown`) and waits for its
 *  `#signin` passkey sign-in (Keyfob's windows opened by a site or the extension). */
async function sessionOrSignIn(shown = () => {}) {
  const current = await api("/session").catch(() => null);
  if (current) return current;
  document.getElementById("signin-card").hidden = false;
  shown();
  await new Promise((resolve) => {
    document.getElementById("signin").addEventListener("click", async () => {
      try {
        await signInWithPasskey();
        document.getElementById("signin-card").hidden = true;
        resolve();
      } catch (error) { showError(error); }
    });
  });
  return api("/session");
}

/** The person's Polkadot accounts, ticked in `#account-choice` (`#no-accounts` when there are
 *  none; `#allow` off while none is ticked): the list and a getter of the ticked addresses. */
async function polkadotAccountChoice() {
  const { accounts } = await api("/api/polkadot/accounts");
  document.getElementById("no-accounts").hidden = accounts.length > 0;
  const into = document.getElementById("account-choice");
  into.hidden = accounts.length === 0;
  const chosen = accountChoice(into, accounts, (count) => {
    document.getElementById("allow").disabled = count === 0;
    document.getElementById("none-ticked").hidden = count > 0;
  });
  return { accounts, chosen };
}
