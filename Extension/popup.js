// The extension's popup: which account is connected (a session a Keyfob page gave it after a
// passkey), Keyfob on or off for the current site, and disconnecting. The server is the build's.
"use strict";
const $ = (id) => document.getElementById(id);
const status = (kind, text) => { $("status").textContent = text; $("status").dataset.status = kind; };

async function settings() {
  const [held, kept] = await Promise.all([ext.storage.session.get(["token", "username"]), ext.storage.local.get(["off"])]);
  return { server: new URL(KEYFOB_DEFAULT_SERVER).origin, token: held.token || null, username: held.username || null, off: kept.off || [] };
}

/** The site of the tab the popup was opened over. Opened as a page of its own (a tab), the site
 *  of the web page used last, Keyfob's own pages aside. */
async function currentSite() {
  const web = (tab) => {
    try {
      const origin = new URL(tab.url).origin;
      return /^https?:\/\//.test(origin) && origin !== new URL(KEYFOB_DEFAULT_SERVER).origin ? origin : null;
    } catch { return null; }
  };
  const [tab] = await ext.tabs.query({ active: true, currentWindow: true });
  if (tab && !tab.url.startsWith(location.origin)) return web(tab);
  const recent = (await ext.tabs.query({})).filter(web).sort((a, b) => (b.lastAccessed || 0) - (a.lastAccessed || 0));
  return recent.length ? web(recent[0]) : null;
}

/** A call to Keyfob with the extension's session. */
async function keyfob(path, init = {}) {
  const { server, token } = await settings();
  return fetch(`${server}${path}`, { ...init, headers: { ...(init.headers || {}), Authorization: `Bearer ${token}` }, credentials: "omit" });
}

/** What one grant lets a site do, in words. */
function grantWords(g) {
  const kind = Number.isInteger(g.kind) ? ` (kind ${g.kind})` : "";
  const words = {
    get_public_key: "read your public key", sign_event: `sign events${kind || " of any kind"}`,
    nip04_encrypt: "encrypt messages (NIP-04)", nip04_decrypt: "decrypt messages (NIP-04)",
    nip44_encrypt: "encrypt messages (NIP-44)", nip44_decrypt: "decrypt messages (NIP-44)",
    "polkadot.authorize": "see the Polkadot accounts you shared with it",
  }[g.method] || g.method.replace(/_/g, " ");
  const until = g.expiresAt ? `until ${new Date(g.expiresAt).toLocaleString()}` : "until you revoke it";
  return `${g.allow ? "May" : "Is refused:"} ${words}, ${until}`;
}

/** The grants a Keyfob session names with the site's client name (an https origin without its scheme). */
function grantsOf(site, grants) {
  const client = site.startsWith("https://") ? site.slice("https://".length) : site;
  return (grants || []).filter((g) => g.client === client && !g.method.startsWith("polkadot.account:"));
}

let shownGrants = [];

async function render() {
  const { server, token, off } = await settings();
  const host = new URL(server).host;
  $("server").textContent = host;
  let account = null;
  let reason = "";
  if (!token) {
    reason = "Sign in once with your passkey: sites can then ask Keyfob, and each request opens a Keyfob window.";
  } else {
    try {
      const response = await keyfob("/session");
      if (response.ok) account = await response.json();
      else if (response.status === 401) {
        await ext.storage.session.set({ token: null, username: null, known: {} });
        reason = "Your Keyfob session ended: you disconnected, signed out everywhere, or its 12 hours passed. Sign in again.";
      } else reason = `Keyfob answered ${response.status}; try again in a moment.`;
    } catch { reason = `${host} cannot be reached: check your connection, or whether the server is running.`; }
  }
  $("state").textContent = account ? `Connected to ${host} as ${account.username}.` : `Not connected to ${host}.`;
  $("reason").textContent = reason;
  $("reason").hidden = Boolean(account) || !reason;
  $("signin").hidden = Boolean(account);
  $("disconnect").hidden = !account;
  // Shown whenever connected: it locks every session of the account, not only this one (which never signs).
  $("lock").hidden = $("lock-hint").hidden = !account;
  const site = await currentSite();
  $("site").hidden = !site;
  if (site) {
    $("site-name").textContent = new URL(site).host;
    $("site-on").checked = !off.includes(site);
    shownGrants = account ? grantsOf(site, account.siteGrants) : [];
    $("site-may-title").hidden = !account;
    $("site-may-title").textContent = shownGrants.length
      ? `What ${new URL(site).host} may do without asking:` : `${new URL(site).host} asks you each time: nothing was allowed in advance.`;
    $("site-may").hidden = shownGrants.length === 0;
    $("site-may").replaceChildren(...shownGrants.map((g) => {
      const li = document.createElement("li");
      li.textContent = grantWords(g);
      return li;
    }));
    $("revoke-site").hidden = shownGrants.length === 0;
  }
}

$("revoke-site").addEventListener("click", async () => {
  const site = await currentSite();
  let failed = 0;
  for (const g of shownGrants) {
    try { if (!(await keyfob(`/api/signer/grants/${encodeURIComponent(g.id)}`, { method: "DELETE" })).ok) failed += 1; } catch { failed += 1; }
  }
  // The public key this extension kept for the site goes too: it asks again.
  const { known } = await ext.storage.session.get(["known"]);
  const kept = { ...(known || {}) };
  delete kept[site];
  await ext.storage.session.set({ known: kept });
  status(failed ? "error" : "ok", failed ? "Some of it could not be revoked; open Keyfob's account page." : `${new URL(site).host} asks you again for everything.`);
  render();
});

$("lock").addEventListener("click", async () => {
  let ok = false;
  try { ok = (await keyfob("/api/signer/lock", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" })).ok; } catch { /* said below */ }
  status(ok ? "ok" : "error", ok ? "Locked on every device: the next signature asks for your passkey." : "Keyfob could not lock now; try on its account page.");
  render();
});

$("signin").addEventListener("click", async () => {
  const { server } = await settings();
  // Keyfob's own page signs in with the passkey and hands this extension its session.
  await ext.tabs.create({ url: `${server}/extension.html` });
  window.close();
});

$("disconnect").addEventListener("click", async () => {
  try { await keyfob("/logout", { method: "POST" }); } catch { /* ended here anyway */ }
  await ext.storage.session.set({ token: null, username: null, known: {} });
  status("ok", "Disconnected: sites get nothing from Keyfob until you sign in again.");
  render();
});

$("site-on").addEventListener("change", async () => {
  const site = await currentSite();
  const { off } = await settings();
  const next = $("site-on").checked ? off.filter((o) => o !== site) : [...new Set([...off, site])];
  await ext.storage.local.set({ off: next });
  status("ok", $("site-on").checked ? `Keyfob answers ${new URL(site).host} again.` : `${new URL(site).host} gets nothing from Keyfob now.`);
});

render();
