// The account page: the nostr key and the signer's lock, a test note, passkeys, backup, history.
"use strict";
let account = null;
let lockTimer = null;
let historyCursor = null;
/** Connected bunker clients' names by their pubkey, for the history's sentences. */
let bunkerNames = {};
let passkeys = [];

const $ = (id) => document.getElementById(id);

function when(date) {
  return date ? new Date(date).toLocaleString() : "never";
}

function isUnlocked() {
  return account && !account.signerLocked && new Date(account.signerUnlockedUntil) > new Date();
}

/** The button pressed last: its action's result is shown right after it, and it is busy meanwhile. */
let pressed = null;

/** Moves the one status line next to `button` (after the row or list that holds it), so a result
 *  appears where the person is looking, not a page away. Tests and screen readers keep #status. */
function placeStatusNear(button) {
  const status = $("status");
  const anchor = button.closest("ul, .actions, .npub-row, .row") || button;
  if (anchor.nextElementSibling !== status) anchor.after(status);
  status.textContent = "";
  status.dataset.status = "";
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button");
  if (!button || button.id === "signout") return;
  pressed = button;
  placeStatusNear(button);
}, true);

/** Runs `action` with the pressed button busy. Step up on demand: a locked signer is unlocked with
 *  the passkey (one prompt) and the action runs again; other errors are shown beside the button. */
async function guarded(action) {
  const button = pressed;
  if (button) { button.disabled = true; button.setAttribute("aria-busy", "true"); }
  try {
    try {
      await action();
    } catch (error) {
      if (error.code !== "signer_locked") throw error;
      const sealed = account && account.protection && account.protection.level === "passkeys";
      const names = sealed ? sealingNames() : [];
      showStatus("", names.length ? `Your signer is locked: unlock it with one of the passkeys that seal your key (${names.join(", ")})…`
        : "Your signer is locked: unlock it with your passkey…");
      await unlockSigner();
      await refreshSession();
      await action();
    }
  } catch (error) {
    if (error.code === "signer_locked") await refreshSession();
    showError(error);
  } finally {
    if (button) { button.disabled = false; button.removeAttribute("aria-busy"); }
  }
}

async function refreshSession() {
  try {
    account = await api("/session");
  } catch (error) {
    location.replace("/");
    return false;
  }
  // An anonymous account is called what the passkey prompt calls it ("Keyfob account 92ce", the
  // start of its id); its full id is beside it.
  const shownName = account.isAnonymous ? `Keyfob account ${account.username.replace(/^anon-/, "").slice(0, 4)}` : account.username;
  $("username").textContent = shownName;
  $("anonymous").textContent = `(anonymous: ${account.username})`;
  $("anonymous").hidden = !account.isAnonymous;
  $("npub").textContent = account.npub;
  drawQR($("npub-qr"), account.npub);
  renderLock();
  renderProtection();
  if (window.PublicKeyCredential && PublicKeyCredential.signalCurrentUserDetails) {
    PublicKeyCredential.signalCurrentUserDetails({
      // The name the passkey prompt shows is the one this page shows (#56).
      rpId: location.hostname, userId: account.userId, name: shownName, displayName: shownName,
    }).catch(() => {});
  }
  return true;
}

function renderLock() {
  clearTimeout(lockTimer);
  const unlocked = isUnlocked();
  $("signer-state").dataset.locked = String(!unlocked);
  $("unlock").hidden = unlocked;
  $("lock").hidden = !unlocked;
  if (unlocked) {
    const until = new Date(account.signerUnlockedUntil);
    $("signer-text").textContent = `Signer unlocked until ${until.toLocaleTimeString()}.`;
    lockTimer = setTimeout(() => { account.signerLocked = true; renderLock(); }, until - new Date() + 500);
  } else if (account.protection && account.protection.signerSealed) {
    const names = sealingNames();
    const which = names.length ? `one of: ${names.join(", ")}` : "a passkey that seals it";
    const waiting = account.waitingForUnlock || 0;
    $("signer-text").textContent = `Signer locked. Your key is sealed by your passkeys: unlock it with ${which}.`
      + (waiting ? ` ${counted(waiting, "request")} from your NIP-46 apps ${waiting === 1 ? "waits" : "wait"} for it.` : "");
  } else {
    $("signer-text").textContent = "Signer locked. Apps can't sign until you unlock it with a passkey.";
  }
}

/** Names of the passkeys that can open a sealed key. */
function sealingNames() {
  const ids = new Set((account && account.protection && account.protection.sealingCredentials) || []);
  return passkeys.filter((c) => ids.has(c.id)).map((c) => c.name || c.authenticatorName);
}

