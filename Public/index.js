// The sign-in / sign-up page: passkey autofill (kept fresh), the two buttons, errors beside the fields.
"use strict";
let conditional = null;  // AbortController of a pending autofill sign-in
let refresh = null;      // timer that renews the autofill request before its challenge expires
let anyAccount = false;  // "Use another account" pressed: not the sealed account this browser remembers

// Where a sign-in goes: the account page, or back to the dashboard when that is where it came
// from (only that one path: never an address read from the URL).
const afterSignIn = new URLSearchParams(location.search).get("next") === "/dashboard" ? "/dashboard" : "/account.html";

function done(result) {
  showStatus("ok", `Signed in as ${result.username}.`);
  location.assign(afterSignIn);
}

function fieldError(id, message, code) {
  const el = document.getElementById(id);
  el.hidden = !message;
  el.textContent = message || "";
  if (message && code) el.append(codeDetails(code));
  if (id === "username-error") document.getElementById("username").setAttribute("aria-invalid", message ? "true" : "false");
}

/** Passkey autofill. Its challenge expires with the options' timeout, so it is renewed a few
 *  seconds before; a failure is shown, never swallowed (except the aborts this page makes). */
async function startAutofill(retried = false) {
  if (!window.PublicKeyCredential || !PublicKeyCredential.isConditionalMediationAvailable) return;
  if (!(await PublicKeyCredential.isConditionalMediationAvailable())) return;
  stopAutofill();
  const controller = new AbortController();
  conditional = controller;
  try {
    const pending = signInWithPasskey({ mediation: "conditional", signal: controller.signal, anyAccount, onOptions: (options) => {
      showAccount(options);
      clearTimeout(refresh);
      refresh = setTimeout(() => startAutofill(), Math.max(5000, (options.timeout || 60000) - 5000));
    } });
    done(await pending);
  } catch (error) {
    if (controller.signal.aborted || (error && error.name === "AbortError")) return;
    if (error.code === "challenge_expired" && !retried) { startAutofill(true); return; }
    fieldError("signin-error", describeError(error), error && error.code);
  }
}

/** Says whom the sign-in is for when this browser signed in to a sealed account before: its
 *  passkey then opens the key in the same prompt. */
function showAccount(options) {
  const named = Boolean(options.account) && !anyAccount;
  document.getElementById("signin-account").hidden = !named;
  if (named) document.getElementById("signin-account-name").textContent = options.account;
  document.getElementById("signin").textContent = named ? `Sign in as ${options.account}` : "Sign in with a passkey";
}

document.getElementById("other-account").addEventListener("click", () => {
  anyAccount = true;
  showAccount({});
  if (conditional) startAutofill();  // the autofill running offers every account's passkeys now
});

function stopAutofill() {
  clearTimeout(refresh);
  if (conditional) { conditional.abort(); conditional = null; }
}

document.getElementById("signin").addEventListener("click", async () => {
  stopAutofill();
  fieldError("signin-error", "");
  showStatus("", "Waiting for your passkey…");
  try { done(await signInWithPasskey({ anyAccount, onOptions: showAccount })); } catch (error) {
    showStatus("", "");
    fieldError("signin-error", describeError(error), error && error.code);
  }
});

document.getElementById("username").addEventListener("input", () => fieldError("username-error", ""));

document.getElementById("signup-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  stopAutofill();
  fieldError("username-error", "");
  const username = document.getElementById("username").value.trim();
  showStatus("", "Creating your passkey…");
  try {
    const seal = document.getElementById("seal-at-signup").checked;
    const result = await registerPasskey(username, undefined, false, seal, document.getElementById("passkey-name").value.trim());
    showStatus("ok", `Account ${result.username} created.`);
    // Asked to seal, but this passkey could not (no PRF): the account page says so.
    location.assign(seal && result.sealsKey === false ? "/account.html?welcome&notsealed" : "/account.html?welcome");
  } catch (error) {
    showStatus("", "");
    fieldError("username-error", describeError(error), error && error.code);
  }
});

document.getElementById("passkey-name").value = deviceName();

(async () => {
  const params = new URLSearchParams(location.search);
  if (!window.PublicKeyCredential) {
    showStatus("error", "This browser does not support passkeys. Use a current Chrome, Safari, Firefox or Edge.");
    return;
  }
  // A browser that signed in to a sealed account says whom "Sign in" is for before the prompt.
  api("/sealed-account").then((named) => { if (!anyAccount) showAccount(named); }).catch(() => {});
  // A sign-out's result goes under the title, where the eye lands, not below the forms.
  if (params.has("signedout")) document.querySelector("h1").after(document.getElementById("status"));
  const everywhere = sessionStorage.getItem("keyfob-signed-out");
  sessionStorage.removeItem("keyfob-signed-out");
  if (params.has("signedout") && everywhere) {
    let ended = {};
    try { ended = JSON.parse(everywhere); } catch { /* shown without figures */ }
    const number = (name) => Math.max(0, Number.isInteger(ended[name]) ? ended[name] : 0);
    const named = (list) => (Array.isArray(list) ? list : []).filter((n) => typeof n === "string").map((n) => n.slice(0, 60));
    const what = ended.ended && typeof ended.ended === "object" ? ended.ended : {};
    const sessions = number("sessions");
    const apps = number("apps");
    const requests = number("requests");
    // Who ended, by name: this browser, the extension, the rest counted; apps by the names they
    // gave themselves (quoted), sites by their address.
    const who = ["this browser"];
    if (what.extensionSession === true) who.push("the Keyfob extension");
    if (sessions > who.length) who.push(`${sessions - who.length} more`);
    const appNames = named(what.apps).map((n) => `“${n}”`);
    const sites = named(what.sites).filter((n) => !n.startsWith("nip46:"));
    const passkeys = number("passkeys");
    const today = number("passkeysAddedToday");
    showStatus("ok", `You are signed out everywhere: ${counted(sessions, "session")} ended (${who.join(", ")}), `
      + `${apps === 1 ? "1 app was" : `${apps} apps were`} disconnected${appNames.length ? ` (${appNames.join(", ")})` : ""} `
      + `and ${counted(number("grants"), "permission")} revoked${sites.length ? ` (${sites.join(", ")})` : ""}`
      + (requests ? `, and ${requests === 1 ? "1 waiting request was" : `${requests} waiting requests were`} cancelled. ` : ". ")
      + (apps ? "After you sign in, connect your apps again with a new bunker URL. " : "Sign in again with your passkey. ")
      + (passkeys ? `Then check your passkeys: you have ${passkeys}${today ? `, ${today} added today` : ""}; remove any you do not know.` : ""));
    return;
  }
  if (params.has("signedout")) { showStatus("ok", "You are signed out."); return; }
  // Signed in already: the account is where you want to be.
  const session = await fetch("/session", { credentials: "same-origin" }).catch(() => null);
  if (session && session.ok) { location.replace(afterSignIn); return; }
  startAutofill();
})();
