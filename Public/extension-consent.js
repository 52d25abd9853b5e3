// The Keyfob extension's question before a site sees the Polkadot addresses. This page decides
// nothing: the extension that opened it reads the answer from its address (?answer=allow) and
// then connects the site it asked for, with its own session.
"use strict";
const params = new URLSearchParams(location.search);
document.getElementById("origin").textContent = params.get("origin") || "a site";
const name = params.get("name");
if (name) document.getElementById("name").textContent = `It calls itself “${name.slice(0, 80)}” (its own words).`;
document.getElementById("allow").addEventListener("click", () => { location.search = "?answer=allow"; });
document.getElementById("deny").addEventListener("click", () => { location.search = "?answer=deny"; });
