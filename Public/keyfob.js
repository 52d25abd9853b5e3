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
    throw error;
  }
  return data;
}

function creationOptionsFromJSON(o) {
  return {
    ...o,
    challenge: b64url.decode(o.challenge),
    user: { ...o.user, id: b64url.decode(o.user.id) },
    excludeCredentials: (o.excludeCredentials || []).map((c) => ({ ...c, id: b64url.decode(c.id) })),
  };
}

function requestOptionsFromJSON(o) {
  return {
    challenge: b64url.decode(o.challenge),
    timeout: o.timeout,
    rpId: o.rpId,
    userVerification: o.userVerification,
    allowCredentials: (o.allowCredentials || []).map((c) => ({ ...c, id: b64url.decode(c.id) })),
  };
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
  };
}

/** Creates a passkey: for a new account (username optional) or, when signed in, for this account. */
async function registerPasskey(username) {
  const options = await api("/generate-registration-options", { method: "POST", body: username ? { username } : {} });
  const credential = await navigator.credentials.create({ publicKey: creationOptionsFromJSON(options) });
  return api("/verify-registration", {
    method: "POST",
    body: { username: username || "", challengeKey: options.challengeKey, cred: registrationToJSON(credential) },
  });
}

/** Signs in with a passkey; `mediation` "conditional" lets the browser offer passkeys in the username field. */
async function signInWithPasskey({ mediation, signal } = {}) {
  const options = await api("/generate-authentication-options", { method: "POST", body: {} });
  const credential = await navigator.credentials.get({ publicKey: requestOptionsFromJSON(options), mediation, signal });
  return api("/verify-authentication", {
    method: "POST",
    body: { challengeKey: options.challengeKey, cred: assertionToJSON(credential) },
  });
}

/** Shows a result in #status; tests wait on data-status. */
function showStatus(kind, message) {
  const el = document.getElementById("status");
  el.textContent = message;
  el.dataset.status = kind;
}

function describeError(error) {
  if (error && error.name === "NotAllowedError") return "The passkey prompt was closed or timed out. Try again.";
  if (error && error.name === "InvalidStateError") return "This authenticator already holds a passkey for this account.";
  return (error && error.message) || String(error);
}
