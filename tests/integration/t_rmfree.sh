#!/usr/bin/env bash
# Removing a file frees its space even when nothing read or wrote it since
# the mount (its block map not loaded yet): statfs shows the space back
# within a few seconds, without a remount.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs

default_conf >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
check "32 MiB written and synced" dd if=/dev/urandom of="$MNT/f" bs=1M count=32 conv=fsync status=none
check "unmount" umount_fs
check "remount" mount_fs "$T/c.conf"
free_bytes() {
	local f
	f=$(stat -f -c '%f * %S' "$MNT") && echo $((f))
}
before=$(free_bytes)
check "rm without opening the file" rm "$MNT/f"
freed() {
	local i
	for i in $(seq 1 200); do
		[ $(($(free_bytes) - before)) -ge $((32 << 20)) ] && return 0
		sleep 0.1
	done
	echo "# free before $before, now $(free_bytes)"
	return 1
}
check "statfs: the 32 MiB are free again" freed
check "unmount (2)" umount_fs
tap_exit
