// The extension's popup: which account is connected (a session a Keyfob page gave it after a
// passkey), Keyfob on or off for the current site, and disconnecting. The server is the build's.
"use strict";
const $ = (id) => document.getElementById(id);
const status = (kind, text) => { $("status").textContent = text; $("status").dataset.status = kind; };

async function settings() {
  const [held, kept] = await Promise.all([chrome.storage.session.get(["token", "username"]), chrome.storage.local.get(["off"])]);
  return { server: new URL(KEYFOB_DEFAULT_SERVER).origin, token: held.token || null, username: held.username || null, off: kept.off || [] };
}

async function currentSite() {
  const [tab] = await chrome.tabs.query({ active: true, currentWindow: true });
  try {
    const origin = new URL(tab.url).origin;
    return /^https?:\/\//.test(origin) ? origin : null;
  } catch { return null; }
}

async function render() {
  const { server, token, off } = await settings();
  $("server").textContent = new URL(server).host;
  let account = null;
  if (token) {
    try {
      const response = await fetch(`${server}/session`, { headers: { Authorization: `Bearer ${token}` }, credentials: "omit" });
      if (response.ok) account = await response.json();
      else if (response.status === 401) await chrome.storage.session.set({ token: null, username: null, known: {} });
    } catch { status("error", `${server} cannot be reached.`); }
  }
  $("state").textContent = account ? `Connected to ${new URL(server).host} as ${account.username}.` : `Not connected to ${new URL(server).host}.`;
  $("signin").hidden = Boolean(account);
  $("disconnect").hidden = !account;
  const site = await currentSite();
  $("site").hidden = !site || site === new URL(server).origin;
  if (site) {
    $("site-name").textContent = new URL(site).host;
    $("site-on").checked = !off.includes(site);
  }
}

$("signin").addEventListener("click", async () => {
  const { server } = await settings();
  // Keyfob's own page signs in with the passkey and hands this extension its session.
  await chrome.tabs.create({ url: `${server}/extension.html` });
  window.close();
});

$("disconnect").addEventListener("click", async () => {
  const { server, token } = await settings();
  try { await fetch(`${server}/logout`, { method: "POST", headers: { Authorization: `Bearer ${token}` }, credentials: "omit" }); } catch { /* ended here anyway */ }
  await chrome.storage.session.set({ token: null, username: null, known: {} });
  status("ok", "Disconnected: sites get nothing from Keyfob until you sign in again.");
  render();
});

$("site-on").addEventListener("change", async () => {
  const site = await currentSite();
  const { off } = await settings();
  const next = $("site-on").checked ? off.filter((o) => o !== site) : [...new Set([...off, site])];
  await chrome.storage.local.set({ off: next });
  status("ok", $("site-on").checked ? `Keyfob answers ${new URL(site).host} again.` : `${new URL(site).host} gets nothing from Keyfob now.`);
});

render();
