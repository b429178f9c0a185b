#!/usr/bin/env bash
# Measures gilf's webhook intake against a bare net/http handler on
# loopback at concurrency 1, 16 and 64, and prints a table: requests/s,
# p99 latency, the gilf/bare ratio, and a durability check (every 2xx
# answer has its row in SQLite).
#
# Usage: bench/intake.sh [intakeload flags, e.g. -duration 10s -synchronous NORMAL]
# The payload comes from the shared test data ($GILF_SHARED_DIR, else
# ../shared beside the repository).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
shared="${GILF_SHARED_DIR:-$(dirname "$root")/shared}"
payload="$shared/data/webhooks/pull_request/opened.json"
if [[ ! -f "$payload" ]]; then
	echo "intake.sh: payload not found at $payload (set GILF_SHARED_DIR)" >&2
	exit 1
fi
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/intakeload" ./bench/intakeload)
echo "cpus: $(nproc), go: $(go env GOVERSION), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin/intakeload" -payload "$payload" "$@"
