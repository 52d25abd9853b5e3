// The page a client's nostrconnect:// URL opens (`/connect/<nostrconnect URL>`, advertised in
// /.well-known/nostr.json): shows what the client says it is and asks, then connects it.
"use strict";
const $ = (id) => document.getElementById(id);
const raw = decodeURIComponent(location.pathname.slice("/connect/".length));

function row(name, value) {
  const dt = document.createElement("dt");
  dt.textContent = name;
  const dd = document.createElement("dd");
  dd.textContent = value;
  $("details").append(dt, dd);
}

function show() {
  let url;
  try { url = new URL(raw); } catch { url = null; }
  if (!url || url.protocol !== "nostrconnect:") {
    $("title").textContent = "This link cannot be used";
    $("who").textContent = "It does not carry a nostrconnect:// URL. Copy the URL from your nostr client and paste it on your account page.";
    return false;
  }
  const params = url.searchParams;
  // The name the account page and the approval page will call it too.
  const key = url.host.toLowerCase();
  $("client").textContent = bunkerClientName(params.get("name"), key);
  $("client-url").textContent = [params.get("name") ? bunkerClientKey(key) : "", params.get("url") || ""].filter(Boolean).join(" · ");
  row("Relays", params.getAll("relay").join("\n") || "(none)");
  row("Asks for", params.get("perms") ? params.get("perms").split(",").join(", ") : "nothing in advance");
  $("client-card").hidden = false;
  return true;
}

async function connect() {
  const session = await api("/session").catch(() => null);
  if (!session || session.signerLocked) {
    showStatus("", session ? "Unlock your signer with your passkey…" : "Sign in with your passkey…");
    await unlockSigner();
  }
  const reply = await api("/api/signer/nostrconnect", { method: "POST", body: { url: raw } });
  showStatus("ok", `Connected. Go back to ${reply.name || "the client"}: it now signs in with your key, and asks here for what you have not allowed.`);
  $("connect").disabled = true;
}

if (show()) {
  // Already signed in with an unlocked signer: one step less.
  api("/session").then((session) => { if (!session.signerLocked) $("connect").textContent = "Connect"; }).catch(() => {});
  $("connect").addEventListener("click", async () => {
    try { await connect(); } catch (error) { showError(error); }
  });
}