function renderProtection() {
  const p = account.protection || { level: "server", summary: "server-protected", sealedBy: 0 };
  const sealed = p.level === "passkeys";
  $("protection-summary").textContent = sealed ? `Sealed by ${counted(p.sealedBy, "passkey")}` : "Server-protected";
  // One sealing passkey is a risk the page warns about (losing it loses the key): not shown as "ok".
  $("protection-summary").dataset.level = sealed && p.sealedBy === 1 ? "passkeys-one" : p.level;
  $("protection-explain").textContent = sealed
    ? "Only a sign-in with one of these passkeys opens your key, for the unlock window. Keyfob's database and master key alone cannot."
    : "Keyfob keeps your key encrypted under its master key. Seal it with your passkeys to take even the operator out of reach.";
  $("seal-start").hidden = sealed;
  $("sealed-actions").hidden = !sealed;
  noteSecurity();
}

function noteSecurity() {
  const sealed = account.protection && account.protection.level === "passkeys";
  const count = passkeys.length ? `${counted(passkeys.length, "passkey")} · ` : "";
  setSectionNote("security-note", count + (sealed ? "key sealed by passkeys" : "key server-protected"));
}

async function loadPasskeys() {
  const { credentials } = await api("/account/credentials");
  passkeys = credentials;
  noteSecurity();
  const sealed = account.protection && account.protection.level === "passkeys";
  const list = $("passkeys");
  list.replaceChildren(...credentials.map((c) => {
    const label = c.name || c.authenticatorName;
    const item = document.createElement("li");
    item.className = "passkey";
    item.dataset.id = c.id;
    const icon = document.createElement("img");
    icon.src = `/icons/${encodeURIComponent(c.icon)}.svg`;
    icon.alt = "";
    icon.width = icon.height = 28;
    const text = document.createElement("div");
    text.className = "passkey-text";
    text.innerHTML = `<div class="passkey-name"></div><div class="meta"></div>`;
    text.querySelector(".passkey-name").textContent = label;
    const facts = [c.name ? c.authenticatorName : null, c.createdOn ? `made on ${c.createdOn}` : null,
                   `created ${when(c.createdAt)}`, `last used ${when(c.lastUsedAt)}`, c.backedUp ? "synced" : null];
    text.querySelector(".meta").textContent = facts.filter(Boolean).join(" · ");
    const here = deviceCredentials();
    const tags = [c.current ? "Signed in with this one" : null, here.has(c.id) ? "This device" : null].filter(Boolean);
    if (tags.length) {
      const badges = document.createElement("div");
      badges.className = "passkey-badges";
      for (const tag of tags) {
        const badge = document.createElement("span");
        badge.className = "badge";
        badge.textContent = tag;
        badges.append(badge);
      }
      text.append(badges);
    }
    if (sealed) {
      const badge = document.createElement("div");
      badge.className = c.sealsKey ? "seal-badge" : "seal-badge none";
      badge.textContent = c.sealsKey ? "Opens your sealed key"
        : c.canSeal === false ? "Cannot open your sealed key: its device cannot seal keys" : "Cannot open your sealed key";
      text.append(badge);
    }
    const actions = document.createElement("div");
    actions.className = "passkey-actions";
    // A passkey whose browser said it has no PRF can never seal: no button that can only fail.
    if (sealed && !c.sealsKey && c.canSeal !== false) {
      const join = document.createElement("button");
      join.className = "link neutral";
      join.type = "button";
      join.textContent = "Add to seal";
      join.setAttribute("aria-label", `Let passkey ${label} open your sealed key`);
      join.addEventListener("click", () => guarded(() => sealWith([c.id], `“${label}” now opens your sealed key.`)));
      actions.append(join);
    }
    const rename = document.createElement("button");
    rename.className = "link neutral";
    rename.type = "button";
    rename.textContent = "Rename";
    rename.setAttribute("aria-label", `Rename passkey ${label}`);
    rename.addEventListener("click", () => guarded(async () => {
      const name = await askInPage(item, { text: "Name this passkey, as you would recognise it (for example: work laptop).", field: { label: "Name", value: c.name || "" }, confirm: "Save" });
      if (name === null) return;
      await api(`/account/credentials/${encodeURIComponent(c.id)}`, { method: "PATCH", body: { name } });
      showStatus("ok", "Passkey renamed.");
      await loadPasskeys();
    }));
    const remove = document.createElement("button");
    remove.className = "link";
    remove.type = "button";
    remove.textContent = "Remove";
    remove.setAttribute("aria-label", `Remove passkey ${label}`);
    remove.disabled = credentials.length < 2;
    remove.addEventListener("click", () => guarded(async () => {
      const warning = c.current
        ? `Remove the passkey "${label}"? You are signed in with it: removing it signs you out here, and you can no longer sign in with it.`
        : `Remove the passkey "${label}"? You can no longer sign in with it, and its sessions end.`;
      if (!(await askInPage(item, { text: warning, confirm: "Remove it", danger: true }))) return;
      const confirmation = await confirmAction("passkey.remove", c.id);
      await api(`/account/credentials/${encodeURIComponent(c.id)}`, { method: "DELETE", body: { confirmation } });
      showStatus("ok", "Passkey removed.");
      if (await refreshSession()) await loadPasskeys();
    }));
    actions.append(rename, remove);
    item.append(icon, text, actions);
    return item;
  }));
  list.dataset.count = String(credentials.length);
  $("seal-all").hidden = joinable().length === 0;
  $("last-passkey").hidden = credentials.length !== 1;
  const dismissed = localStorage.getItem("keyfob-nudge-dismissed") === account.userId;
  $("nudge").hidden = credentials.length !== 1 || dismissed;
  // Tell the passkey manager which passkeys still exist, so it stops offering removed ones (Signal API).
  if (window.PublicKeyCredential && PublicKeyCredential.signalAllAcceptedCredentials) {
    PublicKeyCredential.signalAllAcceptedCredentials({
      rpId: location.hostname, userId: account.userId, allAcceptedCredentialIds: credentials.map((c) => c.id),
    }).catch(() => {});
  }
}

