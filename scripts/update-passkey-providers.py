#!/usr/bin/env python3
"""Refreshes Public/passkey-providers.json (AAGUID -> provider name) from a JSON list of
AAGUIDs such as the community-maintained passkey-authenticator-aaguids list:

    scripts/update-passkey-providers.py https://…/combined.json

Only names are taken; icons stay Keyfob's own generic ones (icons/*.svg), picked by a simple rule.
Review the diff before committing: the file decides what users see their passkeys called."""
import json
import os
import sys
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.path.join(ROOT, "Public", "passkey-providers.json")


def icon_for(name: str) -> str:
    lowered = name.lower()
    if any(word in lowered for word in ("yubikey", "security key", "feitian", "token", "solo", "nitrokey", "titan")):
        return "key"
    if any(word in lowered for word in ("windows hello", "chrome on", "edge on", "chromium")):
        return "device"
    return "manager"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with urllib.request.urlopen(sys.argv[1], timeout=30) as response:
        source = json.load(response)
    current = json.load(open(TARGET))
    providers = current["providers"]
    for aaguid, entry in source.items():
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and len(aaguid) == 36:
            providers[aaguid.lower()] = {"name": name[:64], "icon": icon_for(name)}
    current["providers"] = dict(sorted(providers.items()))
    with open(TARGET, "w") as f:
        json.dump(current, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(f"{len(providers)} providers in {TARGET}")


if __name__ == "__main__":
    main()
