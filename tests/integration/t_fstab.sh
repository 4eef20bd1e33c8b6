#!/usr/bin/env bash
# The fstab path: mount(8) -> mount.fuse3 -> tierfs CONFIG MOUNTPOINT -o ...
# A line "CONFIG MOUNTPOINT fuse.tierfs defaults 0 0" needs tierfs on mount's
# fixed PATH (make install puts it in /usr/local/bin); this test names the
# program explicitly ("PROGRAM#CONFIG", type fuse), which takes the same
# route through mount.fuse3 without installing anything on the system.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd mount umount
[ "$(id -u)" -eq 0 ] || { echo "# SKIP: mount(8) of fuse.tierfs needs root"; exit 77; }
[ -x /sbin/mount.fuse3 ] || [ -x /usr/sbin/mount.fuse3 ] || { echo "# SKIP: no mount.fuse3"; exit 77; }
default_conf >"$T/c.conf"
check "mount -t fuse -o defaults PROGRAM#CONFIG MNT" mount -t fuse -o defaults "$TIERFS_BIN#$T/c.conf" "$MNT"
mountpoint -q "$MNT" && ok "mounted" || fail "not mounted"
grep -q " $MNT fuse.tierfs " /proc/mounts && ok "listed as fuse.tierfs in /proc/mounts" ||
	fail "not fuse.tierfs in /proc/mounts"
echo hello >"$MNT/f" && [ "$(cat "$MNT/f")" = hello ] && ok "write and read" || fail "write/read"
# A detached daemon must still do tier I/O (its threads must survive the
# detach): write more than the RAM tier holds, with fsync, and read it back.
head -c $((300 * 1024 * 1024)) /dev/urandom >"$T/big"
check "detached daemon: 300 MiB through a 256 MiB RAM tier, fsync" \
	dd if="$T/big" of="$MNT/big" bs=1M conv=fsync status=none
check "detached daemon: read back equal" cmp "$T/big" "$MNT/big"
# the daemon detached: find it to wait for its write-back after umount
pid=$(pgrep -f "$T/c.conf $MNT" | head -1)
check "umount" umount "$MNT"
for _ in $(seq 300); do [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && fail "daemon still running 30 s after umount" || ok "daemon exited after umount"
mount_fs "$T/c.conf" || { fail remount; tap_exit; exit 1; }
[ "$(cat "$MNT/f" 2>/dev/null)" = hello ] && cmp -s "$T/big" "$MNT/big" &&
	ok "data kept across the fstab-style mount" || fail "data lost"
check "unmount clean" umount_fs
tap_exit
