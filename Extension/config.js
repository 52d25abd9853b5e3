// The Keyfob server this build talks to (`make extension KEYFOB_SERVER=https://keyfob.example`
// writes it; `make serve` listens on the default). It is fixed per build: only that server's
// /extension.html connects the extension.
"use strict";
const KEYFOB_DEFAULT_SERVER = "http://localhost:8080";
// The extension API: Firefox's `browser` (promises), else Chromium's `chrome` (promises in MV3).
const ext = globalThis.browser || globalThis.chrome;
