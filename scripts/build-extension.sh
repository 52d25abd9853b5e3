#!/usr/bin/env bash
# Builds the Keyfob browser extension: Extension/ copied to OUT (a folder Chromium and Chrome load
# unpacked) for the Keyfob server SERVER, and OUT.zip beside it (for the Chrome Web
# Store or a side-load). Usage: scripts/build-extension.sh [SERVER] [OUT]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
server="${1:-http://localhost:8080}"
out="${2:-$here/.build/extension}"
case "$server" in http://*|https://*) ;; *) echo "the server is an http(s) address, like https://keyfob.example" >&2; exit 2 ;; esac
server="${server%/}"
rm -rf "$out"
mkdir -p "$out"
cp "$here"/Extension/*.{json,js,html,css,png} "$out"/
# The server: the one line of config.js that names it, and the one origin whose pages may hand the
# extension a session (externally_connectable; Chrome takes no wildcard host there).
python3 - "$out" "$server" <<'PY'
import json, sys
out, server = sys.argv[1], sys.argv[2]
path = out + "/config.js"
text = open(path).read()
start = text.index('const KEYFOB_DEFAULT_SERVER = ')
end = text.index(';', start)
open(path, 'w').write(text[:start] + 'const KEYFOB_DEFAULT_SERVER = ' + json.dumps(server) + text[end:])
path = out + "/manifest.json"
manifest = json.load(open(path))
manifest["externally_connectable"] = {"matches": [server + "/*"]}
json.dump(manifest, open(path, "w"), indent=2)
PY
(cd "$out" && python3 -m zipfile -c "$out.zip" ./*)
echo "$out (load unpacked) and $out.zip, for $server"
