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
# between runs by a third. Before every run the engines finish, unmeasured,
# what the runs before left them (-settle, on by default: SQLite's WAL
# checkpointed, PostgreSQL vacuumed and checkpointed), so that no handler's
# run pays for another's writes.
#
# Usage: bench/intake.sh [intakeload flags, e.g. -duration 10s -repeat 5 -prs 1,500 -c 64 -synchronous NORMAL -settle=false]
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
# CPU time the hypervisor gave to others while we waited for it (the
# "steal" column of /proc/stat): on a shared VM it is what makes the
# machine's speed drift between runs, and why each table shows ratios.
cpu_ticks() { awk '/^cpu / {print $2+$3+$4+$5+$6+$7+$8+$9, $9}' /proc/stat; }
read -r total0 steal0 < <(cpu_ticks)
"$bin/intakeload" -payload "$payload" -postgres "$@"
read -r total1 steal1 < <(cpu_ticks)
if ((total1 > total0)); then
	echo "steal: $(((steal1 - steal0) * 100 / (total1 - total0)))% of the CPU time during the bench went to other guests of the host"
fi
