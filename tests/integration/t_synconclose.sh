#!/usr/bin/env bash
# sync_on_close = yes: close() of a written file returns once its data is
# durable, so a kill -9 right after the close loses nothing.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd sha256sum

default_conf | mount_key 'sync_on_close = yes' >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
write_files() {
	local i
	for i in 1 2 3; do
		head -c $((4 << 20 | i * 4099)) /dev/urandom >"$T/src$i" || return 1
		cp "$T/src$i" "$MNT/f$i" || return 1
	done
}
check "3 files written and closed, no fsync" write_files
check "kill -9 right after the closes" crash_fs
check "remount" mount_fs "$T/c.conf"
for i in 1 2 3; do
	check "file $i intact after the kill" cmp "$T/src$i" "$MNT/f$i"
done
check "unmount" umount_fs
tap_exit
