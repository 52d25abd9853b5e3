# Two entry points that work on a fresh Debian 12 machine with Swift installed.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
.PHONY: openapi openapi-client load-postgres extension serve test lint test-swift test-browser test-fuzz test-chaos test-load fuzz bench load chaos docs screenshots

## Run the server on its embedded defaults: http://localhost:8080, rpId localhost, SQLite in ./data/
serve:
	@scripts/install-deps.sh
	swift run keyfob serve

## Run every test: the format check, Swift unit and HTTP tests, the real binary in headless Chromium, a 30-second
## version of the chaos probes, a smoke run of the load harness (speed not asserted), then each
## libFuzzer target for FUZZ_SECONDS (60) from its committed seeds.
test: lint test-swift test-browser test-chaos test-load test-fuzz

## The code's format and lint rules (.swift-format): `swift format lint`, shipped with the toolchain;
## `swift format format -i -r Sources Tests Benchmarks/floor` applies them.
lint:
	swift format lint --strict -r Sources Tests Benchmarks/floor Package.swift

## The store contract tests and the multi-instance tests need PostgreSQL: scripts/postgres.sh
## starts a throwaway cluster (unless KEYFOB_TEST_POSTGRES names one) and stops it after.
test-swift:
	@scripts/install-deps.sh --test
	swift build --build-tests
	scripts/postgres.sh run swift test --skip-build

test-browser:
	@scripts/install-deps.sh --test
	swift build --product keyfob
	scripts/postgres.sh run scripts/python -m pytest Tests/e2e -q

## Photograph every page (light and dark theme, 320, 390 and 1280 px wide) into docs/screenshots/, the
## pictures README shows; the same test checks each page with axe-core in make test.
screenshots:
	@scripts/install-deps.sh --test
	swift build --product keyfob
	KEYFOB_SCREENSHOTS=$(CURDIR)/docs/screenshots scripts/python -m pytest Tests/e2e/test_pages.py -q

## Rewrite the generated parts of the docs (the settings table of docs/configuration.md) from the
## code; a Swift test fails while they are out of date.
docs:
	swift build --build-tests
	KEYFOB_UPDATE_DOCS=1 swift test --skip-build --filter SettingsTests/theConfigurationDocIsCurrent

## Rewrite docs/openapi.json and Public/openapi.json (served at /openapi.json) from scripts/openapi.py;
## OpenAPIContractTests and test_openapi.py fail while they differ or miss a route.
openapi:
	python3 scripts/openapi.py

## Regenerate Examples/KeyfobClient's client (committed) from docs/openapi.json with Apple's
## swift-openapi-generator 1.14.3; test_openapi_client.py builds and runs the example in make test.
openapi-client:
	cd Examples/KeyfobClient && swift run --package-path Generator swift-openapi-generator generate ../../docs/openapi.json \
	  --config openapi-generator-config.yaml --output-directory Sources/KeyfobClientExample/Generated

## libFuzzer over every WebAuthn parser (TARGET=NostrFuzz: every nostr decoder), from the committed
## seeds in Fuzz/seeds-TARGET; what it finds goes to Fuzz/corpus-TARGET. Longer: FUZZ_SECONDS=3600.
TARGET ?= WebAuthnFuzz
FUZZ_SECONDS ?= 60
fuzz:
	swift build -c debug --scratch-path .build-fuzz --product $(TARGET) --sanitize fuzzer -Xswiftc -sanitize=fuzzer,address 2>&1 | grep -v 'Cannot export local symbol'
	mkdir -p Fuzz/corpus-$(TARGET) Fuzz/artifacts
	SWIFT_BACKTRACE=enable=no ./.build-fuzz/debug/$(TARGET) Fuzz/corpus-$(TARGET) Fuzz/seeds-$(TARGET) -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -artifact_prefix=Fuzz/artifacts/ -print_final_stats=1

## The chaos probes in 30 seconds (part of make test): kill -9 under load, SIGTERM, slowloris,
## descriptor exhaustion, NIP-46 floods and slow readers against the debug binary.
test-chaos:
	@scripts/install-deps.sh --test
	swift build --product keyfob
	scripts/python scripts/chaos.py --quick

## Every chaos probe at full size against a release build (minutes; docs/operations.md has the
## last run's table). PostgreSQL's outage probe runs when PostgreSQL is installed.
chaos:
	@scripts/install-deps.sh --test
	swift build -c release --product keyfob
	KEYFOB_BINARY=.build/release/keyfob scripts/python scripts/chaos.py

## Both fuzz targets, briefly (part of make test).
test-fuzz:
	$(MAKE) fuzz TARGET=WebAuthnFuzz
	$(MAKE) fuzz TARGET=NostrFuzz
	$(MAKE) fuzz TARGET=PolkadotFuzz

## Benchmarks beside raw OpenSSL figures.
bench:
	Benchmarks/compare.sh

## The load harness (BENCHMARKS.md): Keyfob, a bare Hummingbird app, nginx, a Go and a Python
## relying party, and Keyfob again, one after the other in this one invocation, with the same pre-signed
## logins; one table and the ratios between them. Needs wrk, nginx, Go and py_webauthn (install-deps.sh
## --test); about 8 minutes. Knobs: SECONDS_EACH, CONNECTIONS, USERS, SYSTEMS, DATABASE, PROFILE=1, ONLY.
load:
	@scripts/install-deps.sh --test
	swift build -c release --product keyfob
	swift build -c release --product keyfob-floor
	scripts/python scripts/load/run.py

## Issue #57's PostgreSQL pass: Keyfob, the Go peer in its PostgreSQL mode, Keyfob again and two
## Keyfob instances behind nginx on one throwaway cluster (fsync on), with PostgreSQL's CPU a
## request and each target met or missed.
load-postgres:
	@scripts/install-deps.sh --test
	swift build -c release --product keyfob
	SYSTEMS=keyfob-on:postgres,go-on:postgres,keyfob-on:postgres,pair-on:postgres scripts/python scripts/load/run.py

## The same harness for 3 seconds a run on the debug build, so it cannot rot (part of make test;
## no speed is asserted, but every run must answer 2xx).
test-load:
	@scripts/install-deps.sh --test
	swift build --product keyfob
	swift build --product keyfob-floor
	SMOKE=1 BUILD=debug OUT=/tmp/keyfob-load-smoke scripts/python scripts/load/run.py
	SMOKE=1 BUILD=debug OUT=/tmp/keyfob-load-smoke-pg SYSTEMS=keyfob-on:postgres,go-on:postgres,pair-on:postgres scripts/python scripts/load/run.py

## The browser extension (Extension/): .build/extension/ to load unpacked in Chromium or Chrome, and
## .build/extension.zip. KEYFOB_SERVER=https://keyfob.example sets the server it starts with.
KEYFOB_SERVER ?= http://localhost:8080
extension:
	scripts/build-extension.sh $(KEYFOB_SERVER) $(CURDIR)/.build/extension

