#!/bin/sh
# gilf self-host command (SPEC §4.3), as an example an operator can start from.
#
# Usage: run.sh <archivePath> <shellPath> <timeoutMs>
#
# gilf runs it with GILF_SELF_HOST_COMMAND split on whitespace, followed by
# those three arguments, and reads the marker lines it prints. This example
# uses the machine it runs on as the "isolated compute": it extracts the
# archive into a private temporary directory and runs the shell under
# bubblewrap when bwrap is installed, without network when
# GILF_SELF_HOST_NETWORK is "none" (the default). Without bwrap it runs the
# shell unsandboxed and says so on stderr: use that only for your own code.
# It removes its temporary directory in every outcome.
set -eu

if [ "$#" -ne 3 ]; then
	echo "usage: $0 <archivePath> <shellPath> <timeoutMs>" >&2
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

work=$(mktemp -d "${TMPDIR:-/tmp}/gilf-selfhost-run.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

mkdir "$work/home"
tar -xzf "$archive" -C "$work" --no-same-owner --no-same-permissions
cp "$shell" "$work/validate.sh"

# Seconds, rounded up; timeout(1) is the inner deadline, gilf keeps its own.
secs=$(((timeout_ms + 999) / 1000))

if command -v bwrap >/dev/null 2>&1; then
	set -- bwrap --die-with-parent --new-session --unshare-pid --unshare-ipc --unshare-uts \
		--ro-bind / / --dev /dev --proc /proc --tmpfs /tmp \
		--bind "$work" "$work" --ro-bind "$work/validate.sh" "$work/validate.sh" \
		--setenv HOME "$work/home" --setenv TMPDIR /tmp --chdir "$work/repo"
	if [ "$network" = none ]; then
		set -- "$@" --unshare-net
	fi
	set -- "$@" sh "$work/validate.sh"
else
	echo "run.sh: bwrap not found; running the shell WITHOUT a sandbox" >&2
	cd "$work/repo"
	HOME=$work/home
	export HOME
	set -- sh "$work/validate.sh"
fi

status=0
timeout -k 10 "$secs" "$@" || status=$?
exit "$status"
