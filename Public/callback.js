// NIP-07 callback: hands the result to the page that asked, and only to it: postMessage's
// targetOrigin is the origin the request named (the server checked it against the request).
"use strict";
(() => {
  const params = Object.fromEntries(new URLSearchParams(location.search));
  const origin = params.origin;
  delete params.origin;
  if (window.opener && origin) {
    window.opener.postMessage({ type: "keyfob-nip07", params }, origin);
    window.close();
  } else {
    document.getElementById("status").textContent = "The page that asked is gone; you can close this window.";
  }
})();
