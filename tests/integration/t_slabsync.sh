#!/usr/bin/env bash
# A commit syncs the slabs written since the last one side by side, not one
# after the other: on a parallel file system each fdatasync is a round trip
# to the storage servers, and a commit that synced hundreds of slabs in
# turn held every fsync behind it for as many round trips.
#   - the tier lives on powerfs with POWERFS_FSYNC_MS (each fsync of a file
#     takes that long before it makes the file durable, side by side with
#     the others), in slabs of 2 blocks, so a 48 MiB file spans 24 slabs;
#   - fsync of the file: powerfs saw several slab fsyncs at once;
#   - kill -9 and a power cut that undoes every write not fsync'd: the file
#     is intact after the remount, so each sync the ring ran really made its
#     slab durable before the map named it;
#   - while the disk fails its flushes, fsync of a file over many slabs
#     returns EIO, and once it flushes again, still EIO (the failed flush
#     is never forgotten), while a file written after it syncs as usual;
#   - two tiers on that disk, a slab written on each: they flush side by
#     side too.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd "$PY"
FSYNC_MS=100
powerfs_setup nvme0

# pf_mount: the disk comes up, slow to flush, failing its flushes while
# $T/fail exists; the next cut keeps nothing unsynced.
pf_mount() { powerfs_mount POWERFS_FSYNC_FAIL="$T/fail" POWERFS_FSYNC_MS=$FSYNC_MS POWERFS_KEEP=0; }

# The metadata stays off powerfs: its syncs are not what is counted.
default_conf | sed "s|^path = $T/nvme0$|path = $DISK/nvme0\nslab_size = 2M|; s|^capacity = 256M|capacity = 64M|" |
	mount_key 'commit_interval = 60' >"$T/c.conf"

# at_once: the most fsyncs powerfs ran at once, from its last cut's log.
at_once() {
	echo "# $(grep '^powerfs: fsyncs:' "$T/pf.log")" >&2
	sed -n 's/^powerfs: fsyncs: [0-9]*, at most \([0-9]*\) at once$/\1/p' "$T/pf.log"
}

check "powerfs is built ($POWERFS)" test -x "$POWERFS"
pf_mount || { fail "powerfs mount"; tap_exit; exit; }
mount_fs "$T/c.conf" || { fail "mount"; tap_exit; exit; }
ok "mounted with the tier on a disk whose fsyncs take $FSYNC_MS ms"
head -c $((48 << 20)) /dev/urandom >"$T/src"
check "48 MiB written" cp "$T/src" "$MNT/f"
t0=$(date +%s.%N)
check "fsync of the file" sync "$MNT/f"
t1=$(date +%s.%N)
echo "# fsync took $(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }") s"
check "kill -9 of the daemon" crash_fs
check "the power goes" powerfs_cut
max=$(at_once)
# One at a time, as before, is 1; 4 is what io_uring runs at once on a
# single CPU at the least.
check "slab fsyncs ran side by side (${max:-?} at once)" test "${max:-0}" -ge 4
pf_mount || { fail "powerfs remount"; tap_exit; exit; }
check "mount after the power cut" mount_fs "$T/c.conf"
check "the fsync'd file is intact" cmp "$T/src" "$MNT/f"

write_fsync_py
cp "$T/src" "$MNT/g"
touch "$T/fail"
r=$("$PY" "$T/fsync.py" "$MNT/g")
check "fsync while the disk fails its flushes: EIO (got $r)" test "$r" = EIO
rm -f "$T/fail"
r=$("$PY" "$T/fsync.py" "$MNT/g")
check "fsync again once it flushes: still EIO (got $r)" test "$r" = EIO
head -c $((12 << 20)) /dev/urandom >"$T/src2"
cp "$T/src2" "$MNT/h"
r=$("$PY" "$T/fsync.py" "$MNT/h")
check "a file written after it: fsync ok (got $r)" test "$r" = ok
check "unmount clean" umount_fs
check "the disk unmounts" powerfs_cut

# Two tiers on the slow disk, one slab each: the tiers flush side by side
# too (one after the other, the disk's flush and a parallel file system's
# round trips added up).
mkdir -p "$BACK/two0" "$BACK/two1"
two_tier_conf 1M | sed "s|$T/nvme|$DISK/two|; s|$T/meta|$T/meta2|; s|^capacity = 256M|capacity = 64M|" |
	mount_key 'commit_interval = 60' >"$T/c2.conf"
pf_mount || { fail "powerfs mount (two tiers)"; tap_exit; exit; }
mount_fs "$T/c2.conf" || { fail "mount (two tiers)"; tap_exit; exit; }
head -c $((8 << 20)) /dev/urandom >"$T/src3"
cp "$T/src3" "$MNT/s"
check "two tiers: fsync of a file striped over both" sync "$MNT/s"
check "two tiers: unmount clean" umount_fs
check "two tiers: the disk unmounts" powerfs_cut
max=$(at_once)
check "two tiers flushed side by side (${max:-?} at once)" test "${max:-0}" -ge 2
tap_exit
