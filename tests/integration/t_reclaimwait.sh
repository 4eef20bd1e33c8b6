#!/usr/bin/env bash
# .tierfs/stats counts the waits of requests for a RAM block, and their
# time (cache reclaim_waits, reclaim_wait_ms): what a RAM tier too small
# for the working set, or a tier too slow to take the write-back, costs
# the application. A write that fits in RAM never waits; 64 MiB written
# through 24 MiB of RAM (64 KiB blocks) onto a tier capped at 32 MB/s must
# wait for most of its write-back (40 MiB at 32 MB/s: over a second), and
# the waits and their time show.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
require_cmd dd cmp


default_conf >"$T/c.conf"
mount_fs "$T/c.conf" || { fail mount; tap_exit; exit 1; }
head -c $((8 << 20)) /dev/urandom >"$T/small"
check "write 8 MiB into 256 MiB of RAM" dd if="$T/small" of="$MNT/small" bs=1M status=none
grep '^cache' "$MNT/.tierfs/stats" | sed 's/^/# /'
check "no request waited for RAM (reclaim_waits=$(stat_field cache reclaim_waits))" \
	test "$(stat_field cache reclaim_waits)" = 0
check "and no wait time (reclaim_wait_ms=$(stat_field cache reclaim_wait_ms))" \
	test "$(stat_field cache reclaim_wait_ms)" = 0
check "unmount" umount_fs

rm -rf "$T/meta" "$T/nvme0"
default_conf | sed 's/^block_size = 1M/block_size = 64K/; s/^capacity = 256M/capacity = 24M/
	s|^path = \(.*\)|path = \1\nmax_bandwidth = 32M/s|' >"$T/c.conf"
grep -q '^max_bandwidth = 32M/s' "$T/c.conf" || fail "config edit"
mount_fs "$T/c.conf" || { fail "mount (24 MiB of RAM)"; tap_exit; exit 1; }
head -c $((64 << 20)) /dev/urandom >"$T/big"
check "write 64 MiB through 24 MiB of RAM onto a tier capped at 32 MB/s" \
	dd if="$T/big" of="$MNT/big" bs=1M status=none
grep '^cache' "$MNT/.tierfs/stats" | sed 's/^/# /'
check "requests waited for RAM (reclaim_waits=$(stat_field cache reclaim_waits))" \
	test "$(stat_field cache reclaim_waits)" -gt 0
check "and the time shows (reclaim_wait_ms=$(stat_field cache reclaim_wait_ms))" \
	test "$(stat_field cache reclaim_wait_ms)" -gt 0
check "the file reads back whole" cmp "$T/big" "$MNT/big"
check "unmount" umount_fs
tap_exit
