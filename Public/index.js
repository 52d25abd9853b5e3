// The sign-in / sign-up page: passkey autofill, the two buttons.
"use strict";
let conditional = null;  // AbortController of a pending autofill sign-in

function done(result) {
  showStatus("ok", `Signed in as ${result.username}.`);
  location.assign("/account.html");
}

async function startAutofill() {
  if (!window.PublicKeyCredential || !PublicKeyCredential.isConditionalMediationAvailable) return;
  if (!(await PublicKeyCredential.isConditionalMediationAvailable())) return;
  conditional = new AbortController();
  try {
    done(await signInWithPasskey({ mediation: "conditional", signal: conditional.signal }));
  } catch (error) {
    // Aborted for an explicit ceremony, or no passkey offered: the buttons still work.
  }
}

function stopAutofill() {
  if (conditional) { conditional.abort(); conditional = null; }
}

document.getElementById("signin").addEventListener("click", async () => {
  stopAutofill();
  showStatus("", "Waiting for your passkey…");
  try { done(await signInWithPasskey()); } catch (error) { showStatus("error", describeError(error)); }
});

document.getElementById("signup-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  stopAutofill();
  const username = document.getElementById("username").value.trim();
  showStatus("", "Creating your passkey…");
  try {
    const result = await registerPasskey(username);
    showStatus("ok", `Account ${result.username} created.`);
    location.assign("/account.html");
  } catch (error) {
    showStatus("error", describeError(error));
  }
});

if (!window.PublicKeyCredential) {
  showStatus("error", "This browser does not support passkeys.");
} else if (new URLSearchParams(location.search).has("signedout")) {
  showStatus("ok", "You are signed out.");
} else {
  startAutofill();
}
