// Keyfob's extension: it holds no key. It keeps a session a signed-in Keyfob page gave it (for the
// Keyfob server it was built for) and answers pages' NIP-07 and polkadot-js calls by asking that
// server for the origin the browser reports (sender.origin): nothing a page sends can name another.
// Signatures are approved in a Keyfob window, exactly as for /nip07.js and /polkadot.js: the same
// grants, approval pages and receipts.
"use strict";
// Chromium runs this as a service worker; Firefox as a background script after config.js.
if (typeof importScripts === "function") importScripts("config.js");

/** The server is fixed when the extension is built (`make extension KEYFOB_SERVER=…`): Keyfob's
 *  /extension.html there is the one page that may connect this extension. */
const SERVER = new URL(KEYFOB_DEFAULT_SERVER).origin;

// The session's token lives in the service worker's memory-backed storage, which content scripts
// cannot read; what is kept on disk (sites turned off) is closed to them too.
// (Firefox keeps storage.session from content scripts already and has no setAccessLevel.)
for (const area of [ext.storage.local, ext.storage.session]) {
  if (area && area.setAccessLevel) area.setAccessLevel({ accessLevel: "TRUSTED_CONTEXTS" }).catch(() => {});
}

const state = {
  async get() {
    const [held, kept] = await Promise.all([ext.storage.session.get(["token", "username", "known"]), ext.storage.local.get(["off"])]);
    return { server: SERVER, token: held.token || null, username: held.username || null, off: kept.off || [], known: held.known || {} };
  },
  async set(values) {
    const { off, ...held } = values;
    if (off !== undefined) await ext.storage.local.set({ off });
    if (Object.keys(held).length) await ext.storage.session.set(held);
  },
};

/** The name Keyfob gives a web origin as a client (`https://a.example` → `a.example`). */
function clientName(origin) {
  return origin.startsWith("https://") ? origin.slice("https://".length) : origin;
}

function failure(code, message) {
  return { error: { code, message } };
}

/** The page's origin as the browser reports it; nil for anything that is not a web page's tab. */
function originOf(sender) {
  if (!sender.tab || sender.id !== ext.runtime.id) return null;
  const origin = sender.origin || (sender.url && new URL(sender.url).origin);
  return origin && /^https?:\/\//.test(origin) ? origin : null;
}

