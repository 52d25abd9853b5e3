// The account page's Polkadot accounts: list (address, copy, QR), create, import, export, remove.
// Uses account.js's helpers (guarded, showStatus, copiedOn, drawQR) and keyfob.js's confirmAction.
"use strict";

const polkadotNetworks = { 0: "Polkadot", 2: "Kusama", 42: "Generic Substrate" };

function polkadotRow(a) {
  const row = document.createElement("div");
  row.className = "polkadot-account";
  row.dataset.address = a.address;
  const name = document.createElement("b");
  name.textContent = a.name;
  const meta = document.createElement("span");
  meta.className = "meta";
  meta.textContent = `${polkadotNetworks[a.network] || `prefix ${a.network}`} · ${a.type}`;
  const address = document.createElement("code");
  address.className = "wrap";
  address.textContent = a.address;

  const copy = document.createElement("button");
  copy.type = "button";
  copy.className = "secondary small";
  copy.textContent = "Copy";
  copy.addEventListener("click", async () => {
    try { await navigator.clipboard.writeText(a.address); copiedOn(copy); showStatus("ok", "Address copied."); } catch {
      getSelection().selectAllChildren(address);
      showStatus("", "Press Ctrl+C (or long-press) to copy the selected address.");
    }
  });

  const qrBox = document.createElement("details");
  qrBox.className = "qr-box";
  const summary = document.createElement("summary");
  summary.textContent = "QR code";
  const canvas = document.createElement("canvas");
  canvas.className = "qr";
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", `QR code of the address ${a.address}`);
  qrBox.append(summary, canvas);
  qrBox.addEventListener("toggle", () => { if (qrBox.open) drawQR(canvas, a.address); });

  // Export asks in the row itself (no browser prompt): a form that opens under it.
  const panel = document.createElement("div");
  panel.className = "polkadot-panel";
  panel.hidden = true;
  // The form opens under the row, or (a new account's backup step) in `host`, beside the Create button.
  const openPanel = (host, ...children) => { host.replaceChildren(...children); host.hidden = false; };
  const cancel = (host) => { const b = document.createElement("button"); b.type = "button"; b.className = "secondary small"; b.textContent = "Cancel"; b.addEventListener("click", () => { host.hidden = true; }); return b; };

  const exportButton = document.createElement("button");
  exportButton.type = "button";
  exportButton.className = "secondary small";
  exportButton.textContent = "Export JSON";
  // Also the last step of creating an account: its only copy is in Keyfob until it is saved.
  const openExport = (backupStep, host = panel) => {
    const hint = document.createElement("p");
    hint.className = "hint";
    hint.textContent = "A password for the file, at least 8 characters. Polkadot.js, Nova, Talisman and SubWallet ask for it when importing.";
    const lead = document.createElement("p");
    lead.className = "backup-step";
    lead.textContent = `Back up “${a.name}” now: save it as a JSON file with a password, and keep both somewhere safe. Without a backup, the account is lost with your Keyfob.`;
    const first = passwordField(`polkadot-export-${a.id}`, "Password");
    const second = passwordField(`polkadot-export-again-${a.id}`, "The same password again");
    const save = document.createElement("button");
    save.type = "button";
    save.className = "small";
    save.textContent = "Save the file";
    save.addEventListener("click", () => guarded(async () => {
      const password = first.input.value;
      if (password.length < 8) { showStatus("error", "The password needs at least 8 characters. Nothing was exported."); return; }
      if (second.input.value !== password) { showStatus("error", "The two passwords differ. Nothing was exported."); return; }
      await exportPolkadot(a, password);
      // The result stays in view: the status line moves out of the form before the form closes.
      host.after(document.getElementById("status"));
      host.hidden = true;
    }));
    const actions = document.createElement("div");
    actions.className = "actions row";
    const later = cancel(host);
    if (backupStep) later.textContent = "Later";
    actions.append(save, later);
    openPanel(host, ...(backupStep ? [lead] : []), hint, first.label, first.input, second.label, second.input, actions);
    first.input.focus({ preventScroll: backupStep });
  };
  exportButton.addEventListener("click", () => openExport(false));
  row.backUp = (host) => openExport(true, host);

  const remove = document.createElement("button");
  remove.type = "button";
  // Secondary, after the everyday buttons: removing asks again in the row, then for the passkey.
  remove.className = "secondary small remove";
  remove.textContent = "Remove";
  remove.addEventListener("click", () => guarded(async () => {
    panel.hidden = true;
    const text = `Remove “${a.name}”? Its key is destroyed in Keyfob: keep a JSON export if you still need this account.`;
    if (!(await askInPage(row, { text, confirm: "Remove it", danger: true }))) return;
    const confirmation = await confirmAction("polkadot.remove", a.id);
    await api(`/api/polkadot/accounts/${encodeURIComponent(a.id)}/remove`, { method: "POST", body: { confirmation } });
    showStatus("ok", `“${a.name}” was removed.`);
    await loadPolkadot();
  }));
  // Blind signing: off unless the owner turns it on, with the passkey, for this account only. What
  // it means is said before the box is ticked; on, it is shown as a warning, not a success.
  const unchecked = document.createElement("label");
  unchecked.className = "unchecked-setting";
  const box = document.createElement("input");
  box.type = "checkbox";
  box.className = "blind-signing";
  box.checked = Boolean(a.acceptsUnverified);
  const explain = document.createElement("p");
  explain.className = "hint unchecked-explain";
  explain.id = `blind-explain-${a.id}`;
  explain.textContent = "Off (safer): Keyfob signs only transactions it checked against the chain's own description, so the page shows exactly what you sign. "
    + "On: a site may also ask you to sign a transaction Keyfob cannot check — its call, amount and recipient are then the site's word, not a fact. "
    + "Changing it asks for your passkey.";
  box.setAttribute("aria-describedby", explain.id);
  unchecked.append(box, " Also sign unchecked transactions (blind signing)");
  const showState = () => { unchecked.dataset.on = String(box.checked); };
  showState();
  box.addEventListener("change", () => guarded(async () => {
    const wanted = box.checked;
    box.checked = !wanted;  // until the passkey said so
    showState();
    const confirmation = await confirmAction("polkadot.accept_unverified", a.id);
    const updated = await api(`/api/polkadot/accounts/${encodeURIComponent(a.id)}/settings`, { method: "POST", body: { acceptUnverified: wanted, confirmation } });
    box.checked = updated.acceptsUnverified;
    showState();
    showStatus(updated.acceptsUnverified ? "warn" : "ok", updated.acceptsUnverified
      ? `Blind signing is on for “${a.name}”: it may sign transactions Keyfob cannot check, each page warning you. Turn it off when you no longer need it.`
      : `“${a.name}” signs only transactions Keyfob checked against the chain.`);
  }));
  row.append(name, meta, address, copy, exportButton, qrBox, unchecked, explain, remove, panel);
  return row;
}