/** Adds a passkey; when this device has one already, offers the other routes instead of a dead end. */
async function addPasskey(hints) {
  showStatus("", "Creating a passkey…");
  try {
    showStatus("", "First confirm with a passkey you already have…");
    const added = await registerPasskey(account.username, hints, true, false, $("add-name").value.trim());
    $("add-name").value = "";
    $("add-elsewhere").hidden = true;
    // The nudge card goes, and the status line with it unless it moves out first.
    if ($("nudge").contains($("status"))) $("nudge").after($("status"));
    $("nudge").hidden = true;
    showStatus("ok", added.sealsKey !== false ? "Passkey added."
      : added.canSeal === false ? "Passkey added. It signs you in, but its device cannot seal keys, so it cannot open your sealed key."
      : "Passkey added. It cannot open your sealed key yet: press “Add to seal” beside it.");
    await refreshSession();
    await loadPasskeys();
  } catch (error) {
    if (error && error.name === "InvalidStateError") {
      $("add-elsewhere").hidden = false;
      showStatus("error", "This device already has a passkey for this account: choose another device below.");
      $("add-phone").focus();
    } else if (error.code === "signer_locked") {
      await refreshSession();
      showStatus("error", "Adding a passkey needs an unlocked signer: unlock it with your passkey, then try again.");
    } else {
      showError(error);
    }
  }
}

/** Kinds people know by name (the approval page's list). */
const kindWords = {
  0: "your profile", 1: "a note", 3: "your follow list", 4: "a direct message", 5: "a deletion request", 6: "a repost",
  7: "a reaction", 16: "a repost", 1111: "a comment", 9734: "a zap request", 10002: "your relay list",
  22242: "a relay login", 24133: "a remote-signer message", 27235: "an HTTP login", 30023: "an article", 30078: "app data",
};

/** Who asked: you (this page, the REST API), a bunker client by its name when known, or the app. */
function historyActor(e) {
  if (e.client === "api" || e.client === "account") return "You";
  if (e.client.startsWith("nip46:")) {
    return bunkerClientName(bunkerNames[e.client.slice(6)], e.client.slice(6));
  }
  return e.client;
}

/** One history entry as a sentence: "Coracle signed a note", "You refused app.example's request to
 *  decrypt a message", "primal could not sign a note". The §7 code stays behind "Details". */
function historySentence(e) {
  if (changeWords[e.method]) return `${changeWords[e.method]}${e.outcome === "approved" ? "" : ` (${e.outcome})`}`;
  const thing = e.kind !== undefined ? (kindWords[e.kind] || `a kind ${e.kind} event`) : null;
  const [done, asked] = {
    sign_event: [`signed ${thing || "an event"}`, `sign ${thing || "an event"}`],
    get_public_key: ["read your public key", "read your public key"],
    nip04_encrypt: ["encrypted a message (NIP-04)", "encrypt a message"],
    nip04_decrypt: ["decrypted a message (NIP-04)", "decrypt a message"],
    nip44_encrypt: ["encrypted a message", "encrypt a message"],
    nip44_decrypt: ["decrypted a message", "decrypt a message"],
    decrypt_zap_event: ["opened a private zap", "open a private zap"],
    "polkadot.sign_payload": ["signed a Polkadot transaction", "sign a Polkadot transaction"],
    "polkadot.sign_raw": ["signed a Polkadot message", "sign a Polkadot message"],
    "polkadot.authorize": ["connected to your Polkadot accounts", "connect to your Polkadot accounts"],
    "polkadot.account_added": ["added a Polkadot account", "add a Polkadot account"],
    "polkadot.account_removed": ["removed a Polkadot account", "remove a Polkadot account"],
    "polkadot.export": ["exported a Polkadot account (JSON backup)", "export a Polkadot account"],
    "polkadot.accept_unverified": ["changed whether a Polkadot account signs unchecked transactions", "change whether a Polkadot account signs unchecked transactions"],
  }[e.method] || [e.method.replace(/_/g, " "), e.method.replace(/_/g, " ")];
  const who = historyActor(e);
  if (e.outcome === "approved") return `${who} ${done}`;
  if (e.outcome === "rejected") return who === "You" ? `You refused to ${asked}` : `You refused ${who}'s request to ${asked}`;
  return `${who} could not ${asked}`;
}

