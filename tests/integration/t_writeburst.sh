#!/usr/bin/env bash
# The write-burst reserve (fs/cache.c wb_reserve_adjust) on a real mount:
# DeepSpeed's default order (no pipeline) reads a sub-group, then writes
# all of it, reading nothing meanwhile. With the order learned and every
# RAM block kept for its next use, each of those writes waited for a
# write-back while the disk read nothing. Such waits count as idle_stalls,
# and the write-back horizon leaves wb_reserve blocks out of the kept set
# for the next burst. The disk is capped (max_bandwidth) so that write-back
# is slower than the writes; then every byte is verified.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
REPLAY=$(dirname "$TIERFS_BIN")/tierfs-replay
[ -x "$REPLAY" ] || { echo "# SKIP: $REPLAY not built"; exit 77; }

# The bench's shape at an eighth of its size: 256 MiB of state in 8
# sub-groups (32 blocks of 1 MiB each) and 85 MiB of gradients, which the
# rule keeps in RAM; 43 MiB of RAM for state.
# No read-ahead: at this disk speed it reads the next sub-group through
# the write bursts (on the bench it reads 64 blocks of a 256-block one).
replay_conf 1M 128M "gap_plan = no" "prefetch_depth = 0" | nvme0_key "max_bandwidth = 48M/s" >"$T/c.conf"
mount_fs "$T/c.conf" || { fail "mount"; tap_exit; exit 1; }
check "3 steps of the replay without its pipeline" "$REPLAY" --dir "$MNT" --state-size 256M \
	--steps 3 --pipeline off
grep -E '^(cache|order)' "$MNT/.tierfs/stats" | sed 's/^/# /'
check "the order is learned" test "$(stat_field order learned)" = yes
stalls=$(stat_field cache idle_stalls) reserve=$(stat_field cache wb_reserve)
check "writes waited for RAM while nothing was read (idle_stalls=$stalls)" test "${stalls:-0}" -gt 0
# At most half the RAM the cache may keep: 128 blocks less
# the gradients' 72 and a slot per write-back and FUSE worker.
check "the horizon leaves blocks out for the bursts (wb_reserve=$reserve)" \
	test "${reserve:-0}" -gt 0 -a "${reserve:-0}" -le 28
# Reads every file in another order: the last thing the mount sees.
check "every file holds the last step's bytes" "$REPLAY" --dir "$MNT" --state-size 256M \
	--steps 3 --pipeline off --verify-only
check "unmount clean" umount_fs
tap_exit
