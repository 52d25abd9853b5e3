# Two entry points that work on a fresh Debian 12 machine with Swift installed.
.PHONY: serve test test-swift test-browser fuzz bench

## Run the server on its embedded defaults: http://localhost:8080, rpId localhost, SQLite in ./data/
serve:
	@scripts/install-deps.sh
	swift run keyfob serve

## Run every test: Swift unit and HTTP tests, then the real binary in headless Chromium.
test: test-swift test-browser

test-swift:
	@scripts/install-deps.sh --test
	swift build --build-tests
	swift test --skip-build

test-browser:
	@scripts/install-deps.sh --test
	swift build --product keyfob
	python3 -m pytest Tests/e2e -q

## libFuzzer for 60 s over every WebAuthn parser (TARGET=NostrFuzz: every nostr decoder); see README.
TARGET ?= WebAuthnFuzz
fuzz:
	swift build -c debug --scratch-path .build-fuzz --product $(TARGET) --sanitize fuzzer -Xswiftc -sanitize=fuzzer,address 2>&1 | grep -v 'Cannot export local symbol'
	mkdir -p Fuzz/corpus-$(TARGET) Fuzz/artifacts
	SWIFT_BACKTRACE=enable=no ./.build-fuzz/debug/$(TARGET) Fuzz/corpus-$(TARGET) -max_total_time=60 -artifact_prefix=Fuzz/artifacts/ -print_final_stats=1

## Benchmarks beside raw OpenSSL figures.
bench:
	Benchmarks/compare.sh