/** `fetch` to the Keyfob server with the extension's session; `{status, body}`. */
async function api(path, { method = "GET", body } = {}) {
  const { server, token } = await state.get();
  const response = await fetch(server + path, {
    method, credentials: "omit",
    headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { "Content-Type": "application/json" } : {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  let parsed = {};
  try { parsed = text ? JSON.parse(text) : {}; } catch { parsed = { message: text }; }
  return { status: response.status, body: parsed };
}

/** The account this extension is connected to, or an error to answer with (no session: nothing is asked). */
async function connected() {
  const { token } = await state.get();
  if (!token) return { error: failure("unauthorized", "Keyfob's extension is not connected: open it and sign in with your passkey").error };
  const { status, body } = await api("/session");
  if (status === 401 || status === 403) {
    // Signed out (everywhere, say): what sites were given goes with the session.
    await state.set({ token: null, username: null, known: {} });
    return { error: failure("unauthorized", "your Keyfob session ended (signed out everywhere?): open the extension and sign in again").error };
  }
  if (status !== 200) return { error: failure(body.error || "unavailable", body.message || `Keyfob answered ${status}`).error };
  // A site keeps its public key here only while it may read it without asking (its grant).
  const { known } = await state.get();
  const sites = new Set(Array.isArray(body.sites) ? body.sites : []);
  const kept = Object.fromEntries(Object.entries(known).filter(([origin]) => sites.has(clientName(origin))));
  if (Object.keys(kept).length !== Object.keys(known).length) await state.set({ known: kept });
  return { session: body };
}

/** Opens `url` in a Keyfob window; resolves with the query of the first page of its tab whose
 *  address starts with `until`, or null when the person closed the window. */
async function keyfobWindow(url, until) {
  const created = await ext.windows.create({ url, type: "popup", width: 440, height: 760 });
  const tabId = created.tabs[0].id;
  // A service worker idle for 30 s is stopped: an extension call now and then keeps this one
  // alive while the person decides.
  const keepAlive = setInterval(() => ext.runtime.getPlatformInfo(), 20000);
  return new Promise((resolve) => {
    function finish(value) {
      clearInterval(keepAlive);
      ext.tabs.onUpdated.removeListener(onUpdated);
      ext.windows.onRemoved.removeListener(onRemoved);
      resolve(value);
    }
    function onUpdated(id, change) {
      if (id !== tabId || !change.url || !until || !change.url.startsWith(until)) return;
      finish(new URLSearchParams(new URL(change.url).search));
      ext.windows.remove(created.id).catch(() => {});
    }
    function onRemoved(id) { if (id === created.id) finish(null); }
    ext.tabs.onUpdated.addListener(onUpdated);
    ext.windows.onRemoved.addListener(onRemoved);
  });
}

/** One Keyfob window at a time per site: a page cannot pile them up. */
const busy = new Set();
async function oneAtATime(origin, work) {
  if (busy.has(origin)) return failure("rate_limited", "a Keyfob window for this site is open already: answer it first");
  busy.add(origin);
  try { return await work(); } finally { busy.delete(origin); }
}

function b64url(text) {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

// MARK: nostr — the redirect flows /nip07.js uses, for the origin the browser reported.

function nostrFlow(origin, path, query) {
  return oneAtATime(origin, () => nostrWindow(origin, path, query));
}

async function nostrWindow(origin, path, query) {
  const { server } = await state.get();
  const rid = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  const callback = `${server}/callback.html?origin=${encodeURIComponent(origin)}&rid=${rid}`;
  let url = `${server}${path}?${new URLSearchParams(query(callback, rid))}`;
  // The server answers a remembered permission at once, redirecting to the callback with the
  // result; asked first without a window (with this browser's Keyfob sign-in, as the window
  // would be), a window opens only when the person must decide or use their passkey.
  try {
    const asked = await fetch(url, { credentials: "include", cache: "no-store" });
    if (asked.url.startsWith(`${server}/callback.html?`)) return { params: new URLSearchParams(new URL(asked.url).search) };
    if (asked.url.startsWith(`${server}/approve/`)) url = asked.url;  // the request it made waits there
  } catch { /* the window asks instead */ }
  const params = await keyfobWindow(url, `${server}/callback.html`);
  if (!params) return failure("user_rejected", "the Keyfob window was closed");
  return { params };
}

async function nostr(origin, method, params) {
  const { known } = await state.get();
  const link = async (action, query) => {
    const flow = await nostrFlow(origin, `/app/${action}`, (cb) => ({ ...query, cb, origin }));
    if (flow.error) return flow;
    if (flow.params.get("ok") !== "1") return failure(flow.params.get("code") || "user_rejected", flow.params.get("msg") || "the request was rejected");
    const pubkey = flow.params.get("pubkey");
    if (/^[0-9a-f]{64}$/.test(pubkey || "")) await state.set({ known: { ...known, [origin]: pubkey } });
    return { params: flow.params };
  };
  const nip155 = async (type, payloadName, pubkey, payload) => {
    const flow = await nostrFlow(origin, "/nostrsigner", (cb, rid) => ({
      type, [payloadName]: payload, pubkey, id: rid, client_url: origin,
      "x-success": cb, "x-error": `${cb}&failed=1`, "x-cancel": `${cb}&cancelled=1`,
    }));
    if (flow.error) return flow;
    if (flow.params.get("cancelled")) return failure("user_rejected", "the request was rejected");
    if (flow.params.get("failed")) return failure(flow.params.get("code") || "internal_error", flow.params.get("reason") || "the signer failed");
    return { result: flow.params.get("result") };
  };
  switch (method) {
    case "getPublicKey": {
      // Asked once per site (the key is public): later calls answer from what that site was given.
      if (known[origin]) return { result: known[origin] };
      const done = await link("pubkey", {});
      return done.error ? done : { result: done.params.get("pubkey") };
    }
    case "signEvent": {
      const event = params[0] || {};
      const unsigned = {
        kind: event.kind, content: event.content ?? "", tags: event.tags ?? [],
        created_at: event.created_at ?? Math.floor(Date.now() / 1000),
      };
      const done = await link("sign", { payload: b64url(JSON.stringify(unsigned)) });
      if (done.error) return done;
      return { result: { ...unsigned, id: done.params.get("id"), pubkey: done.params.get("pubkey"), sig: done.params.get("sig") } };
    }
    case "getRelays": return { result: {} };
    case "nip04.encrypt": return nip155("nip04_encrypt", "plaintext", params[0], params[1]);
    case "nip04.decrypt": return nip155("nip04_decrypt", "encryptedText", params[0], params[1]);
    case "nip44.encrypt": return nip155("nip44_encrypt", "plaintext", params[0], params[1]);
    case "nip44.decrypt": return nip155("nip44_decrypt", "encryptedText", params[0], params[1]);
    default: return failure("unsupported_type", `window.nostr has no ${String(method).slice(0, 40)}`);
  }
}

// MARK: Polkadot — the bridge's messages with the extension's session, for the reported origin.

async function bridge(origin, msgType, request) {
  const { status, body } = await api("/api/polkadot/message", { method: "POST", body: { msgType, request, url: `${origin}/` } });
  return status < 300 ? { body } : failure(body.error || "internal_error", body.message || `Keyfob answered ${status}`);
}

/** Asks, in a Keyfob window, whether `origin` may see the addresses, and which (the question Nova
 *  asks in its app). The person answers there, signed in to Keyfob in this browser, and that page
 *  connects the site itself: this extension's session cannot. Resolves true when it was connected. */
async function consent(origin, originName) {
  const query = new URLSearchParams({ origin, name: originName });
  const params = await keyfobWindow(`${SERVER}/extension-consent.html?${query}`, `${SERVER}/extension-consent.html?answer=`);
  return Boolean(params && params.get("answer") === "allow");
}

/** A signature Keyfob refused before showing it: a Keyfob window says so in plain words (one per
 *  site at a time), while the site gets the reason at once. */
const refusalShown = new Set();
async function showRefusal(origin, code) {
  if (refusalShown.has(origin) || code === "rate_limited") return;
  refusalShown.add(origin);
  const { server } = await state.get();
  const query = new URLSearchParams({ refused: code, site: origin });
  keyfobWindow(`${server}/polkadot-connect.html?${query}`, null).finally(() => refusalShown.delete(origin));
}

async function signing(origin, msgType, request) {
  const asked = await bridge(origin, msgType, request);
  if (asked.error) {
    showRefusal(origin, asked.error.code);
    return asked;
  }
  const pending = asked.body.pending;
  if (!pending) return { result: asked.body.result };
  const { server } = await state.get();
  const path = pending.resultUrl.startsWith(server) ? pending.resultUrl.slice(server.length) : `/api/polkadot/requests/${pending.id}`;
  let closed = false;
  keyfobWindow(pending.approvalUrl, null).then(() => { closed = true; });
  for (;;) {
    await new Promise((r) => setTimeout(r, 600));
    const { status, body } = await api(path);
    if (status !== 200) return failure(body.error || "request_not_found", body.message || "the request is gone");
    if (body.state !== "pending") {
      ext.windows.getAll({ populate: true }).then((windows) => {
        for (const w of windows) if (w.tabs.some((t) => (t.url || "").includes(`polkadot-approve.html?id=${pending.id}`))) ext.windows.remove(w.id);
      });
      if (body.outcome && body.outcome.result) return { result: body.outcome.result };
      return failure(body.state === "expired" ? "request_not_found" : "user_rejected", (body.outcome && body.outcome.error) || "Rejected");
    }
    if (closed) {
      await api(`/api/polkadot/requests/${pending.id}/reject`, { method: "POST", body: {} });
      return failure("user_rejected", "Rejected");
    }
  }
}

async function polkadot(origin, method, params) {
  switch (method) {
    case "enable": {
      const listed = await bridge(origin, "pub(accounts.list)", null);
      if (!listed.error) return { result: listed.body.result };
      if (listed.error.code !== "permission_denied") return listed;
      const allowed = await oneAtATime(origin, async () => ({ result: await consent(origin, String(params.originName || "").slice(0, 128)) }));
      if (allowed.error) return allowed;
      if (!allowed.result) return failure("user_rejected", "Rejected");
      const again = await bridge(origin, "pub(accounts.list)", null);
      return again.error ? again : { result: again.body.result };
    }
    case "accounts": {
      const listed = await bridge(origin, "pub(accounts.list)", null);
      return listed.error ? listed : { result: listed.body.result };
    }
    case "signPayload": return oneAtATime(origin, () => signing(origin, "pub(extrinsic.sign)", params));
    case "signRaw": return oneAtATime(origin, () => signing(origin, "pub(bytes.sign)", params));
    case "metadataList": {
      const listed = await bridge(origin, "pub(metadata.list)", null);
      return listed.error ? listed : { result: listed.body.result };
    }
    case "metadataProvide": {
      const provided = await bridge(origin, "pub(metadata.provide)", params);
      return provided.error ? provided : { result: true };
    }
    default: return failure("unsupported_type", `the Polkadot provider has no ${String(method).slice(0, 40)}`);
  }
}

// MARK: Messages from pages (through content.js) and from the popup

async function handle(message, sender) {
  const origin = originOf(sender);
  if (!origin) return failure("permission_denied", "only web pages ask Keyfob's extension");
  const { server, off } = await state.get();
  if (origin === new URL(server).origin) return failure("permission_denied", "Keyfob's own pages use your session directly");
  if (off.includes(origin)) return failure("permission_denied", `Keyfob is off for ${origin} (the extension's popup turns it on)`);
  let live = await connected();
  if (live.error && live.error.code === "unauthorized") {
    // Not connected (never, or signed out): Keyfob's own page opens to sign in and connect this
    // extension, and the site's call continues once it has; closed, the site hears why.
    if ((await signInWindow(origin)) === true) live = await connected();
  }
  if (live.error) return { error: live.error };
  if (message.kind === "nostr") return nostr(origin, message.method, Array.isArray(message.params) ? message.params : []);
  if (message.kind === "polkadot") return polkadot(origin, message.method, message.params || {});
  return failure("unsupported_type", "unknown request");
}

/** Calls waiting for a session from Keyfob's page (`signInWindow`). */
let awaitingSession = [];

/** One sign-in window at a time: every call that needs it waits for the same one. */
let signingIn = null;
function signInWindow(origin) {
  if (!signingIn) signingIn = openSignInWindow(origin).finally(() => { signingIn = null; });
  return signingIn;
}

/** Opens Keyfob's /extension.html in a window; true once it gave this extension a session
 *  (the window then closes), false when the person closed it. */
async function openSignInWindow(origin) {
  const url = `${SERVER}/extension.html?${new URLSearchParams({ for: origin })}`;
  const created = await ext.windows.create({ url, type: "popup", width: 440, height: 760 });
  const keepAlive = setInterval(() => ext.runtime.getPlatformInfo(), 20000);
  const connectedNow = await new Promise((resolve) => {
    function onRemoved(id) { if (id === created.id) done(false); }
    function done(value) {
      clearInterval(keepAlive);
      ext.windows.onRemoved.removeListener(onRemoved);
      awaitingSession = awaitingSession.filter((waiting) => waiting !== done);
      resolve(value);
    }
    awaitingSession.push(done);
    ext.windows.onRemoved.addListener(onRemoved);
  });
  // Closed before the call goes on, so its approval window never opens beside this one.
  if (connectedNow) await ext.windows.remove(created.id).catch(() => {});
  return connectedNow;
}

/** Whether `sender` is Keyfob's own /extension.html, in a tab (its content script). */
function fromConnectPage(sender) {
  const from = sender.origin || (sender.url && new URL(sender.url).origin);
  return Boolean(sender.tab) && from === SERVER && new URL(sender.url).pathname === "/extension.html";
}

const b64urlBytes = (bytes) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");

/** Connecting, without a token ever in a page: for Keyfob's /extension.html this extension draws
 *  a token (32 random bytes) and keeps it; the page gets only its SHA-256, the `claim` Keyfob
 *  stores the session under (sessions are stored by their token's hash). Once the page says the
 *  claim is registered, the token becomes this extension's session — after Keyfob answers to it.
 *  Works in Firefox too, which has no page-to-extension messaging. */
async function connecting(message, sender) {
  if (!fromConnectPage(sender)) return failure("permission_denied", "only Keyfob's own page connects this extension");
  const { claims = {} } = await ext.storage.session.get(["claims"]);
  if (message.kind === "claim") {
    const secret = crypto.getRandomValues(new Uint8Array(32));
    const token = b64urlBytes(secret);
    const claim = b64urlBytes(new Uint8Array(await crypto.subtle.digest("SHA-256", secret)));
    // A few pages may be open at once: each keeps its own claim (the newest four).
    const kept = Object.fromEntries([...Object.entries(claims).slice(-3), [claim, token]]);
    await ext.storage.session.set({ claims: kept });
    return { claim };
  }
  const token = typeof message.claim === "string" && Object.hasOwn(claims, message.claim) ? claims[message.claim] : null;
  if (typeof token !== "string") return failure("invalid_request", "this page's claim is not this extension's; reload it");
  // The new token is used only once Keyfob answers to it; a session it replaces is ended.
  let session = null;
  try {
    const response = await fetch(`${SERVER}/session`, { headers: { Authorization: `Bearer ${token}` }, credentials: "omit" });
    if (response.ok) session = await response.json();
  } catch { /* said below */ }
  if (!session) return failure("unauthorized", "Keyfob did not take this extension's claim; reload the page and try again");
  delete claims[message.claim];
  await ext.storage.session.set({ claims });
  const { token: previous } = await state.get();
  if (previous && previous !== token) {
    fetch(`${SERVER}/logout`, { method: "POST", headers: { Authorization: `Bearer ${previous}` }, credentials: "omit" }).catch(() => {});
  }
  await state.set({ token, username: session.username, known: {} });
  for (const waiting of awaitingSession.slice()) waiting(true);
  return { ok: true, username: session.username };
}

ext.runtime.onMessage.addListener((message, sender, reply) => {
  if (!message || typeof message !== "object") return false;
  const answer = message.kind === "claim" || message.kind === "claimed" ? connecting(message, sender) : handle(message, sender);
  answer.then(reply, (error) => reply(failure("internal_error", String(error && error.message || error))));
  return true;
});