async function loadHistory(more = false) {
  const query = new URLSearchParams({ limit: "20" });
  if (more && historyCursor) query.set("before", historyCursor);
  const page = await api(`/api/signer/history?${query}`);
  historyCursor = page.next || null;
  const items = page.entries.map((e) => {
    const item = document.createElement("li");
    item.dataset.outcome = e.outcome;
    item.textContent = `${historySentence(e)} · ${new Date(e.at).toLocaleString()}`;
    if (e.code) item.append(codeDetails(e.code));
    return item;
  });
  if (more) $("history").append(...items); else $("history").replaceChildren(...items);
  if (!more) showRecentChanges(page.entries);
  if (!items.length && !more) {
    const empty = document.createElement("li");
    empty.className = "hint";
    empty.textContent = "Nothing signed yet.";
    $("history").append(empty);
  }
  $("more").hidden = !historyCursor;
}

/** Account changes of the last two weeks, in words, at the top of the page: a change the user did
 *  not make is what they must notice first. */
const changeWords = {
  add_passkey: "A passkey was added", remove_passkey: "A passkey was removed",
  export_key: "Your key was exported (a backup was made)", import_key: "Your key was replaced (imported)",
  seal_key: "Your key's seal changed", unseal_key: "Your key was unsealed", revoke_sessions: "Every device was signed out",
};
function showRecentChanges(entries) {
  const since = Date.now() - 14 * 24 * 3600 * 1000;
  const items = entries.filter((e) => changeWords[e.method] && e.outcome === "approved" && new Date(e.at).getTime() > since)
    .map((e) => {
      const item = document.createElement("li");
      item.textContent = `${changeWords[e.method]} · ${new Date(e.at).toLocaleString()}`;
      return item;
    });
  $("changes").replaceChildren(...items);
  $("changes-card").hidden = items.length === 0;
}

/** Fills `list` with one line per entry and a button that ends it, or `emptyText`. */
function renderRevocable(list, entries, emptyText) {
  const items = entries.map(({ text, button, label, action }) => {
    const item = document.createElement("li");
    item.className = "grant";
    const span = document.createElement("span");
    span.textContent = text;
    const revoke = document.createElement("button");
    revoke.type = "button";
    revoke.className = "link";
    revoke.textContent = button;
    revoke.setAttribute("aria-label", label);
    revoke.addEventListener("click", () => guarded(action));
    item.append(span, revoke);
    return item;
  });
  if (!items.length) {
    const empty = document.createElement("li");
    empty.className = "hint";
    empty.textContent = emptyText;
    items.push(empty);
  }
  $(list).replaceChildren(...items);
}

/** What one grant lets an app do, in words ("sign a note", "decrypt messages"). */
function grantWords(g, shared = 0) {
  if (g.method === "polkadot.authorize") {
    return `see ${shared ? `${counted(shared, "Polkadot address")} you chose` : "your Polkadot addresses"} (signing still asks)`;
  }
  if (g.method === "sign_event") return g.kind !== undefined ? `sign ${kindWords[g.kind] || `kind ${g.kind} events`}` : "sign events";
  return {
    get_public_key: "read your public key", nip04_encrypt: "encrypt messages (NIP-04)", nip04_decrypt: "decrypt messages (NIP-04)",
    nip44_encrypt: "encrypt messages", nip44_decrypt: "decrypt messages", decrypt_zap_event: "open private zaps",
  }[g.method] || g.method.replace(/_/g, " ");
}

/** "sign notes and encrypt messages until you revoke it", "sign reactions until 15:04": each grant
 *  with its own end (an hour's grant never reads as one without end beside another that has none). */
function byDuration(grants) {
  const byEnd = new Map();
  // The addresses a site was given are one grant each: said once, in the connection's words.
  const shared = grants.filter((g) => g.method.startsWith("polkadot.account:")).length;
  for (const g of grants) {
    if (g.method.startsWith("polkadot.account:")) continue;
    const end = g.expiresAt ? `until ${new Date(g.expiresAt).toLocaleString()}` : "until you revoke it";
    byEnd.set(end, [...(byEnd.get(end) || []), grantWords(g, shared)]);
  }
  return [...byEnd].map(([end, words]) => `${words.join(", ")} ${end}`);
}

