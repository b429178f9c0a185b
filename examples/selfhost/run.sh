#!/bin/sh
# gilf self-host command (SPEC §4.3), as an example an operator can start from.
#
# Usage: run.sh [--seccomp FILE] <archivePath> <shellPath> <timeoutMs>
#
# gilf runs it with GILF_SELF_HOST_COMMAND split on whitespace, followed by
# those three arguments, and reads the marker lines it prints. This example
# uses the machine it runs on as the "isolated compute": it extracts the
# archive into a private temporary directory and runs the shell in a
# bubblewrap sandbox, unprivileged: as an unprivileged uid (nobody when it
# is started as root), in its own user namespace with no capabilities and
# no further user namespaces, with a cleared environment, only the system
# directories and the checkout, and no network unless GILF_SELF_HOST_NETWORK
# is "full", under gilf's own seccomp filter: FILE, as written by
# "gilf seccomp-filter -o FILE", or else what the gilf on PATH writes.
# Without bwrap or a filter it refuses to run (exit 3). It removes its
# temporary directory in every outcome. README.md says what it does not
# protect.
set -eu

filter=
if [ "$#" -eq 5 ] && [ "$1" = --seccomp ]; then
	filter=$2
	shift 2
fi
if [ "$#" -ne 3 ]; then
	echo "usage: $0 [--seccomp FILE] <archivePath> <shellPath> <timeoutMs>" >&2
	exit 2
fi
archive=$1
shell=$2
timeout_ms=$3
case $timeout_ms in
'' | *[!0-9]*)
	echo "run.sh: timeoutMs must be a number of milliseconds" >&2
	exit 2
	;;
esac
network=${GILF_SELF_HOST_NETWORK:-none}
case $network in
none | full) ;;
*)
	echo "run.sh: GILF_SELF_HOST_NETWORK must be none or full" >&2
	exit 2
	;;
esac

if ! command -v bwrap >/dev/null 2>&1; then
	echo "run.sh: bwrap not found; refusing to run pull-request code without a sandbox (apt-get install bubblewrap)" >&2
	exit 3
fi

# The uid the sandbox runs as: never root. Started as root, drop to nobody
# before bwrap, so bwrap itself is unprivileged and maps nothing of root's.
drop=
if [ "$(id -u)" -eq 0 ]; then
	drop="setpriv --reuid=65534 --regid=65534 --clear-groups --"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/gilf-selfhost-run.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# gilf's seccomp filter (no new namespaces or mounts, no ptrace, no
# socket family but unix, inet and inet6, ...): the step runs under it or
# not at all.
if [ -z "$filter" ]; then
	if ! command -v gilf >/dev/null 2>&1; then
		echo "run.sh: no seccomp filter: pass --seccomp FILE (gilf seccomp-filter -o FILE) or put gilf on PATH" >&2
		exit 3
	fi
	filter=$work/seccomp.bpf
	gilf seccomp-filter -o "$filter"
fi
if [ ! -s "$filter" ]; then
	echo "run.sh: seccomp filter $filter is missing or empty" >&2
	exit 3
fi

mkdir "$work/home" "$work/tmp"
tar -xzf "$archive" -C "$work" --no-same-owner --no-same-permissions
cp "$shell" "$work/validate.sh"
if [ -n "$drop" ]; then
	chown -R 65534:65534 "$work"
fi
chmod 0700 "$work"
if [ -n "$drop" ] && ! $drop test -x "$work/repo"; then
	echo "run.sh: $work is not reachable by uid 65534: give ${TMPDIR:-/tmp} and its parents o+x" >&2
	exit 3
fi

# Seconds, rounded up; timeout(1) is the inner deadline, gilf keeps its own.
secs=$(((timeout_ms + 999) / 1000))

set -- bwrap --die-with-parent --new-session \
	--unshare-all --unshare-user --disable-userns --cap-drop ALL --clearenv
if [ "$network" = full ]; then
	set -- "$@" --share-net
fi
for p in /usr /bin /lib /lib64 /etc/ld.so.cache /etc/ssl/certs /etc/alternatives /etc/nsswitch.conf; do
	set -- "$@" --ro-bind-try "$p" "$p"
done
set -- "$@" --proc /proc --dev /dev --tmpfs /run \
	--bind "$work/repo" /workspace --bind "$work/home" /home/sandbox --bind "$work/tmp" /tmp \
	--ro-bind "$work/validate.sh" /run/validate.sh \
	--setenv PATH /usr/local/bin:/usr/bin:/bin --setenv HOME /home/sandbox --setenv TMPDIR /tmp \
	--setenv LANG C.UTF-8 --setenv CI true \
	--remount-ro / --seccomp 3 --chdir /workspace sh /run/validate.sh

status=0
# shellcheck disable=SC2086 # $drop is a word list on purpose
timeout -k 10 "$secs" $drop "$@" 3<"$filter" || status=$?
exit "$status"
