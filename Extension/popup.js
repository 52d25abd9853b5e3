// The extension's popup: which Keyfob server, which account is connected (a session a Keyfob page
// gave it after a passkey), Keyfob on or off for the current site, and disconnecting.
"use strict";
const $ = (id) => document.getElementById(id);
const status = (kind, text) => { $("status").textContent = text; $("status").dataset.status = kind; };

async function settings() {
  const stored = await chrome.storage.local.get(["server", "token", "username", "off"]);
  return { server: stored.server || KEYFOB_DEFAULT_SERVER, token: stored.token || null, username: stored.username || null, off: stored.off || [] };
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
  $("server").value = server;
  let account = null;
  if (token) {
    try {
      const response = await fetch(`${server}/session`, { headers: { Authorization: `Bearer ${token}` }, credentials: "omit" });
      if (response.ok) account = await response.json();
      else if (response.status === 401) await chrome.storage.local.set({ token: null, username: null });
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
  await chrome.storage.local.set({ token: null, username: null, known: {} });
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

$("save").addEventListener("click", async () => {
  let origin;
  try { origin = new URL($("server").value.trim()).origin; } catch { status("error", "Write the server's address, like https://keyfob.example."); return; }
  // Another server: the old session means nothing there.
  await chrome.storage.local.set({ server: origin, token: null, username: null, known: {} });
  status("ok", `Keyfob server: ${origin}. Sign in to connect.`);
  render();
});

render();
