// The Keyfob extension's question before a site sees the Polkadot addresses, and which of them.
// This page decides nothing: the extension that opened it reads the answer from its address
// (?answer=allow&accounts=…) and then connects the site it asked for, with its own session, sharing
// only addresses that are the person's own.
"use strict";
const params = new URLSearchParams(location.search);
document.getElementById("origin").textContent = params.get("origin") || "a site";
const name = params.get("name");
if (name) document.getElementById("name").textContent = `It calls itself “${name.slice(0, 80)}” (its own words).`;
const accounts = params.getAll("account").map((entry) => {
  const at = entry.indexOf(" ");
  return at < 0 ? { address: entry, name: "" } : { address: entry.slice(0, at), name: entry.slice(at + 1) };
});
const choice = document.getElementById("account-choice");
choice.hidden = accounts.length === 0;
const chosen = accountChoice(choice, accounts, (count) => {
  document.getElementById("allow").disabled = count === 0;
  document.getElementById("none-ticked").hidden = count > 0;
});
document.getElementById("allow").addEventListener("click", () => {
  location.search = `?${new URLSearchParams({ answer: "allow", accounts: chosen().join(",") })}`;
});
document.getElementById("deny").addEventListener("click", () => { location.search = "?answer=deny"; });
