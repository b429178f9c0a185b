#!/usr/bin/env bash
# Measures gilf's webhook intake on SQLite and on a private PostgreSQL
# server (Debian's postgresql package, started and stopped here) against a
# bare net/http handler on loopback at concurrency 1, 16 and 64, and prints
# a table per traffic shape (-prs, default 1,500 pull requests): requests/s,
# p99 latency, the gilf/bare ratio, and a durability
# check (every 2xx answer has its row in the store). The servers run in a
# child process; the load generator is a minimal HTTP/1.1 client in the
# parent. Each level alternates bare, SQLite and PostgreSQL -repeat times
# (default 3) and shows the median: on a shared machine the speed drifts
# between runs by a third.
#
# Usage: bench/intake.sh [intakeload flags, e.g. -duration 10s -repeat 5 -prs 1,500 -c 64 -synchronous NORMAL]
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
"$bin/intakeload" -payload "$payload" -postgres "$@"
