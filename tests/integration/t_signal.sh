#!/usr/bin/env bash
# SIGTERM and SIGINT end the daemon cleanly: the mount goes away, the daemon
# exits 0, and data written without fsync (still dirty in RAM when the
# signal came) is on disk at the next mount.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
default_conf >"$T/c.conf"
head -c $((40 * 1024 * 1024 + 123)) /dev/urandom >"$T/data"
for sig in TERM INT; do
	mount_fs "$T/c.conf" || { fail "mount ($sig)"; continue; }
	cp "$T/data" "$MNT/f.$sig" # no fsync: blocks are dirty in the RAM tier
	kill -"$sig" "$TIERFS_PID"
	rc=0
	wait "$TIERFS_PID" || rc=$?
	TIERFS_PID=
	[ $rc -eq 0 ] && ok "SIG$sig: daemon exited 0" || fail "SIG$sig: daemon exited $rc"
	mountpoint -q "$MNT" && { fail "SIG$sig: still mounted"; fusermount3 -u "$MNT"; } ||
		ok "SIG$sig: unmounted"
	grep -qE 'Sanitizer|runtime error' "$T/daemon.log" && fail "SIG$sig: sanitizer report" ||
		ok "SIG$sig: no sanitizer report"
	mount_fs "$T/c.conf" || { fail "remount ($sig)"; continue; }
	check "SIG$sig: unsynced data intact after remount" cmp "$T/data" "$MNT/f.$sig"
	check "unmount clean" umount_fs
done
tap_exit
