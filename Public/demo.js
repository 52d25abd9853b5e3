// The NIP-07 demo page: any site can do exactly this with Keyfob's /nip07.js.
"use strict";
const output = document.getElementById("output");
function show(value) {
  output.hidden = false;
  output.textContent = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  output.dataset.done = String(Date.now());
}
document.getElementById("pubkey").addEventListener("click", async () => {
  try { show(await window.nostr.getPublicKey()); } catch (error) { show(`error: ${error.code}: ${error.message}`); }
});
document.getElementById("sign").addEventListener("click", async () => {
  try {
    show(await window.nostr.signEvent({ kind: 1, content: document.getElementById("note").value, tags: [] }));
  } catch (error) { show(`error: ${error.code}: ${error.message}`); }
});
