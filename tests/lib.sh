# Shared helpers for the integration tests (sourced). Each test prints TAP
# lines through ok/fail/skip and mounts tierfs for real.
#   TIERFS_BIN  the daemon under test (set by tests/run.sh)
#   TESTBIN     directory of the C test clients
set -u
: "${TIERFS_BIN:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/tierfs}"
: "${TESTBIN:=$(dirname "$TIERFS_BIN")/tests/bin}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
TAP_N=0
TAP_FAILS=0
ok() { TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - $*"; }
fail() { TAP_N=$((TAP_N + 1)); TAP_FAILS=$((TAP_FAILS + 1)); echo "not ok $TAP_N - $*"; }
skip() { TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - $1 # SKIP ${2:-}"; }
# check NAME CMD...: ok if CMD succeeds
check() { local n=$1; shift; if "$@"; then ok "$n"; else fail "$n"; fi; }
# check_fails NAME CMD...: ok if CMD fails
check_fails() { local n=$1; shift; if "$@"; then fail "$n"; else ok "$n"; fi; }

# T: per-test scratch directory, removed on exit (after unmounting).
T=$(mktemp -d /tmp/tierfs-t.XXXXXX)
MNT=$T/mnt
mkdir -p "$MNT"
TIERFS_PID=
cleanup() {
	if mountpoint -q "$MNT" 2>/dev/null; then fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null; fi
	[ -n "$TIERFS_PID" ] && wait "$TIERFS_PID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

# write_conf FILE: a default config (RAM tier + one directory tier) from
# the rest of the arguments appended as extra lines.
# conf_head BLOCK_SIZE RAM: [mount] with the test's metadata directory and
# a RAM tier, the start of every config here.
conf_head() {
	cat <<CONF
[mount]
metadata = $T/meta
block_size = $1

[tier ram]
type = ram
capacity = $2

CONF
}

default_conf() {
	mkdir -p "$T/nvme0" "$T/meta"
	conf_head 1M 256M
	cat <<CONF
[tier nvme0]
type = posix
path = $T/nvme0
capacity = 2G

[policy]
stripe = nvme0
CONF
}

# mount_fs CONF [opts]: start the daemon in the foreground (so its exit
# status and sanitizer reports are ours), wait until the mount is up.
mount_fs() {
	local conf=$1; shift
	"$TIERFS_BIN" "$conf" "$MNT" -f "$@" 2>>"$T/daemon.log" &
	TIERFS_PID=$!
	local i
	for i in $(seq 1 600); do
		mountpoint -q "$MNT" && return 0
		kill -0 "$TIERFS_PID" 2>/dev/null || { cat "$T/daemon.log" >&2; TIERFS_PID=; return 1; }
		sleep 0.05
	done
	echo "mount did not come up" >&2
	cat "$T/daemon.log" >&2
	return 1
}

# umount_fs: unmount and wait for the daemon; returns the daemon's status.
umount_fs() {
	fusermount3 -u "$MNT" || return 1
	local rc=0
	if [ -n "$TIERFS_PID" ]; then wait "$TIERFS_PID"; rc=$?; fi
	TIERFS_PID=
	if grep -qE 'Sanitizer|runtime error' "$T/daemon.log" 2>/dev/null; then
		cat "$T/daemon.log" >&2
		rc=99
	fi
	return $rc
}

tap_exit() { echo "1..$TAP_N"; [ $TAP_FAILS -eq 0 ]; }
