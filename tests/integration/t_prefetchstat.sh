#!/usr/bin/env bash
# .tierfs/stats: prefetch_hits counts blocks read ahead that a request then
# READ ("of those, read by a request", fs/fs.h). A block read ahead and then
# overwritten whole was never read: its read was for nothing, and counting
# it as used both lies in the stats and keeps prefetch_pays() from pausing
# read-ahead that only feeds overwrites.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd dd

default_conf >"$T/p.conf"
mount_fs "$T/p.conf" || { fail mount; tap_exit; exit 1; }
dd if=/dev/urandom of="$MNT/f" bs=1M count=32 oflag=direct status=none
check "unmount clean" umount_fs
mount_fs "$T/p.conf" || { fail remount; tap_exit; exit 1; }

stat_of() { grep -oE " $1=[0-9]+" "$MNT/.tierfs/stats" | head -1 | cut -d= -f2; }
h0=$(stat_of prefetch_hits)
# A cold sequential read of blocks 0-1: read-ahead loads the next blocks.
dd if="$MNT/f" of=/dev/null bs=1M count=2 iflag=direct status=none
# prefetches counts read-aheads done, not issued: wait for them (20 s at
# most), however slow the disk or the daemon.
read_ahead_done() { [ "$(stat_of prefetches)" -ge 8 ]; }
wait_for read_ahead_done
pf=$(stat_of prefetches)
# Blocks 2-9 overwritten whole, never read.
dd if=/dev/urandom of="$MNT/f" bs=1M seek=2 count=8 oflag=direct conv=notrunc status=none
hits=$(($(stat_of prefetch_hits) - h0))
echo "# prefetches=$pf prefetch_hits=+$hits (the reader read 2 blocks, at most 1 of them read ahead)"
check "read-ahead happened" test "$pf" -ge 8
check "blocks overwritten whole are not counted as read: prefetch_hits +$hits <= 1" test "$hits" -le 1
check "unmount clean (2)" umount_fs
tap_exit