/** One row per app: what it may do without asking, what it is refused, and one Revoke for all of it. */
async function loadGrants() {
  const { grants } = await api("/api/signer/grants");
  const byClient = new Map();
  for (const g of grants) byClient.set(g.client, [...(byClient.get(g.client) || []), g]);
  setSectionNote("activity-note", byClient.size ? `${counted(byClient.size, "app")} allowed · history` : "no app allowed yet · history");
  renderRevocable("grants", [...byClient].map(([client, list]) => {
    const allowed = byDuration(list.filter((g) => g.allow));
    const refused = byDuration(list.filter((g) => !g.allow));
    const parts = [];
    if (allowed.length) parts.push(`may ${allowed.join("; may ")}`);
    if (refused.length) parts.push(`is refused: ${refused.join("; ")}`);
    return {
      text: `${clientLabel(client)} ${parts.join("; ")}`,
      button: "Revoke", label: `Revoke everything ${client} may do`,
      action: async () => {
        for (const g of list) await api(`/api/signer/grants/${encodeURIComponent(g.id)}`, { method: "DELETE" });
        showStatus("ok", `${clientLabel(client)} will ask again.`);
        loadGrants();
      },
    };
  }), "No app can sign without asking.");
}

/** A client as people read it: a bunker client by its name when it gave one, else its key's start. */
function clientLabel(client, name) {
  if (client.startsWith("nip46:")) return bunkerClientName(name || bunkerNames[client.slice(6)], client.slice(6));
  return name ? `${name} (unverified)` : client;
}

async function loadWaiting() {
  const { requests } = await api("/api/requests");
  $("waiting-card").hidden = requests.length === 0;
  $("waiting").replaceChildren(...requests.map((r) => {
    const item = document.createElement("li");
    const what = r.method === "sign_event" ? `sign a ${r.kindName} (kind ${r.kind})` : r.method.replace(/_/g, " ");
    const link = document.createElement("a");
    link.href = `/approve/${encodeURIComponent(r.id)}`;
    link.textContent = "Review";
    item.append(`${clientLabel(r.client, r.clientName)} wants to ${what} · ${when(r.createdAt)} `, link);
    return item;
  }));
}

/** Draws `text` as a QR code on `canvas` (error correction M, black on white, a 4-module quiet zone). */
function drawQR(canvas, text) {
  const code = qrcode(0, "M");
  code.addData(text, "Byte");
  code.make();
  const modules = code.getModuleCount();
  const scale = Math.max(2, Math.floor(240 / (modules + 8)));
  canvas.width = canvas.height = (modules + 8) * scale;
  const context = canvas.getContext("2d");
  context.fillStyle = "#fff";
  context.fillRect(0, 0, canvas.width, canvas.height);
  context.fillStyle = "#000";
  for (let row = 0; row < modules; row++) {
    for (let column = 0; column < modules; column++) {
      if (code.isDark(row, column)) context.fillRect((column + 4) * scale, (row + 4) * scale, scale, scale);
    }
  }
}

async function showBunker(rotate = false) {
  const reply = await api(rotate ? "/api/signer/bunker/rotate" : "/api/signer/bunker", rotate ? { method: "POST", body: {} } : {});
  $("bunker-url").value = reply.url;
  drawQR($("bunker-qr"), reply.url);
  $("bunker-expiry").textContent = `Works once, until ${new Date(reply.secretExpiresAt * 1000).toLocaleTimeString()}.`;
  $("bunker").hidden = false;
  // Shown: "New URL" beside it makes another; the show button has done its work.
  $("bunker-show").hidden = true;
}

let shownClients = null;

async function loadBunkerClients({ onlyIfChanged = false } = {}) {
  const { clients } = await api("/api/signer/bunker/clients");
  // Polled with the waiting requests, so a client that connects shows up beside its request;
  // redrawn only when the list changed (a button being pressed is not replaced under the pointer).
  const seen = JSON.stringify(clients);
  if (onlyIfChanged && seen === shownClients) return;
  shownClients = seen;
  bunkerNames = Object.fromEntries(clients.filter((c) => c.name).map((c) => [c.pubkey, c.name]));
  renderRevocable("bunker-clients", clients.map((c) => {
    const name = bunkerClientName(c.name, c.pubkey);
    return {
      text: `${name}${c.name ? ` · ${bunkerClientKey(c.pubkey)}` : ""} · connected ${when(c.createdAt * 1000)} · last used ${c.lastUsedAt ? when(c.lastUsedAt * 1000) : "never"}`,
      button: "Disconnect", label: `Disconnect ${name}`,
      action: async () => {
        await api(`/api/signer/bunker/clients/${encodeURIComponent(c.pubkey)}`, { method: "DELETE" });
        showStatus("ok", `${name} is disconnected: it gets no answer any more.`);
        loadBunkerClients();
      },
    };
  }), "No client is connected.");
}

