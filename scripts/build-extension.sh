#!/usr/bin/env bash
# Builds the Keyfob browser extension for the Keyfob server SERVER from the one Extension/ source:
#   OUT/          Chromium and Chrome (load unpacked), and OUT.zip (the Chrome Web Store, side-loads)
#   OUT-firefox/  Firefox, desktop and Android (about:debugging loads it), and OUT.xpi
# Usage: scripts/build-extension.sh [SERVER] [OUT]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
server="${1:-http://localhost:8080}"
out="${2:-$here/.build/extension}"
case "$server" in http://*|https://*) ;; *) echo "the server is an http(s) address, like https://keyfob.example" >&2; exit 2 ;; esac
server="${server%/}"
rm -rf "$out"
mkdir -p "$out"
cp "$here"/Extension/*.{json,js,html,css,png} "$out"/
# The server: the one line of config.js that names it. Firefox's manifest differs in two places:
# a background script (Firefox has no extension service worker) and its add-on id and version.
python3 - "$out" "$server" <<'PY'
import json, shutil, sys
out, server = sys.argv[1], sys.argv[2]
path = out + "/config.js"
text = open(path).read()
start = text.index('const KEYFOB_DEFAULT_SERVER = ')
end = text.index(';', start)
open(path, 'w').write(text[:start] + 'const KEYFOB_DEFAULT_SERVER = ' + json.dumps(server) + text[end:])
firefox = out + "-firefox"
shutil.rmtree(firefox, ignore_errors=True)
shutil.copytree(out, firefox)
path = firefox + "/manifest.json"
manifest = json.load(open(path))
manifest["background"] = {"scripts": ["config.js", "background.js"]}
manifest["browser_specific_settings"] = {
    # world: "MAIN" content scripts (window.nostr in the page's own world) arrived in Firefox 128.
    "gecko": {"id": "extension@keyfob.invalid", "strict_min_version": "128.0"},
    "gecko_android": {"strict_min_version": "128.0"},
}
json.dump(manifest, open(path, "w"), indent=2)
PY
rm -f "$out.zip" "$out.xpi"
(cd "$out" && python3 -m zipfile -c "$out.zip" ./*)
(cd "$out-firefox" && python3 -m zipfile -c "$out.xpi" ./*)
echo "$out (load unpacked) and $out.zip for Chromium; $out-firefox and $out.xpi for Firefox; for $server"
