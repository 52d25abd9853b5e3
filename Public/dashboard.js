// The operator's dashboard: last hour, a live stream (server-sent events), users, the kill switch.
"use strict";
const $ = (id) => document.getElementById(id);
let usersCursor = null;

function line(a) {
  const li = document.createElement("li");
  // A locked signer asking for the passkey is the normal step-up, not a failure (as the stats count it).
  li.dataset.outcome = a.code === "signer_locked" ? "step-up" : a.outcome;
  const parts = [new Date(a.time).toLocaleTimeString(), a.event, a.user, a.client, a.method,
                 a.kind !== undefined && a.kind !== null ? `kind ${a.kind}` : null, a.code, a.ip];
  li.textContent = parts.filter((p) => p !== null && p !== undefined && p !== "").join(" · ");
  return li;
}

async function loadStats() {
  const s = await api("/api/admin/stats");
  $("signups").textContent = s.lastHour.signUps;
  $("signins").textContent = s.lastHour.signIns;
  $("failures").textContent = Object.values(s.lastHour.failures).reduce((a, b) => a + b, 0);
  $("signer").textContent = Object.values(s.lastHour.signer).reduce((a, b) => a + b, 0);
  const byCode = Object.entries(s.lastHour.failures).map(([k, v]) => `${k} ${v}`).join(", ");
  const stepUps = s.lastHour.stepUps ? `${s.lastHour.stepUps} waited for a passkey (a locked signer, not a failure)` : "";
  const byMethod = Object.entries(s.lastHour.signer).map(([k, v]) => `${k} ${v}`).join(", ");
  $("breakdown").textContent = [byCode && `failures: ${byCode}`, stepUps, byMethod && `signer: ${byMethod}`].filter(Boolean).join(" — ");
  const max = Math.max(1, ...s.lastHour.perMinute.map((m) => m.signUps + m.signIns + m.signer + m.failures));
  $("chart").replaceChildren(...s.lastHour.perMinute.map((m) => {
    const bar = document.createElement("span");
    const total = m.signUps + m.signIns + m.signer + m.failures;
    bar.style.setProperty("--h", `${Math.round((total / max) * 100)}%`);
    if (m.failures) bar.dataset.failures = "1";
    bar.title = `${total} events`;
    return bar;
  }));
  const h = s.health;
  $("health").textContent = `v${h.version} · up ${Math.round(h.uptimeSeconds / 60)} min · database ${h.database} (${h.store === "postgres" ? "PostgreSQL" : "SQLite"}) · ${counted(h.openConnections, "connection")} · ${counted(h.users, "user")}`;
  // Several instances on one PostgreSQL database: activity is counted per instance.
  const scope = h.store === "postgres" ? " on this instance" : "";
  $("hour-title").textContent = `Last hour${scope}`;
  $("live-title").textContent = `Live${scope}`;
}

/** A date as people say it: "3 min ago", "yesterday", or the day. */
function when(iso) {
  const seconds = (Date.now() - new Date(iso).getTime()) / 1000;
  if (seconds < 90) return "just now";
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  if (seconds < 2 * 86400) return "yesterday";
  return new Date(iso).toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" });
}

async function loadUsers(more = false) {
  const query = new URLSearchParams({ query: $("query").value.trim() });
  if (more && usersCursor) query.set("cursor", usersCursor);
  const page = await api(`/api/admin/users?${query}`);
  usersCursor = page.next || null;
  const items = page.users.map((u) => {
    const li = document.createElement("li");
    li.className = "user";
    const text = document.createElement("span");
    const keys = u.passkeys.map((p) => `${p.name || p.authenticator}${p.backedUp ? " (synced)" : ""}`).join(", ");
    const seen = u.lastSeenAt ? `last seen ${when(u.lastSeenAt)}` : "never signed in since sign-up";
    text.textContent = `${u.username}${u.isAnonymous ? " (anonymous)" : ""} · joined ${when(u.createdAt)} · ${seen}` +
      ` · ${counted(u.passkeys.length, "passkey")}: ${keys}` +
      ` · ${u.hasNostrKey ? "nostr key" : "no key yet"}${u.clients.length ? ` · apps: ${u.clients.join(", ")}` : ""}`;
    const revoke = document.createElement("button");
    revoke.type = "button";
    revoke.className = "link";
    revoke.textContent = "End sessions";
    revoke.setAttribute("aria-label", `End every session of ${u.username}`);
    revoke.addEventListener("click", async () => {
      try { await api(`/api/admin/users/${encodeURIComponent(u.username)}/revoke-sessions`, { method: "POST", body: { confirmation: await confirmAction("admin.revoke_sessions", u.username) } }); showStatus("ok", `Sessions of ${u.username} ended.`); } catch (e) { showError(e); }
    });
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "link";
    remove.textContent = "Remove";
    remove.setAttribute("aria-label", `Remove the account ${u.username}`);
    remove.addEventListener("click", async () => {
      if (!(await askInPage(li, { text: `Remove ${u.username}, its passkeys and its nostr key for good?`, confirm: "Remove the account", danger: true }))) return;
      try { await api(`/api/admin/users/${encodeURIComponent(u.username)}`, { method: "DELETE", body: { confirmation: await confirmAction("admin.remove_user", u.username) } }); showStatus("ok", `${u.username} removed.`); loadUsers(); } catch (e) { showError(e); }
    });
    const actions = document.createElement("span");
    actions.className = "passkey-actions";
    actions.append(revoke, remove);
    li.append(text, actions);
    return li;
  });
  if (more) $("users").append(...items); else $("users").replaceChildren(...items);
  $("more-users").hidden = !usersCursor;
}

function connect() {
  const source = new EventSource("/api/admin/stream");
  source.onmessage = (message) => {
    $("stream").prepend(line(JSON.parse(message.data)));
    while ($("stream").children.length > 200) $("stream").lastChild.remove();
    clearTimeout(connect.refresh);
    connect.refresh = setTimeout(() => { loadStats(); loadUsers(); }, 300);
  };
}

$("query").addEventListener("input", () => { clearTimeout(loadUsers.t); loadUsers.t = setTimeout(() => loadUsers(), 250); });
$("more-users").addEventListener("click", () => loadUsers(true));
$("lock-all").addEventListener("click", async () => {
  if (!(await askInPage($("lock-all").parentElement, { text: "Lock every signer now? Every user must unlock with a passkey before anything is signed again.", confirm: "Lock every signer", danger: true }))) return;
  try {
    const r = await api("/api/admin/lock-all", { method: "POST", body: {} });
    showStatus("ok", `Locked ${counted(r.locked, "unlocked signer")}.`);
  } catch (e) { showError(e); }
});

(async () => {
  try {
    const { events } = await api("/api/admin/events");
    $("stream").replaceChildren(...events.slice(0, 200).map(line));
    await Promise.all([loadStats(), loadUsers()]);
    connect();
    setInterval(loadStats, 30000);
  } catch (e) {
    showError(e);
  }
})();
