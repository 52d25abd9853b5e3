#!/usr/bin/env bash
# Installs what building and testing Keyfob needs on Debian 12, skipping what is there.
#   scripts/install-deps.sh          C libraries (enough to build and run the server)
#   scripts/install-deps.sh --test   plus headless Chromium, chromedriver and Selenium for the browser tests
set -euo pipefail
packages=(libssl-dev libcbor-dev libsecp256k1-dev libsqlite3-dev zlib1g-dev pkg-config)
[ "${1:-}" = "--test" ] && packages+=(chromium chromium-driver python3-pytest)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ "${1:-}" = "--test" ]; then
  python3 -c "import selenium" 2>/dev/null || python3 -m pip install -q selenium
  python3 -c "import pytest" 2>/dev/null || python3 -m pip install -q pytest
fi
