// The Keyfob server this build talks to until its popup says otherwise (`make extension
// KEYFOB_SERVER=https://keyfob.example` writes it; `make serve` listens on the default).
"use strict";
const KEYFOB_DEFAULT_SERVER = "http://localhost:8080";