$("bunker-show").addEventListener("click", () => guarded(() => showBunker(false)));
$("nostrconnect").addEventListener("click", () => guarded(async () => {
  if ($("nostrconnect-url").value.trim().toLowerCase().startsWith("bunker://")) {
    showStatus("error", "That is a bunker URL, the kind Keyfob gives a client (“Show my bunker URL” above). "
      + "Paste it into the client's remote-signer login; this field takes the nostrconnect:// URL a client shows.");
    return;
  }
  const reply = await api("/api/signer/nostrconnect", { method: "POST", body: { url: $("nostrconnect-url").value.trim() } });
  $("nostrconnect-url").value = "";
  showStatus("ok", `${reply.name || "The client"} is connected: go back to it.`);
  loadBunkerClients();
}));
$("bunker-rotate").addEventListener("click", () => guarded(async () => {
  await showBunker(true);
  showStatus("ok", "A new bunker URL; the old one no longer works.");
}));

/** A copy button: `text()` to the clipboard, "Copied" on the button; where the browser refuses the
 *  clipboard, `select()` selects the text and the line beside says how to copy it. */
function copyOnClick(button, text, { copied, selected, select }) {
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text());
      showStatus("ok", copied);
      copiedOn(button);
    } catch {
      select();
      showStatus("", `Press Ctrl+C (or long-press) to copy the selected ${selected}.`);
    }
  });
}

copyOnClick($("bunker-copy"), () => $("bunker-url").value,
  { copied: "Bunker URL copied.", selected: "URL", select: () => $("bunker-url").select() });
copyOnClick($("copy-npub"), () => account.npub,
  { copied: "npub copied.", selected: "npub", select: () => getSelection().selectAllChildren($("npub")) });
copyOnClick($("ncryptsec-copy"), () => $("ncryptsec").textContent,
  { copied: "Backup copied.", selected: "backup", select: () => getSelection().selectAllChildren($("ncryptsec")) });

/** The copy button itself says "Copied" for two seconds: the result where the finger is. */
function copiedOn(button) {
  const label = button.dataset.label || button.textContent;
  button.dataset.label = label;
  button.textContent = "Copied";
  clearTimeout(button.copiedTimer);
  button.copiedTimer = setTimeout(() => { button.textContent = label; }, 2000);
}

$("unlock").addEventListener("click", () => guarded(async () => {
  showStatus("", account.protection && account.protection.level === "passkeys"
    ? "Waiting for one of the passkeys that seal your key…" : "Waiting for your passkey…");
  await unlockSigner();
  await refreshSession();
  showStatus("ok", "Signer unlocked.");
}));

$("lock").addEventListener("click", () => guarded(async () => {
  const { sessions } = await api("/api/signer/lock", { method: "POST", body: {} });
  await refreshSession();
  showStatus("ok", sessions > 1
    ? `Locked on ${counted(sessions, "device")}. Nothing signs until you unlock with a passkey.`
    : "Locked. Nothing signs until you unlock with a passkey.");
}));

/** Seals the key (or lets one more passkey open it) with a fresh passkey assertion. */
async function sealWith(credentialIds, done) {
  showStatus("", "Waiting for your passkey…");
  const cred = await confirmAction("key.seal", "", credentialIds);
  await api("/api/signer/seal", { method: "POST", body: { cred } });
  await refreshSession();
  await loadPasskeys();
  // The first seal hides the steps that held the status line: it moves beside the new protection.
  if ($("status").closest("[hidden]")) $("protection-explain").after($("status"));
  showStatus("ok", done);
  loadHistory();
}

/** Step 1 of sealing: the backup, made here (not a box ticked on trust). */
$("seal-export").addEventListener("click", () => {
  const backup = $("backup");
  backup.open = true;
  $("export-box").open = true;
  $("export-password").scrollIntoView({ block: "center" });
  $("export-password").focus();
  showStatus("", "Choose a password for the backup, then press Export. Sealing is the next step.");
});

/** Passkeys that may join the seal: not sealing yet, and not known to lack PRF. */
function joinable() {
  const sealed = account.protection && account.protection.level === "passkeys";
  return sealed ? passkeys.filter((c) => !c.sealsKey && c.canSeal !== false) : [];
}

$("seal").addEventListener("click", () => guarded(async () => {
  const { clients } = await api("/api/signer/bunker/clients");
  if (clients.length && !(await askInPage($("seal").closest("li"), {
    text: `Sealing gives your NIP-46 signer a new key: ${counted(clients.length, "connected app")} will be disconnected `
      + "and must connect again with a new bunker URL.", confirm: "Seal and disconnect them",
  }))) return;
  // The passkey the user picks now seals first; the others join with "Add to seal" or "Seal with all".
  await sealWith(null, "Your key is sealed. Add your other passkeys to the seal so losing one device does not lose the key."
    + (clients.length ? ` ${counted(clients.length, "app was", "apps were")} disconnected: connect them again with a new bunker URL (Connect an app).` : ""));
  await loadBunkerClients();
}));