function passwordField(id, text) {
  const label = document.createElement("label");
  label.htmlFor = id;
  label.textContent = text;
  const input = document.createElement("input");
  input.type = "password";
  input.id = id;
  input.autocomplete = "new-password";
  return { label, input };
}

async function exportPolkadot(a, password) {
  const confirmation = await confirmAction("polkadot.export", a.id);
  const file = await api(`/api/polkadot/accounts/${encodeURIComponent(a.id)}/export`, { method: "POST", body: { password, confirmation } });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([JSON.stringify(file)], { type: "application/json" }));
  link.download = `${a.address}.json`;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10000);
  showStatus("ok", `Saved ${a.address}.json. Keep it with its password: together they are this account.`);
}

async function loadPolkadot() {
  const { accounts } = await api("/api/polkadot/accounts");
  const list = document.getElementById("polkadot-list");
  // The status line may sit in a row about to be replaced: it moves below the list, text kept.
  const status = document.getElementById("status");
  if (list.contains(status)) list.after(status);
  setSectionNote("polkadot-note", accounts.length ? counted(accounts.length, "account") : "none yet");
  if (!accounts.length) {
    const empty = document.createElement("p");
    empty.className = "meta";
    empty.textContent = "No Polkadot account yet.";
    list.replaceChildren(empty);
    return;
  }
  list.replaceChildren(...accounts.map(polkadotRow));
}

async function addPolkadot(body, done) {
  // A phrase or a file may be known to someone else: bringing one in is confirmed with the passkey.
  if (body.mnemonic !== undefined || body.backup !== undefined) body.confirmation = await confirmAction("polkadot.import");
  const created = await api("/api/polkadot/accounts", { method: "POST", body });
  await loadPolkadot();
  showStatus("ok", `${done}: ${created.address}`);
  return created;
}

// A new account ends with its backup step, in its row.
document.getElementById("polkadot-create").addEventListener("click", () => guarded(async () => {
  const created = await addPolkadot({ network: Number(document.getElementById("polkadot-network").value) }, "Created");
  const row = [...document.querySelectorAll("#polkadot-list .polkadot-account")].find((r) => r.dataset.address === created.address);
  const host = document.getElementById("polkadot-backup");
  if (row && row.backUp) {
    row.backUp(host);
    host.scrollIntoView({ block: "nearest" });
  }
}));

document.getElementById("polkadot-import-phrase").addEventListener("click", () => guarded(async () => {
  const phrase = document.getElementById("polkadot-phrase");
  await addPolkadot({
    mnemonic: phrase.value.trim(), path: document.getElementById("polkadot-path").value.trim(),
    type: document.getElementById("polkadot-type").value, network: Number(document.getElementById("polkadot-network").value),
  }, "Imported");
  phrase.value = "";
}));

document.getElementById("polkadot-import-file").addEventListener("click", () => guarded(async () => {
  const input = document.getElementById("polkadot-file");
  if (!input.files.length) { showStatus("error", "Choose the JSON file first."); return; }
  let backup;
  try { backup = JSON.parse(await input.files[0].text()); } catch { showStatus("error", "That file is not JSON. Nothing was imported."); return; }
  const password = document.getElementById("polkadot-file-password");
  await addPolkadot({ backup, password: password.value, name: (backup.meta && backup.meta.name) || "", network: Number(document.getElementById("polkadot-network").value) }, "Imported");
  password.value = "";
  input.value = "";
}));

loadPolkadot().catch(showError);
