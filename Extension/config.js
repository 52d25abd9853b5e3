// The Keyfob server this build talks to (`make extension KEYFOB_SERVER=https://keyfob.example`
// writes it; `make serve` listens on the default). It is fixed per build: the manifest lets only
// that server's page hand the extension a session (`externally_connectable`).
"use strict";
const KEYFOB_DEFAULT_SERVER = "http://localhost:8080";