$("seal-all").addEventListener("click", () => guarded(async () => {
  const waiting = joinable();
  for (const [index, c] of waiting.entries()) {
    showStatus("", `Passkey ${index + 1} of ${waiting.length}: use “${c.name || c.authenticatorName}” when your device asks…`);
    await sealWith([c.id], `“${c.name || c.authenticatorName}” now opens your sealed key.`);
  }
  showStatus("ok", `${counted(waiting.length, "more passkey")} now ${waiting.length === 1 ? "opens" : "open"} your sealed key.`);
}));

$("unseal").addEventListener("click", () => guarded(async () => {
  if (!(await askInPage($("unseal").closest(".card"), { text: "Unseal your key? Keyfob's master key alone will protect it again.", confirm: "Unseal" }))) return;
  showStatus("", "Waiting for your passkey…");
  const cred = await confirmAction("key.unseal");
  await api("/api/signer/unseal", { method: "POST", body: { cred } });
  await refreshSession();
  await loadPasskeys();
  showStatus("ok", "Your key is server-protected again.");
  loadHistory();
}));

$("sign-note").addEventListener("click", () => guarded(async () => {
  // The previous note goes first: a failure must not leave it standing for a new one.
  $("signed").textContent = "";
  $("signed").hidden = true;
  const reply = await api("/api/signer/sign_event", {
    method: "POST", body: { event: { kind: 1, content: $("note").value, tags: [] } },
  });
  $("signed").textContent = JSON.stringify(reply.event, null, 2);
  $("signed").hidden = false;
  showStatus("ok", "Signed. The event below verifies against your npub.");
  loadHistory();
}));

$("add").addEventListener("click", () => addPasskey());
$("add-phone").addEventListener("click", () => addPasskey(["hybrid"]));
$("add-key").addEventListener("click", () => addPasskey(["security-key"]));
$("nudge-add").addEventListener("click", () => addPasskey(["hybrid", "security-key"]));
$("nudge-later").addEventListener("click", () => {
  localStorage.setItem("keyfob-nudge-dismissed", account.userId);
  $("nudge").hidden = true;
});

$("export").addEventListener("click", () => guarded(async () => {
  const password = $("export-password").value;
  if (password.length < 8) {
    showStatus("error", "Choose a password of at least 8 characters to encrypt the backup with.");
    return;
  }
  if (password !== $("export-password-again").value) {
    showStatus("error", "The two passwords differ: type the same password in both fields.");
    return;
  }
  showStatus("", "Confirm with your passkey…");
  const confirmation = await confirmAction("key.export");
  const reply = await api("/api/signer/key/export", { method: "POST", body: { password, confirmation } });
  $("ncryptsec").textContent = reply.ncryptsec;
  drawQR($("ncryptsec-qr"), reply.ncryptsec);
  $("ncryptsec-box").hidden = false;
  $("export-password").value = "";
  $("export-password-again").value = "";
  showStatus("ok", "Backup ready: copy it, download it or scan it, and keep its password apart from it.");
  // Sealing's first step is done: the second opens.
  $("seal").disabled = false;
  $("seal-export-done").hidden = false;
  loadHistory();
}));

$("ncryptsec-download").addEventListener("click", () => {
  const file = new Blob([$("ncryptsec").textContent + "\n"], { type: "text/plain" });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(file);
  link.download = `keyfob-${account.username}-ncryptsec.txt`;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);  // after the download has begun
  showStatus("ok", `Saved as ${link.download}.`);
});

/** The import body for what was typed: an ncryptsec with its password, an nsec, or 64 hex. */
function importBody() {
  const value = $("import-key").value.trim();
  if (value.startsWith("ncryptsec1")) return { ncryptsec: value, password: $("import-password").value };
  if (value.startsWith("nsec1")) return { nsec: value };
  return { secret: value };
}

