// The Keyfob extension's question before a site sees the Polkadot addresses, and which of them.
// The person answers here, signed in to Keyfob in this browser, and this page connects the site
// (pub(authorize.tab) with this page's own session): the extension's session cannot connect one,
// so a stolen extension token connects nothing. The extension then reads ?answer= from the address.
"use strict";
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const origin = (() => {
  try {
    const url = new URL(params.get("origin") || "");
    return /^https?:$/.test(url.protocol) ? url.origin : null;
  } catch { return null; }
})();
setBreakable($("origin"), origin || "a site");
const name = (params.get("name") || "").slice(0, 80);
if (name) $("name").textContent = `It calls itself “${name}” (its own words).`;

async function ask() {
  if (params.has("answer")) return;  // answered: the extension closes this window
  if (!origin) {
    showStatus("error", "This window names no site to connect: close it and try again from the site.");
    return;
  }
  const who = await sessionOrSignIn();
  $("account-name").textContent = who.username || "";
  const { accounts, chosen } = await polkadotAccountChoice();
  $("consent-card").hidden = false;
  $("allow").addEventListener("click", async () => {
    $("allow").disabled = true;
    try {
      const request = accounts.length ? { origin: name, accounts: chosen() } : { origin: name };
      await api("/api/polkadot/message", { method: "POST", body: { msgType: "pub(authorize.tab)", request, url: `${origin}/` } });
      location.search = "?answer=allow";
    } catch (error) {
      $("allow").disabled = false;
      showError(error);
    }
  });
}

$("deny").addEventListener("click", () => { location.search = "?answer=deny"; });
ask().catch(showError);
