// NIP-07 callback: hands the result to the page that asked, and only to it. The origin comes from
// the page the server rendered (data-origin: the one canonical origin it read from this URL, the
// same one the approval page named), never from reading the URL here; a URL that does not carry
// exactly that one origin sends nothing.
"use strict";
(() => {
  const origin = document.body.dataset.origin;
  const search = new URLSearchParams(location.search);
  const origins = search.getAll("origin");
  const status = document.getElementById("status");
  if (!origin || origins.length !== 1 || origins[0] !== origin) {
    status.textContent = "This window was not opened the way Keyfob opens it, so its result was not sent anywhere. You can close it.";
    return;
  }
  const params = {};
  for (const [name, value] of search) if (name !== "origin") params[name] = value;
  if (window.opener) {
    window.opener.postMessage({ type: "keyfob-nip07", params }, origin);
    window.close();
  } else {
    status.textContent = "The page that asked is gone; you can close this window.";
  }
})();