// Import: check the key first (nothing changes), name both npubs, offer the export, then the passkey.
$("import").addEventListener("click", () => guarded(async () => {
  if (!$("import-key").value.trim()) {
    showStatus("error", "Paste the key to import first: an nsec1…, 64 hex characters or an ncryptsec1… with its password.");
    return;
  }
  showStatus("", "Checking the key…");
  const checked = await api("/api/signer/key/check", { method: "POST", body: importBody() });
  if (checked.sameAsCurrent) {
    showStatus("ok", "That is the key Keyfob already holds for you: nothing to change.");
    return;
  }
  showStatus("", "");
  const answer = await askInPage($("import").closest("details"), {
    text: `Replace your key ${account.npub} with ${checked.npub}? The current key is gone for good unless you exported it.`,
    confirm: "Replace my key", danger: true, extra: { label: "Export the current key first", value: "export" },
  });
  if (answer === "export") {
    $("export-box").open = true;
    $("export-password").focus();
    showStatus("", "Export the current key first: a password twice, then Export. Then replace it.");
    return;
  }
  if (!answer) return;
  const body = importBody();
  body.confirmation = await confirmAction("key.import");
  const reply = await api("/api/signer/key", { method: "POST", body });
  $("import-key").value = "";
  $("import-password").value = "";
  account.npub = reply.npub;
  $("npub").textContent = reply.npub;
  drawQR($("npub-qr"), reply.npub);
  showStatus("ok", `Key replaced: your npub is now ${reply.npub}.`);
  loadHistory();
}));

$("more").addEventListener("click", () => guarded(() => loadHistory(true)));

$("signout").addEventListener("click", async () => {
  try { await api("/logout", { method: "POST" }); } finally { location.assign("/?signedout"); }
});

// The key card's "Sign out everywhere" link: the remedy is one click from the top of the page.
$("signout-all-link").addEventListener("click", (event) => {
  event.preventDefault();
  const button = $("signout-all");
  button.closest("details").open = true;
  button.scrollIntoView({ block: "center" });
  button.focus();
});

$("signout-all").addEventListener("click", async () => {
  if (!(await askInPage($("signout-all").parentElement, {
    text: "Sign out on every device, disconnect every app and revoke every permission? Each will need your passkey to come back; apps need a new bunker URL.",
    confirm: "Sign out everywhere", danger: true,
  }))) return;
  let confirmation;
  try { confirmation = await confirmAction("sessions.revoke"); } catch (error) { showError(error); return; }
  let ended;
  try { ended = await api("/logout?everywhere=1", { method: "POST", body: { confirmation } }); } catch (error) { showError(error); return; }
  // What ended, for the sign-in page to say (kept in this tab, not in the address: a link must not word it).
  sessionStorage.setItem("keyfob-signed-out", JSON.stringify({
    sessions: ended.sessions, apps: ended.apps, grants: ended.grants, requests: ended.requests, ended: ended.ended,
    passkeys: ended.passkeys, passkeysAddedToday: ended.passkeysAddedToday,
  }));
  location.assign("/?signedout");
});

/** The sections below the key open and close like any disclosure; this browser remembers which
 *  are open, and a link to #security (or #backup, #polkadot, #activity) opens that one. */
function setUpSections() {
  let open;
  try { open = new Set(JSON.parse(localStorage.getItem("keyfob-open-sections") || "[]")); } catch { open = new Set(); }
  for (const section of document.querySelectorAll("details.section")) {
    if (open.has(section.id) || location.hash === `#${section.id}`) section.open = true;
    section.addEventListener("toggle", () => {
      if (section.open) open.add(section.id); else open.delete(section.id);
      localStorage.setItem("keyfob-open-sections", JSON.stringify([...open]));
    });
  }
  addEventListener("hashchange", () => {
    const section = document.getElementById(location.hash.slice(1));
    if (section && section.matches("details.section")) { section.open = true; section.scrollIntoView(); }
  });
}

/** What each closed section holds, on its summary line: the state at a glance. */
function setSectionNote(id, text) {
  const note = $(id);
  if (note) note.textContent = text;
}

setUpSections();
$("welcome-done").addEventListener("click", () => { $("welcome-card").hidden = true; });

(async () => {
  if (!(await refreshSession())) return;
  await guarded(() => Promise.all([loadPasskeys(), loadHistory(), loadGrants(), loadBunkerClients(), loadWaiting()]));
  // A bunker client's request can arrive while this page is open (the client runs elsewhere).
  setInterval(() => Promise.all([loadWaiting(), loadBunkerClients({ onlyIfChanged: true })]).catch(() => {}), 5000);
  renderLock();
  const params = new URLSearchParams(location.search);
  if (params.has("welcome")) {
    // Once: the card names the next step, and the address loses ?welcome so a reload does not repeat it.
    const sealed = account.protection && account.protection.level === "passkeys";
    $("welcome-text").textContent = (params.has("notsealed")
      ? "This passkey cannot seal keys (its device has no PRF support), so your key is server-protected; you can seal it later under “Passkeys and key protection” with a passkey that can. "
      : sealed ? "Your key is sealed by this passkey: add a second passkey soon, so losing this device does not lose the key. " : "")
      + "Next: connect a nostr app with your bunker URL (“Connect an app” below), or sign a test note to see it work.";
    $("welcome-card").hidden = false;
    history.replaceState(null, "", location.pathname + location.hash);
  }
})();
