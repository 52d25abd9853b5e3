#!/usr/bin/env bash
# Installs what building and testing Keyfob needs on Debian 12, skipping what is there.
#   scripts/install-deps.sh          C libraries (enough to build and run the server)
#   scripts/install-deps.sh --test   plus headless Chromium, chromedriver, Firefox ESR, Selenium and
#                                    marionette-driver for the browser tests
set -euo pipefail
packages=(libssl-dev libcbor-dev libsecp256k1-dev libsodium-dev libsqlite3-dev zlib1g-dev pkg-config)
# --test: the browser tests' Chromium, the deployment and PostgreSQL tests' servers, and the load
# harness's wrk and Go peer (built offline against Debian's Go packages).
[ "${1:-}" = "--test" ] && packages+=(chromium chromium-driver firefox-esr openssl nginx systemd postgresql zbar-tools wrk
  golang-go golang-github-duo-labs-webauthn-dev golang-github-mattn-go-sqlite3-dev golang-github-lib-pq-dev)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ "${1:-}" = "--test" ]; then
  # Selenium and pytest for the browser tests: already importable, else pip; where the system
  # Python refuses pip (PEP 668, stock Debian 12), a virtual environment in .venv/ that the
  # Makefile then uses (scripts/python).
  # nostr-sdk (rust-nostr) is the third-party NIP-46 client, nostr-relay the third-party relay;
  # cryptography the software passkey's; webauthn (py_webauthn) and uvicorn the Python peer's;
  # py-sr25519-bindings (schnorrkel), scalecodec and substrate-interface check Polkadot signatures;
  # axe-core-python carries axe-core, the accessibility check the page tests run; marionette-driver
  # is Mozilla's own client for Firefox (the Firefox extension test; no geckodriver); schemathesis and
  # openapi-spec-validator check the server against docs/openapi.json (test_openapi.py).
  py=python3; [ -x .venv/bin/python3 ] && py=.venv/bin/python3
  if ! $py -c "import selenium, pytest, nostr_sdk, nostr_relay, cryptography, webauthn, uvicorn, sr25519, scalecodec, substrateinterface, axe_core_python, marionette_driver, schemathesis, openapi_spec_validator" 2>/dev/null; then
    if [ "$py" = python3 ] && python3 -m pip install -q selenium pytest nostr-sdk nostr-relay cryptography webauthn uvicorn py-sr25519-bindings scalecodec substrate-interface axe-core-python marionette-driver schemathesis openapi-spec-validator 2>/dev/null; then :; else
      if [ ! -x .venv/bin/python3 ]; then
        dpkg -s python3-venv >/dev/null 2>&1 || { $SUDO apt-get update -qq; DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null; }
        python3 -m venv .venv
      fi
      .venv/bin/python3 -m pip install -q selenium pytest nostr-sdk nostr-relay cryptography webauthn uvicorn py-sr25519-bindings scalecodec substrate-interface axe-core-python marionette-driver schemathesis openapi-spec-validator
    fi
  fi
fi
